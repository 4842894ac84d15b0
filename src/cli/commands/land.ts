// land: bring isolated tasks' work onto their base branches in the user's checkout (src/git/land.ts, in the daemon),
// in the order given; --dry-run only says whether each would land cleanly.
import type { Command } from "commander";
import { DshError } from "../../core/errors.js";
import { usage } from "../common/options.js";
import type { Result } from "../../protocol/methods.js";
import type { CliContext } from "../common/context.js";
import { printJson } from "../common/io.js";
import { resolveId } from "../common/task-files.js";
import { examples, jsonOption } from "../common/options.js";

const LAND_REPLY_MS = 6 * 60 * 60_000;

/** One task's landing, as task.land answers it (src/protocol/). */
type LandReply = Result<"task.land">["results"][number];

interface LandOpts {
  squash?: boolean;
  merge?: boolean;
  rebase?: boolean;
  check?: boolean;
  dryRun?: boolean;
  json?: boolean;
}

function strategyOf(o: LandOpts): "auto" | "merge" | "squash" | "rebase" {
  const picked = (["squash", "merge", "rebase"] as const).filter((s) => o[s] === true);
  if (picked.length > 1)
    throw usage(`pick one of --squash, --merge, --rebase (got ${picked.map((p) => `--${p}`).join(", ")})`);
  return picked[0] ?? "auto";
}

export function landLine(r: LandReply): string {
  const l = r.landing;
  if (r.dryRun) return `${r.taskId}: ${r.said}\n`;
  if (r.already) return `${r.taskId}: ${r.said}; nothing changed\n`;
  const committed = r.committed
    ? `; the child's uncommitted changes were committed first as ${r.committed.slice(0, 12)}`
    : "";
  return `${r.taskId}: landed on ${l.baseBranch} as ${l.landedAs?.slice(0, 12)}: ${r.said}${committed}; \`dsh-herdr gc\` removes its worktree and branch\n`;
}

export function registerLandCommand(program: Command, ctx: CliContext): void {
  const cmd = program
    .command("land")
    .description("merge isolated tasks' work into their base branch in your checkout, in the order given")
    .argument("<ids...>", "task ids or unique prefixes")
    .option("--squash", "one commit of the whole work on the base branch")
    .option("--merge", "always a merge commit (default: a merge commit only when the base moved, else a fast-forward)")
    .option("--rebase", "replay the task's commits onto the base branch")
    .option("--check", "run the task's checks on the merged tree first; refuse (CHECK_FAILED) if one fails")
    .option("--dry-run", "only say whether each task lands cleanly (refreshes its AgentResult landing)");
  jsonOption(cmd);
  examples(cmd, [
    "dsh-herdr land tmg3",
    "dsh-herdr land tmg3 tmg4 --squash --check",
    "dsh-herdr land tmg3 --dry-run --json | jq '.results[0].landing'",
  ]);
  cmd.action(async (ids: string[], o: LandOpts) => {
    const strategy = strategyOf(o);
    const taskIds = ids.map((id) => resolveId(ctx.home, id));
    const conn = await ctx.connect({ start: true });
    // Ctrl+C (or SIGTERM) closes the connection: the daemon abandons the landing, ending its git processes and
    // putting the checkout back; one not started yet never runs.
    let onAbort: () => void = () => undefined;
    const interrupted = new Promise<never>((_, reject) => {
      onAbort = () => {
        // Said first, so the closed connection's own error does not win the race.
        queueMicrotask(() => conn.close());
        reject(
          new DshError(
            "LAND_CANCELLED",
            "interrupted: the daemon abandons the landing (a landing already done stays done); `dsh-herdr show ID` says which",
          ),
        );
      };
      if (ctx.signal.aborted) onAbort();
      else ctx.signal.addEventListener("abort", onAbort, { once: true });
    });
    const res = await Promise.race([
      conn.request(
        "task.land",
        { taskIds, strategy, ...(o.check ? { check: true } : {}), ...(o.dryRun ? { dryRun: true } : {}) },
        { timeoutMs: LAND_REPLY_MS },
      ),
      interrupted,
    ]).finally(() => ctx.signal.removeEventListener("abort", onAbort));
    if (o.json) return printJson(ctx.io, res);
    for (const r of res.results) ctx.io.out(landLine(r));
  });
}
