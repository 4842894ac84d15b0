// check: run a task's checks (spawn --check) again in its worktree, through the daemon; receipts printed.
import type { Command } from "commander";
import type { CheckReceipt } from "../../core/types.js";
import type { CliContext } from "../common/context.js";
import { EXIT } from "../common/exit-codes.js";
import { columns, shortenHome } from "../format/text.js";
import { printJson } from "../common/io.js";
import { resolveId } from "../common/task-files.js";
import { examples, jsonOption } from "../common/options.js";

/** How long the CLI waits for the daemon's reply: the checks' own timeouts bound it. */
const CHECK_REPLY_MS = 6 * 60 * 60_000;

export function receiptRows(receipts: readonly CheckReceipt[]): string[] {
  const rows = receipts.map((r) => [
    r.cutOff ? `CUT OFF (${r.cutOff})` : r.exitCode === 0 ? "ok" : `FAILED (exit ${r.exitCode ?? r.signal})`,
    `${(r.durationMs / 1000).toFixed(1)}s`,
    r.command,
    shortenHome(r.logPath),
  ]);
  return columns([["RESULT", "TIME", "CHECK", "LOG"], ...rows]);
}

export function registerCheckCommand(program: Command, ctx: CliContext): void {
  const cmd = program
    .command("check")
    .description("run a task's checks (spawn --check) again in its worktree; receipts go into its AgentResult")
    .argument("<id>", "task id or unique prefix");
  jsonOption(cmd);
  examples(cmd, ["dsh-herdr check tmg3", "dsh-herdr check tmg3 --json | jq .verified"]);
  cmd.action(async (id: string, o: { json?: boolean }) => {
    const taskId = resolveId(ctx.home, id);
    const conn = await ctx.connect({ start: true });
    const res = await conn.request("task.check", { taskId }, { timeoutMs: CHECK_REPLY_MS });
    if (!res.verified) ctx.exitCode = EXIT.failed;
    if (o.json) return printJson(ctx.io, res);
    ctx.io.out(receiptRows(res.checks).join("\n") + "\n");
    for (const w of res.warnings) ctx.io.err(`warning: ${w}\n`);
    const bad = res.checks.find((c) => c.exitCode !== 0 || c.cutOff);
    if (bad?.outputTail) ctx.io.out(`\n--- ${bad.command} (last lines) ---\n${bad.outputTail.trimEnd()}\n`);
  });
}
