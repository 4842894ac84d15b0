// close and abort on many tasks at once. `--failed` picks every open task that ended without a usable result (failed,
// gone, interrupted), `--settled` every open task whose cycle settled (completed, blocked and those): of every owner
// (what `list` shows), or of `--owner`. A picked selection of more than one task is confirmed first: asked on a
// terminal, `--yes` otherwise (refused by name without it). Tasks named by id are acted on without asking.
import { createInterface } from "node:readline/promises";
import { DshError, isDshError } from "../../core/errors.js";
import type { AgentStatus } from "../../core/types.js";
import type { Result } from "../../protocol/methods.js";
import type { CliContext, DaemonConnection } from "../common/context.js";
import { safeLine } from "../format/safe.js";
import type { TaskRow } from "../format/table.js";
import { usage } from "../common/options.js";

export type Pick = "failed" | "settled";

/** The statuses each flag picks (never running work: that is `abort ID` or `abort --all`). */
export const PICKED: Record<Pick, readonly AgentStatus[]> = {
  failed: ["failed", "gone", "interrupted"],
  settled: ["completed", "blocked", "failed", "gone", "interrupted"],
};

/** Every open task in the picked statuses (all owners unless `owner`), oldest first: the daemon pages them. */
export async function pickTasks(conn: DaemonConnection, pick: Pick, owner?: string): Promise<TaskRow[]> {
  const params = { status: [...PICKED[pick]], ...(owner !== undefined ? { owner } : {}) };
  const rows: TaskRow[] = [];
  for (let page: Result<"task.list"> | undefined = await conn.request("task.list", params); page; ) {
    rows.push(...page.tasks);
    page =
      page.nextCursor !== undefined
        ? await conn.request("task.list", { ...params, cursor: page.nextCursor })
        : undefined;
  }
  return rows.sort((a, b) => a.timing.createdAt - b.timing.createdAt);
}

/** One line per task for a confirmation or a report: id, agent, status, brief (child text neutralised). */
export function taskLine(t: TaskRow): string {
  const brief = t.brief ? `  ${safeLine(t.brief)}` : "";
  return `  ${t.taskId}  ${safeLine(t.agent.name)}  ${t.status}${brief}`;
}

/**
 * Go ahead with `rows`? One task, or `--yes`: yes. On a terminal: the tasks are listed and the person asked (only
 * `y`/`yes` goes on). Without a terminal to ask on, a selection of several tasks needs --yes: a usage error says so.
 */
export async function confirmPicked(
  ctx: CliContext,
  verb: "close" | "abort",
  pick: Pick,
  rows: TaskRow[],
  yes: boolean,
): Promise<boolean> {
  if (rows.length <= 1 || yes) return true;
  const canAsk = process.stdin.isTTY === true && (ctx.io.errIsTTY ?? ctx.io.isTTY);
  if (!canAsk)
    throw usage(
      `${verb} --${pick} picks ${rows.length} tasks; pass --yes to ${verb} them all (there is no terminal to ask on)`,
    );
  ctx.io.err(`${verb} these ${rows.length} ${pick} tasks?\n${rows.map(taskLine).join("\n")}\n`);
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const onAbort = () => rl.close();
    ctx.signal.addEventListener("abort", onAbort, { once: true });
    const answer = await rl.question(`${verb} ${rows.length} tasks? [y/N] `).catch(() => "");
    ctx.signal.removeEventListener("abort", onAbort);
    return /^\s*y(es)?\s*$/i.test(answer);
  } finally {
    rl.close();
  }
}

/** What happened to one task of a bulk close. */
export type CloseOutcome =
  | { taskId: string; agent?: string; was?: string; status: "closed" }
  | { taskId: string; error: { code: string; message: string } };

/** Close each task (the pane too with closePane); one task's error does not stop the rest. */
export async function closeEach(
  conn: DaemonConnection,
  ids: string[],
  closePane: boolean,
  before: Map<string, TaskRow>,
): Promise<CloseOutcome[]> {
  const out: CloseOutcome[] = [];
  for (const taskId of ids) {
    try {
      const r = await conn.request("task.close", { taskId, ...(closePane ? { closePane: true } : {}) });
      const was = before.get(taskId)?.status;
      out.push({ taskId, agent: r.agent.name, ...(was !== undefined ? { was } : {}), status: "closed" });
    } catch (e) {
      if (isDshError(e) && e.code === "DAEMON_UNAVAILABLE") throw e; // nothing more can be done
      const err = isDshError(e) ? e : new DshError("INTERNAL", String(e));
      out.push({ taskId, error: { code: err.code, message: err.message } });
    }
  }
  return out;
}

/** The human lines of a bulk close: one per task on stdout, errors on stderr. */
export function printCloseOutcomes(ctx: CliContext, outcomes: CloseOutcome[]): void {
  for (const o of outcomes) {
    if ("error" in o) ctx.io.err(`${o.taskId}: ${o.error.code}: ${o.error.message}\n`);
    else ctx.io.out(`closed  ${o.taskId}  ${safeLine(o.agent ?? "")}${o.was ? `  (was ${o.was})` : ""}\n`);
  }
}
