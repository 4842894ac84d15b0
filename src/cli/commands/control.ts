// wait, respond, abort, close: acting on running tasks through the daemon.
import type { Command } from "commander";
import type { AgentResult } from "../../core/types.js";
import type { CliContext } from "../context.js";
import { parseDuration } from "../duration.js";
import { EXIT } from "../exit-codes.js";
import { renderCard } from "../format/card.js";
import { colorEnabled } from "../format/color.js";
import { printJson } from "../io.js";
import { resolveId } from "../task-files.js";
import { examples, jsonOption, readStdin, usage } from "./shared.js";
import { waitAndPrint } from "./tasks.js";

export function registerControlCommands(program: Command, ctx: CliContext): void {
  const wait = program
    .command("wait")
    .description("block until tasks settle, then print their AgentResults (exit 3 on timeout)")
    .argument("<ids...>", "task ids or unique prefixes")
    .option("--any", "return when the first task settles")
    .option("--all", "return when every task has settled (default)")
    .option("--timeout <dur>", "give up after this long: 90s, 5m, 1h or ms");
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
  examples(respond, [
    `dsh-herdr respond tmg3 "use the existing retry helper instead"`,
    "dsh-herdr respond tmg3 - < answer.txt",
    `dsh-herdr respond tmg3 "also cover the empty list"   # while it runs: joins its running turn`,
  ]);
  respond.action(async (id: string, words: string[], o: { json?: boolean }) => {
    const taskId = resolveId(ctx.home, id);
    const message = words.length === 1 && words[0] === "-" ? await readStdin() : words.join(" ");
    if (message.trim() === "") throw usage("the message is empty; say what the child should do next");
    const conn = await ctx.connect();
    const res = await conn.request<RespondReply>("task.respond", { taskId, message, steer: true });
    if (o.json) printJson(ctx.io, res);
    else ctx.io.out(`${res.taskId}: ${respondSaid(res)}\n`);
  });

  const abort = program
    .command("abort")
    .description("interrupt running tasks")
    .argument("[ids...]", "task ids or unique prefixes")
    .option("--all", "abort every open task of the owner")
    .option("--owner <id>", "with --all: whose tasks (default: cli)");
  jsonOption(abort);
  examples(abort, ["dsh-herdr abort tmg3", "dsh-herdr abort --all"]);
  abort.action(async (ids: string[], o: { all?: boolean; owner?: string; json?: boolean }) => {
    if (o.all === ids.length > 0) throw usage("name the tasks to abort, or pass --all (not both)");
    const params: Record<string, unknown> = o.all
      ? { all: true }
      : { taskIds: [...new Set(ids.map((id) => resolveId(ctx.home, id)))] };
    if (o.owner !== undefined) params["owner"] = o.owner;
    const conn = await ctx.connect();
    const res = await conn.request<{ aborted_ids: string[]; missing_ids: string[]; foreign_ids: string[] }>(
      "task.abort",
      params,
    );
    if (o.json) printJson(ctx.io, res);
    else {
      ctx.io.out(res.aborted_ids.length > 0 ? `aborted: ${res.aborted_ids.join(" ")}\n` : "nothing to abort\n");
      if (res.missing_ids.length > 0)
        ctx.io.err(`not open (already settled or unknown): ${res.missing_ids.join(" ")}\n`);
      if (res.foreign_ids.length > 0)
        ctx.io.err(`owned by another owner (pass --owner): ${res.foreign_ids.join(" ")}\n`);
    }
    if (res.missing_ids.length > 0 || res.foreign_ids.length > 0) ctx.exitCode = EXIT.failed;
  });

  const close = program
    .command("close")
    .alias("done")
    .description("done with a task: release its slot (the pane stays unless --close-pane)")
    .argument("<id>", "task id or unique prefix")
    .option("--close-pane", "also close the child's pane or process");
  jsonOption(close);
  examples(close, ["dsh-herdr close tmg3", "dsh-herdr close tmg3 --close-pane"]);
  close.action(async (id: string, o: { closePane?: boolean; json?: boolean }) => {
    const taskId = resolveId(ctx.home, id);
    const conn = await ctx.connect();
    const res = await conn.request<AgentResult>("task.close", { taskId, ...(o.closePane ? { closePane: true } : {}) });
    if (o.json) printJson(ctx.io, res);
    else ctx.io.out(renderCard(res, undefined, { color: colorEnabled(ctx.io.env, ctx.io.isTTY) }));
  });
}

/** task.respond's reply (schema/protocol/task.respond.json). */
export interface RespondReply {
  taskId: string;
  cycle: number;
  steered?: true;
  pending?: true;
  late?: true;
  queued?: true;
}

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
