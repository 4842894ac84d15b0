// wait, respond, abort, close: acting on tasks through the daemon (several at once: bulk.ts).
import type { Command } from "commander";
import type { Result } from "../../protocol/methods.js";
import type { CliContext } from "../common/context.js";
import { parseDuration } from "../common/duration.js";
import { EXIT } from "../common/exit-codes.js";
import { renderCard } from "../format/card.js";
import { colorEnabled } from "../format/color.js";
import { printJson } from "../common/io.js";
import { resolveId } from "../common/task-files.js";
import type { TaskRow } from "../format/table.js";
import { closeEach, confirmPicked, pickTasks, printCloseOutcomes, type Pick } from "./bulk.js";
import { capOptions, capParams, examples, jsonOption, readStdin, usage } from "../common/options.js";
import { waitAndPrint } from "./wait-print.js";

export function registerControlCommands(program: Command, ctx: CliContext): void {
  const wait = program
    .command("wait")
    .description("block until tasks settle, then print their AgentResults (exit 3 on timeout)")
    .argument("<ids...>", "task ids or unique prefixes")
    .option("--any", "return when the first task settles")
    .option("--all", "return when every task has settled (default)")
    .option("--timeout <dur>", "give up after this long: 90s, 5m, 1h or 500ms");
  jsonOption(wait);
  examples(wait, ["dsh-herdr wait tmg3 --timeout 5m", "dsh-herdr wait tmg3 tk81 --any --json"]);
  wait.action(async (ids: string[], o: { any?: boolean; all?: boolean; timeout?: string; json?: boolean }) => {
    if (o.any && o.all) throw usage("--any and --all exclude each other; pick one");
    const timeoutMs = o.timeout !== undefined ? parseDuration(o.timeout, "--timeout") : undefined;
    const taskIds = [...new Set(ids.map((id) => resolveId(ctx.home, id)))];
    await waitAndPrint(ctx, taskIds, o.any ? "any" : "all", timeoutMs, o.json === true);
  });

  const respond = program
    .command("respond")
    .description(
      "send a message to a task: a running one takes it into its running turn (a steer), a completed or blocked one starts a new cycle with it",
    )
    .argument("<id>", "task id or unique prefix")
    .argument("<message...>", "the message; - reads it from stdin");
  jsonOption(respond);
  capOptions(respond, " from now on (a task paused at a cap: default as much again as at spawn)");
  examples(respond, [
    `dsh-herdr respond tmg3 "use the existing retry helper instead"`,
    "dsh-herdr respond tmg3 - < answer.txt",
    `dsh-herdr respond tmg3 --max-cost 2 "finish the tests, then stop"`,
    `dsh-herdr respond tmg3 "also cover the empty list"   # while it runs: joins its running turn`,
  ]);
  type RespondOpts = { json?: boolean; maxCost?: string; maxOutputTokens?: string; maxTurns?: string };
  respond.action(async (id: string, words: string[], o: RespondOpts) => {
    const taskId = resolveId(ctx.home, id);
    const message = words.length === 1 && words[0] === "-" ? await readStdin() : words.join(" ");
    if (message.trim() === "") throw usage("the message is empty; say what the child should do next");
    const caps = capParams(o);
    const conn = await ctx.connect();
    const res = await conn.request("task.respond", { taskId, message, steer: true, ...caps });
    if (o.json) printJson(ctx.io, res);
    else ctx.io.out(`${res.taskId}: ${respondSaid(res)}\n`);
  });

  const abort = program
    .command("abort")
    .description(
      "interrupt running tasks; --failed / --settled end every task in that state (a settled one is closed with its child)",
    )
    .argument("[ids...]", "task ids or unique prefixes")
    .option("--all", "abort every open task of the owner")
    .option("--failed", "every open task that failed, is gone or was interrupted: closed with its pane")
    .option("--settled", "every open task whose cycle settled: its child ended, the task closed (verdict kept)")
    .option("--owner <id>", "with --all: whose tasks (default: cli); with --failed/--settled: only this owner's")
    .option("-y, --yes", "do not ask before acting on several picked tasks");
  jsonOption(abort);
  examples(abort, [
    "dsh-herdr abort tmg3",
    "dsh-herdr abort tmg3 tk81",
    "dsh-herdr abort --all",
    "dsh-herdr abort --settled --yes",
  ]);
  abort.action(
    async (
      ids: string[],
      o: { all?: boolean; failed?: boolean; settled?: boolean; owner?: string; yes?: boolean; json?: boolean },
    ) => {
      const pick = onePick("abort", ids, o, true);
      const conn = await ctx.connect();
      if (pick === "failed" || pick === "settled") {
        const rows = await pickTasks(conn, pick, o.owner);
        if (!(await confirmPicked(ctx, "abort", pick, rows, o.yes === true))) return void ctx.io.err("nothing done\n");
        const taskIds = rows.map((r) => r.taskId);
        const res =
          taskIds.length > 0
            ? await conn.request("task.abort", { taskIds })
            : { aborted_ids: [], missing_ids: [], foreign_ids: [] };
        // A task that ended on its own has nothing left to abort: it is closed with its pane instead.
        const byId = new Map(rows.map((r) => [r.taskId, r]));
        const closed = await closeEach(conn, res.missing_ids, true, byId);
        const out = {
          aborted_ids: res.aborted_ids,
          closed_ids: closed.flatMap((c) => ("error" in c ? [] : [c.taskId])),
          missing_ids: closed.flatMap((c) => ("error" in c ? [c.taskId] : [])),
          foreign_ids: res.foreign_ids,
        };
        if (o.json) printJson(ctx.io, out);
        else {
          if (rows.length === 0) ctx.io.out(`no ${pick} tasks to abort\n`);
          for (const id of out.aborted_ids) ctx.io.out(`aborted  ${id}  (was ${byId.get(id)?.status ?? "?"})\n`);
          printCloseOutcomes(
            ctx,
            closed.filter((c) => !("error" in c)),
          );
          for (const c of closed) if ("error" in c) ctx.io.err(`${c.taskId}: ${c.error.code}: ${c.error.message}\n`);
        }
        if (out.missing_ids.length > 0 || out.foreign_ids.length > 0) ctx.exitCode = EXIT.failed;
        return;
      }
      const params: Record<string, unknown> = o.all
        ? { all: true }
        : { taskIds: [...new Set(ids.map((id) => resolveId(ctx.home, id)))] };
      if (o.owner !== undefined) params["owner"] = o.owner;
      const res = await conn.request("task.abort", params);
      if (o.json) printJson(ctx.io, res);
      else {
        ctx.io.out(res.aborted_ids.length > 0 ? `aborted: ${res.aborted_ids.join(" ")}\n` : "nothing to abort\n");
        if (res.missing_ids.length > 0)
          ctx.io.err(`not open (already settled or unknown): ${res.missing_ids.join(" ")}\n`);
        if (res.foreign_ids.length > 0)
          ctx.io.err(`owned by another owner (pass --owner): ${res.foreign_ids.join(" ")}\n`);
      }
      if (res.missing_ids.length > 0 || res.foreign_ids.length > 0) ctx.exitCode = EXIT.failed;
    },
  );

  const close = program
    .command("close")
    .alias("done")
    .description(
      "done with tasks: release their slots (panes stay unless --close-pane); --failed / --settled close every task in that state",
    )
    .argument("[ids...]", "task ids or unique prefixes")
    .option("--failed", "every open task that failed, is gone or was interrupted")
    .option("--settled", "every open task whose cycle settled (completed, blocked, failed, gone, interrupted)")
    .option("--owner <id>", "with --failed/--settled: only this owner's tasks (default: every owner's)")
    .option("--close-pane", "also close the child's pane or process")
    .option("-y, --yes", "do not ask before closing several picked tasks");
  jsonOption(close);
  examples(close, [
    "dsh-herdr close tmg3",
    "dsh-herdr close tmg3 --close-pane",
    "dsh-herdr close tmg3 tk81 tq2z",
    "dsh-herdr close --failed",
    "dsh-herdr close --settled --yes --json",
  ]);
  close.action(
    async (
      ids: string[],
      o: { failed?: boolean; settled?: boolean; owner?: string; closePane?: boolean; yes?: boolean; json?: boolean },
    ) => {
      const pick = onePick("close", ids, o, false);
      const conn = await ctx.connect();
      if (pick === "ids" && ids.length === 1) {
        const taskId = resolveId(ctx.home, ids[0]!);
        const res = await conn.request("task.close", {
          taskId,
          ...(o.closePane ? { closePane: true } : {}),
        });
        if (o.json) printJson(ctx.io, res);
        else ctx.io.out(renderCard(res, undefined, { color: colorEnabled(ctx.io.env, ctx.io.isTTY) }));
        return;
      }
      let taskIds: string[];
      let before = new Map<string, TaskRow>();
      if (pick === "failed" || pick === "settled") {
        const rows = await pickTasks(conn, pick, o.owner);
        if (!(await confirmPicked(ctx, "close", pick, rows, o.yes === true))) return void ctx.io.err("nothing done\n");
        if (rows.length === 0 && !o.json) ctx.io.out(`no ${pick} tasks to close\n`);
        taskIds = rows.map((r) => r.taskId);
        before = new Map(rows.map((r) => [r.taskId, r]));
      } else taskIds = [...new Set(ids.map((id) => resolveId(ctx.home, id)))];
      const outcomes = await closeEach(conn, taskIds, o.closePane === true, before);
      if (o.json) printJson(ctx.io, { results: outcomes });
      else printCloseOutcomes(ctx, outcomes);
      if (outcomes.some((c) => "error" in c)) ctx.exitCode = EXIT.failed;
    },
  );
}

/** Exactly one way of naming the tasks: ids, or one of the picking flags (`--all` only for abort). */
function onePick(
  verb: "close" | "abort",
  ids: string[],
  o: { all?: boolean; failed?: boolean; settled?: boolean },
  allowAll: boolean,
): "ids" | "all" | Pick {
  const ways = [
    ...(ids.length > 0 ? ["ids" as const] : []),
    ...(allowAll && o.all ? ["all" as const] : []),
    ...(o.failed ? ["failed" as const] : []),
    ...(o.settled ? ["settled" as const] : []),
  ];
  const flags = allowAll ? "--all, --failed or --settled" : "--failed or --settled";
  if (ways.length !== 1) throw usage(`name the tasks to ${verb}, or pass one of ${flags} (not several)`);
  return ways[0]!;
}

/** What respondSaid reads of task.respond's reply (src/protocol/). */
export type RespondReply = Omit<Result<"task.respond">, "subagent_id">;

/** What a respond did, in words: a steer of the running cycle, or a new cycle. */
export function respondSaid(r: RespondReply): string {
  if (r.steered && r.pending)
    return `message kept for cycle ${r.cycle}; it joins the run as soon as the child takes it (a cycle that ends first gets a warning)`;
  if (r.steered) return `steered cycle ${r.cycle}: the message joins its running turn`;
  const queued = r.queued ? " (queued: every slot is busy)" : "";
  if (r.late)
    return `cycle ${r.cycle - 1} ended before the message reached it; cycle ${r.cycle} started with it${queued}`;
  return `cycle ${r.cycle} started${queued}`;
}
