// verify: each task's result.json rebuilt from its task dir (the journal replayed through the machine, the pinned
// harvest through the derivation, the session up to the pinned offset, result.md's pinned copy, diff.patch's digest)
// and compared field by field (src/core/lifecycle/verify.ts). Reads files only: no daemon needed.
import type { Command } from "commander";
import { DshError } from "../../core/errors.js";
import { describeDifference } from "../../core/lifecycle/verify.js";
import { verifyTaskDir } from "../../store/task-verify.js";
import type { CliContext } from "../common/context.js";
import { EXIT } from "../common/exit-codes.js";
import { printJson } from "../common/io.js";
import { knownTaskIds, resolveId, taskDir } from "../common/task-files.js";
import { examples, jsonOption } from "../common/options.js";

export { verifyTaskDir, type TaskVerification } from "../../store/task-verify.js";

export function registerVerifyCommand(program: Command, ctx: CliContext): void {
  const cmd = program
    .command("verify")
    .description(
      "rebuild each task's result from its task dir (journal, session, pinned result.md, diff.patch) and compare it with result.json (exit 1 naming each difference)",
    )
    .argument("[ids...]", "task ids, unique suffixes or prefixes")
    .option("--all", "every task in the home");
  jsonOption(cmd);
  examples(cmd, ["dsh-herdr verify tmg3", "dsh-herdr verify --all --json | jq '.[] | select(.ok | not)'"]);
  cmd.action((ids: string[], o: { all?: boolean; json?: boolean }) => {
    if (!o.all && ids.length === 0)
      throw new DshError("BAD_PARAMS", "verify needs task ids or --all (e.g. dsh-herdr verify --all)", { usage: true });
    if (o.all && ids.length > 0)
      throw new DshError("BAD_PARAMS", "verify takes task ids or --all, not both", { usage: true });
    const taskIds = o.all ? knownTaskIds(ctx.home) : ids.map((id) => resolveId(ctx.home, id));
    const checked = taskIds.map((taskId) => verifyTaskDir(taskDir(ctx.home, taskId), taskId));
    if (o.json) printJson(ctx.io, checked);
    else {
      for (const c of checked) {
        if (c.skipped) ctx.io.out(`${c.taskId}  skipped: ${c.skipped}\n`);
        else if (c.refused) ctx.io.out(`${c.taskId}  not verified: ${c.refused}\n`);
        else if (c.ok) ctx.io.out(`${c.taskId}  ok\n`);
        else for (const d of c.differences) ctx.io.out(`${c.taskId}  ${describeDifference(d)}\n`);
        for (const u of c.unchecked ?? []) ctx.io.out(`${c.taskId}  not checked: ${u}\n`);
      }
      const refused = checked.filter((c) => c.refused !== undefined).length;
      const bad = checked.filter((c) => !c.ok).length - refused;
      const skipped = checked.filter((c) => c.skipped).length;
      ctx.io.out(
        `${checked.length - bad - refused - skipped} agree, ${bad} differ${refused ? `, ${refused} not verified` : ""}${skipped ? `, ${skipped} skipped` : ""} (of ${checked.length})\n`,
      );
    }
    if (checked.some((c) => !c.ok)) ctx.exitCode = EXIT.failed;
  });
}
