// list (ls): tasks in a table, from the daemon (paged) or, when none runs, from the task index on disk.
import { safeLine } from "../format/safe.js";
import type { Command } from "commander";
import type { Result } from "../../protocol/methods.js";
import type { CliContext } from "../common/context.js";
import { colorEnabled } from "../format/color.js";
import { renderTable, type TaskRow } from "../format/table.js";
import { printJson } from "../common/io.js";
import { isDshError } from "../../core/errors.js";
import { offlineRows } from "../common/task-files.js";
import { examples, jsonOption, STATUSES, usage } from "../common/options.js";

export function registerListCommand(program: Command, ctx: CliContext): void {
  const list = program
    .command("list")
    .alias("ls")
    .description("tasks in a table: id, agent, role, status, age, runtime, cwd (open tasks unless --all)")
    .option("--status <list>", "only these statuses, comma-separated")
    .option("--owner <id>", "only tasks of this owner")
    .option("--all", "include closed tasks")
    .option("--external", "also list Herdr agents dsh-herdr did not spawn")
    .option("--wide", "also show each task's cost and tokens (COST, TOKENS)");
  jsonOption(list);
  examples(list, [
    "dsh-herdr list",
    "dsh-herdr list --status running,blocked",
    "dsh-herdr list --all --wide",
    "dsh-herdr list --all --json",
  ]);
  type ListOptions = {
    status?: string;
    owner?: string;
    all?: boolean;
    external?: boolean;
    wide?: boolean;
    json?: boolean;
  };
  list.action(async (o: ListOptions) => {
    const params: Record<string, unknown> = {};
    if (o.status !== undefined) {
      const wanted = o.status
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
      const bad = wanted.filter((s) => !(STATUSES as readonly string[]).includes(s));
      if (bad.length > 0 || wanted.length === 0)
        throw usage(`--status ${o.status}: unknown status ${bad.join(", ")}; use ${STATUSES.join(", ")}`);
      params["status"] = wanted;
    }
    if (o.owner !== undefined) params["owner"] = o.owner;
    if (o.external) params["external"] = true;
    // Without --all or --status, ask only for tasks that are not closed, so a long history is not paged through.
    if (!o.all && params["status"] === undefined) params["status"] = STATUSES.filter((s) => s !== "closed");
    let res: Result<"task.list">;
    let offline = false;
    try {
      const conn = await ctx.connect();
      res = await conn.request("task.list", params);
      // The daemon answers in pages (newest first): follow the cursor to the end.
      for (let page = res; page.nextCursor !== undefined; ) {
        page = await conn.request("task.list", { ...params, external: false, cursor: page.nextCursor });
        res.tasks.push(...page.tasks);
      }
    } catch (e) {
      if (!isDshError(e) || e.code !== "DAEMON_UNAVAILABLE") throw e;
      // No daemon: the task index on disk answers, as show/diff/result read their files.
      const statuses = params["status"] === undefined ? undefined : new Set(params["status"] as string[]);
      const rows = offlineRows(ctx.home).filter(
        (t) => (!statuses || statuses.has(t.status)) && (o.owner === undefined || t.owner === o.owner),
      );
      res = { tasks: rows as TaskRow[] };
      offline = true;
    }
    const tasks = res.tasks;
    if (offline && !o.json)
      ctx.io.err(
        `daemon not running: listed from the task index (statuses as last recorded${o.external ? "; --external needs the daemon" : ""})\n`,
      );
    if (o.json)
      return printJson(ctx.io, {
        tasks,
        ...(res.external ? { external: res.external } : {}),
        ...(offline ? { offline: true } : {}),
      });
    if (tasks.length === 0 && !res.external?.length)
      return ctx.io.out(o.all ? "no tasks\n" : "no open tasks (dsh-herdr list --all shows closed ones)\n");
    ctx.io.out(
      renderTable(
        tasks,
        Date.now(),
        // A terminal that reports 0 columns (a pty nobody sized: a CI runner, `script`, some ssh sessions) gets 80.
        ctx.io.isTTY ? (ctx.io.columns > 0 ? ctx.io.columns : 80) : 400,
        undefined,
        colorEnabled(ctx.io.env, ctx.io.isTTY),
        o.wide === true,
      ).join("\n") + "\n",
    );
    for (const x of res.external ?? [])
      ctx.io.out(
        `external  ${safeLine(String(x["name"] ?? "-"))}  ${safeLine(String(x["paneId"] ?? "-"))}  ${safeLine(String(x["status"]))}\n`,
      );
  });
}
