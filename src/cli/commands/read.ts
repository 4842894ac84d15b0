// show, result, diff: reading what a task brought back, from its files (no daemon needed).
import type { Command } from "commander";
import { existsSync, readFileSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import type { AgentResult } from "../../core/types.js";
import type { CliContext } from "../common/context.js";
import { EXIT } from "../common/exit-codes.js";
import { renderCard } from "../format/card.js";
import { colorEnabled } from "../format/color.js";
import { printJson } from "../common/io.js";
import { readResult, readResultText, resolveId, taskDir } from "../common/task-files.js";
import { pageText } from "../common/pager.js";
import { examples, jsonOption } from "../common/options.js";

export function registerReadCommands(program: Command, ctx: CliContext): void {
  const show = program
    .command("show")
    .description("a task's AgentResult as a card")
    .argument("<id>", "task id or unique prefix");
  jsonOption(show);
  examples(show, ["dsh-herdr show tmg3", "dsh-herdr show tmg3k2a1b2c3 --json"]);
  show.action(async (id: string, o: { json?: boolean }) => {
    const taskId = resolveId(ctx.home, id);
    const { result: r, tampered } = await checkedResult(ctx, taskId);
    if (o.json) {
      if (tampered) return printJson(ctx.io, r);
      return ctx.io.out(readResultText(ctx.home, taskId).trimEnd() + "\n");
    }
    ctx.io.out(
      renderCard(r, undefined, {
        color: colorEnabled(ctx.io.env, ctx.io.isTTY),
        ...(r.worktree ? { worktreeExists: existsSync(r.worktree.path) } : {}),
      }),
    );
  });

  const result = program
    .command("result")
    .description("a task's result.json, exactly as the daemon wrote it")
    .argument("<id>", "task id or unique prefix");
  jsonOption(result);
  examples(result, ["dsh-herdr result tmg3 --json | jq .summary"]);
  result.action(async (id: string) => {
    const taskId = resolveId(ctx.home, id);
    const text = readResultText(ctx.home, taskId);
    ctx.io.out(text); // the bytes as they are on disk, even when they are not JSON
    // A rewrite after the daemon wrote it is named on stderr and in the exit code; a file that is not JSON is shown.
    if (isJson(text)) await checkedResult(ctx, taskId);
  });

  const diff = program
    .command("diff")
    .description("the patch a task produced (paged on a terminal)")
    .argument("<id>", "task id or unique prefix");
  jsonOption(diff);
  examples(diff, ["dsh-herdr diff tmg3", "dsh-herdr diff tmg3 | git apply"]);
  diff.action(async (id: string, o: { json?: boolean }) => {
    const taskId = resolveId(ctx.home, id);
    const r = readResult(ctx.home, taskId);
    const local = join(taskDir(ctx.home, taskId), "diff.patch");
    // A task relayed to another machine: patchPath is the remote's; the local task dir holds its copy.
    const path =
      r.agent.machine !== undefined && existsSync(local)
        ? local
        : r.diff?.patchPath && isAbsolute(r.diff.patchPath)
          ? r.diff.patchPath
          : local;
    const patch = existsSync(path) ? readFileSync(path, "utf8") : "";
    if (o.json) return printJson(ctx.io, { taskId, patchPath: path, truncated: r.diff?.truncated ?? false, patch });
    if (patch === "")
      return ctx.io.err(
        `task ${taskId} has no diff (no changes since its baseline${r.diff ? "" : ", or not harvested yet"})\n`,
      );
    await pageText(ctx.io, patch);
  });
}

/**
 * The stored result checked against its task dir (the digests and the journal `verify` rebuilds it from): a
 * result.json rewritten after the daemon wrote it is named tampered on stderr and in the exit code, and shown without
 * its forged `verified` (src/store/task-verify.ts).
 */
async function checkedResult(ctx: CliContext, taskId: string): Promise<{ result: AgentResult; tampered?: string }> {
  // Loaded only once there is a result to check: verify's reader (result.md's YAML among it) stays out of a call that
  // fails before, such as an unknown id.
  const { tamperedView } = await import("../../store/task-verify.js");
  const view = tamperedView(taskDir(ctx.home, taskId), readResult(ctx.home, taskId));
  if (view.tampered) {
    ctx.io.err(`dsh-herdr: ${view.tampered}\n`);
    ctx.exitCode = EXIT.failed;
  }
  return view;
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
