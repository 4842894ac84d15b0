// What a settle runs on a completed cycle's work before its result goes out: the task's checks in its worktree, its
// landability and its siblings' conflicts (the land methods measure with the same functions). A task's own step, so
// it sits with the task, not with the socket's land handlers.
import { verifiedOf } from "../../core/result/check-receipts.js";
import type { CheckReceipt, Landing } from "../../core/types.js";
import { DEFAULT_CHECK_LIMITS } from "../../checks/run-check.js";
import { runTaskChecks } from "../../checks/task-checks.js";
import { childIdentity, landabilityOf } from "../ports/git-port.js";
import type { TaskStore } from "../../store/task-store.js";
import type { TaskRecord } from "./record.js";
import { checkSiblings, type SiblingCheckPort } from "./siblings.js";
import type { TaskPort } from "./runner-types.js";

/** A receipt in the journal: what it ran and how it ended, not its output. */
export function journaled(r: CheckReceipt) {
  return {
    command: r.command,
    exitCode: r.exitCode,
    durationMs: r.durationMs,
    logPath: r.logPath,
    ...(r.cutOff ? { cutOff: r.cutOff } : {}),
  };
}

function limitsOf(rec: TaskRecord) {
  return { timeoutMs: rec.checkTimeoutMs ?? DEFAULT_CHECK_LIMITS.timeoutMs };
}

/** Run the record's checks in `dir` (its worktree, or a merged tree): receipts, in order. */
export function runChecksOf(
  store: Pick<TaskStore, "taskPaths">,
  rec: TaskRecord,
  dir: string,
  on: CheckReceipt["on"],
  run: { signal?: AbortSignal; onSpawn?: (pgid: number) => void } = {},
): Promise<CheckReceipt[]> {
  const at = Date.now();
  return runTaskChecks({
    ...run,
    commands: rec.checks ?? [],
    cwd: dir,
    taskDir: store.taskPaths(rec.taskId).dir,
    runTag: `${on === "merged" ? "land" : "c"}${rec.cycle}-${at}`,
    limits: limitsOf(rec),
    ...(on !== undefined ? { on } : {}),
  });
}

/** Landability of an isolated task's work, keeping what an earlier landing recorded. */
export async function measureLanding(rec: TaskRecord): Promise<Landing | undefined> {
  if (!rec.worktree) return undefined;
  const now = await landabilityOf({
    worktree: rec.worktree,
    author: childIdentity(rec.name, rec.taskId),
    ...(rec.setupCommit ? { setup: rec.setupCommit } : {}),
  });
  return withLanded(now, rec.landing);
}

/** A fresh measurement, keeping what an earlier landing recorded (landedAs and its fields). */
export function withLanded(now: Landing, prev: Landing | undefined): Landing {
  return prev?.landedAs !== undefined
    ? {
        ...now,
        landedAs: prev.landedAs,
        ...(prev.strategy ? { strategy: prev.strategy } : {}),
        ...(prev.workHead ? { workHead: prev.workHead } : {}),
        ...(prev.landedAt !== undefined ? { landedAt: prev.landedAt } : {}),
      }
    : now;
}

/**
 * The settle hook: a cycle that settled `completed` gets its checks run in the worktree (the child is idle) and its
 * landability measured, into the record, and its open isolated siblings' work merged with its own (siblings.ts); the
 * settled harvest after it then carries them (landFieldsOf, warnings). A git or check problem becomes a warning, never
 * a lost settle. Journals `checks`, `landability` and `siblings`.
 */
/** What the settle's checks ask of the task: the sibling check's port, the store (receipts) and the clock. */
export type SettleChecksPort = SiblingCheckPort & TaskPort<never, "clock" | "store">;

export async function settleChecks(r: SettleChecksPort): Promise<void> {
  const { rec } = r;
  if (rec.checks?.length) {
    const receipts = await runChecksOf(r.ports.store, rec, rec.workdir, "worktree");
    rec.checkRun = { cycle: rec.cycle, at: r.ports.clock.now(), receipts };
    await r.journal({
      type: "checks",
      cycle: rec.cycle,
      verified: verifiedOf(receipts) ?? true,
      receipts: receipts.map(journaled),
    });
  }
  if (rec.worktree) {
    try {
      const landing = await measureLanding(rec);
      if (landing) {
        rec.landing = landing;
        await r.journal({ type: "landability", cycle: rec.cycle, ...landingJournal(landing) });
      }
    } catch (e) {
      rec.warnings = [
        ...(rec.warnings ?? []).filter((w) => !w.startsWith("landability not measured")),
        `landability not measured: ${(e as Error).message}`,
      ];
    }
    // Open isolated siblings of the same repository whose work conflicts with this one: a warning on both.
    await checkSiblings(r);
  }
}

export function landingJournal(l: Landing) {
  return { baseBranch: l.baseBranch, baseHead: l.baseHead, clean: l.clean, conflicts: l.conflicts };
}
