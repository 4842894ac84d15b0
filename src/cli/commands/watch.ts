// watch: a live table of tasks, updated from task.subscribe pushes; line output when stdout is not a terminal. With a
// keyboard too (stdin a terminal), the rows can be acted on (watch-keys.ts).
import type { Command } from "commander";
import { DshError } from "../../core/errors.js";
import type { AgentResult, AgentStatus } from "../../core/types.js";
import type { CliContext } from "../common/context.js";
import { ANSI, LiveBlock } from "../format/live.js";
import { colorEnabled, painter, statusStyle } from "../format/color.js";
import { questionLine, renderTable, type TaskRow } from "../format/table.js";
import { neutraliseResult, safeLine } from "../format/safe.js";
import { printJson } from "../common/io.js";
import { resolveId } from "../common/task-files.js";
import { examples, jsonOption, STATUSES } from "../common/options.js";
import { keysPossible, WatchKeys } from "./watch-keys.js";

/** Every status but closed, from the one list: a new status is shown without --all unless it is "closed". */
export const NOT_CLOSED: AgentStatus[] = STATUSES.filter((s) => s !== "closed");

const SETTLING = new Set(["starting", "working", "running"]);

export interface WatchOptions {
  /** Only these tasks (default: every task of the home). */
  taskIds?: string[];
  owner?: string;
  /** Include closed tasks in the first table. */
  all?: boolean;
  /** Return once every watched task has settled (used by the demo). */
  untilSettled?: boolean;
  json?: boolean;
}

function clock(now: number): string {
  return new Date(now).toISOString().slice(11, 19);
}

/** Run the watch until Ctrl+C, the daemon going away, or (untilSettled) every watched task settling. */
export async function watchTasks(ctx: CliContext, o: WatchOptions): Promise<void> {
  const conn = await ctx.connect();
  const rows = new Map<string, TaskRow>();
  const wanted = o.taskIds ? new Set(o.taskIds) : undefined;
  // --owner is the daemon's filter (subscribe and list take an owner id or the label it shows for one).
  const keep = (r: AgentResult) => !wanted || wanted.has(r.taskId);
  let live = ctx.io.isTTY && !o.json ? new LiveBlock() : undefined;
  const color = colorEnabled(ctx.io.env, ctx.io.isTTY);
  const paint = painter(color);
  const st = (s: string) => (statusStyle(s) ? paint(statusStyle(s)!, s) : s);
  const sorted = () => [...rows.values()].sort((a, b) => a.timing.createdAt - b.timing.createdAt);
  // Keys (a terminal on stdin too; not for the demo's --until-settled view): the rows can be acted on.
  let quit: () => void = () => undefined;
  const keys =
    live && !o.untilSettled && keysPossible(ctx)
      ? new WatchKeys({
          ctx,
          conn,
          rows: sorted,
          redraw: () => draw(),
          cleared: () => (live = new LiveBlock()),
          quit: () => quit(),
        })
      : undefined;
  const draw = () => {
    if (!live || keys?.suspended) return;
    const width = ctx.io.columns - 1;
    const panel = keys?.panel(width, process.stdout.rows ?? 24);
    if (panel) return void ctx.io.out(live.frame(panel));
    const tasks = sorted();
    const table =
      tasks.length > 0
        ? renderTable(tasks, Date.now(), width, undefined, color)
        : ["no tasks yet (waiting for spawns)"];
    const status = `watching ${tasks.length} task(s) · ${clock(Date.now())}`;
    // Without keys there is no selection: each blocked task's question, under the table.
    const questions = keys ? [] : tasks.map((t) => questionLine(t, width)).filter((l) => l !== undefined);
    const footer = keys ? keys.footer(status, width) : [...questions, `${status} · Ctrl+C to stop`];
    ctx.io.out(live.frame([...(keys ? keys.highlight(table, tasks) : table), "", ...footer]));
  };
  const allSettled = () => rows.size > 0 && [...rows.values()].every((r) => !SETTLING.has(r.status));

  await new Promise<void>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    let finished = false;
    const finish = (err?: Error) => {
      if (finished) return;
      finished = true;
      keys?.stop();
      if (timer) clearInterval(timer);
      conn.close(); // ends the subscription: no pushes after watch returns
      ctx.signal.removeEventListener("abort", onAbort);
      if (live) ctx.io.out(ANSI.showCursor);
      if (err) reject(err);
      else resolve();
    };
    const onAbort = () => finish();
    quit = onAbort;
    ctx.signal.addEventListener("abort", onAbort, { once: true });
    conn.onClose(() =>
      finish(new DshError("DAEMON_UNAVAILABLE", "the daemon went away; restart it with `dsh-herdr daemon start`")),
    );
    conn.onPush((method, params) => {
      if (method !== "task.status") return;
      const p = params as { taskId: string; status: string; result: AgentResult };
      if (!keep(p.result)) return;
      const before = rows.get(p.taskId)?.status;
      // With keys, a task closed from the table leaves it (unless closed ones were asked for).
      if (keys && !o.all && !wanted && p.result.status === "closed") rows.delete(p.taskId);
      else rows.set(p.taskId, p.result);
      if (o.json) printJson(ctx.io, p);
      else if (live) draw();
      else if (before !== p.result.status) {
        const r = neutraliseResult(p.result);
        ctx.io.out(
          `${clock(Date.now())}  ${r.taskId}  ${r.agent.name}  ${before ? st(safeLine(before)) : "new"} → ${st(r.status)}  ${r.summary}\n`,
        );
      }
      if (o.untilSettled && allSettled()) finish();
    });
    const start = async () => {
      // Subscribe first so no change between the snapshot and the subscription is lost.
      await conn.request("task.subscribe", {
        ...(o.taskIds ? { taskIds: o.taskIds } : {}),
        ...(o.owner ? { owner: o.owner } : {}),
      });
      // Without --all only non-closed tasks are shown: ask for those, so closed history cannot fill the page.
      const statusFilter = !o.all && !wanted ? { status: NOT_CLOSED } : {};
      const res = await conn.request("task.list", {
        ...(o.owner ? { owner: o.owner } : {}),
        ...statusFilter,
        limit: 1000,
      });
      for (const t of res.tasks) {
        if (!keep(t) || rows.has(t.taskId)) continue;
        if (!o.all && !wanted && t.status === "closed") continue;
        rows.set(t.taskId, t);
      }
      if (live) {
        ctx.io.out(ANSI.hideCursor);
        keys?.start();
        draw();
        timer = setInterval(draw, 1000); // ages and the clock tick even without pushes
      } else if (!o.json) {
        for (const row of rows.values()) {
          const t = neutraliseResult(row);
          ctx.io.out(`${clock(Date.now())}  ${t.taskId}  ${t.agent.name}  ${st(t.status)}  ${t.summary}\n`);
        }
      }
      if (o.untilSettled && allSettled()) finish();
    };
    start().catch((e: unknown) => finish(e as Error));
  });
}

export function registerWatchCommand(program: Command, ctx: CliContext): void {
  const watch = program
    .command("watch")
    .description(
      "a live table of tasks that updates in place as statuses change; on a terminal: ↑↓/jk select, enter open, d diff, r respond, a abort, c close, l land, q quit",
    )
    .argument("[ids...]", "only these tasks (ids or prefixes)")
    .option("--owner <id>", "only tasks of this owner")
    .option("--all", "include closed tasks")
    .option("--until-settled", "exit once every watched task has settled");
  jsonOption(watch);
  examples(watch, [
    "dsh-herdr watch",
    "dsh-herdr watch --until-settled tmg3 tk81",
    "dsh-herdr watch --json | jq .status",
  ]);
  watch.action(async (ids: string[], o: { owner?: string; all?: boolean; untilSettled?: boolean; json?: boolean }) => {
    const opts: WatchOptions = { all: o.all === true, untilSettled: o.untilSettled === true, json: o.json === true };
    if (ids.length > 0) opts.taskIds = ids.map((id) => resolveId(ctx.home, id));
    if (o.owner) opts.owner = o.owner;
    await watchTasks(ctx, opts);
  });
}
