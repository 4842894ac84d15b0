// The task's working directory made ready before its child starts (pipeline.ts prepare calls prepareWorkdir once the
// baseline and the worktree exist): the repository's settings (.dsh-herdr.json once trusted, config.json
// repos.<root>) joined to the spawn's own, then for an isolated worktree the included files and the setup command
// (run like a check: its own process group and scope, a timeout, an output cap, its output in the task dir's
// setup.log). What setup changed that git sees
// becomes the task's baseline commit (src/git/worktree-setup.ts), so it is never blamed on the child. A setup that
// fails throws SETUP_FAILED with its last lines: the pipeline's start failure settles the task `failed` through the
// lifecycle machine (launch_failed), and the child is never started.
import { join } from "node:path";
import { DshError } from "../../core/errors.js";
import { DEFAULT_CHECK_LIMITS, runCheck } from "../../checks/run-check.js";
import { lifecycleOf } from "../../core/lifecycle/task-cycle.js";
import type { CheckReceipt } from "../../core/types.js";
import { checkIncludePattern, commitSetup, includeInto, type Included } from "../ports/git-port.js";
import { crashPoint } from "../ports/crash-hook.js";
import { consentedRepoSettings, joinLists, untrustedLine } from "../../store/repo-settings.js";
import { unsynced } from "../../store/task-store.js";
import type { TaskRecord } from "./record.js";
import type { Runner, TaskPort } from "./runner-types.js";

/** The setup's output in the task dir. */
export const SETUP_LOG = "setup.log";
/** How many of the setup's last lines a SETUP_FAILED message carries. */
const FAILED_LINES = 12;

/** task.spawn's include/setup checked before anything exists: BAD_PARAMS naming the pattern or the fix. */
export function checkSetupParams(p: { include?: string[]; setup?: string; isolated?: boolean | "auto" }): void {
  for (const pat of p.include ?? []) {
    const bad = checkIncludePattern(pat);
    if (bad)
      throw new DshError(
        "BAD_PARAMS",
        `include pattern ${JSON.stringify(pat)} ${bad}; give one .gitignore line, e.g. .env or node_modules/`,
      );
  }
  if ((p.include?.length || p.setup !== undefined) && p.isolated !== true && p.isolated !== "auto")
    throw new DshError(
      "BAD_PARAMS",
      "include and setup make an isolated worktree ready; add --isolated (isolated: true), or drop --include/--setup",
    );
}

/** The last lines of an output tail, for a message. */
function lastLines(tail: string): string {
  const lines = tail.replace(/\s+$/, "").split("\n");
  return lines
    .slice(-FAILED_LINES)
    .map((l) => (l.length > 300 ? `${l.slice(0, 300)}…` : l))
    .join("\n");
}

function warn(rec: TaskRecord, w: string): void {
  // Once: a task started again (after a daemon stop during its setup) is prepared again.
  if (!rec.warnings?.includes(w)) rec.warnings = [...(rec.warnings ?? []), w];
}

/**
 * The repository's settings applied to the record (checks joined, include and setup for a worktree), then the
 * worktree made ready. `repoRoot`: the user's repository (undefined outside one).
 */
/** What the worktree setup asks of its task: its record and phase, the daemon's config, the journal, its own run. */
export type SetupPort = TaskPort<
  "rec" | "state" | "journal" | "onPhase" | "setupRun",
  "config" | "env" | "stopped" | "store"
>;

export async function prepareWorkdir(live: SetupPort, repoRoot: string | undefined): Promise<void> {
  const { rec } = live;
  const asked = (rec.include?.length ?? 0) > 0 || rec.setup !== undefined;
  if (repoRoot === undefined) {
    if (asked) warn(rec, `include and setup were not applied: ${rec.cwd} is not in a git repository with a commit`);
    return;
  }
  // A .dsh-herdr.json the person has not trusted (as it is now) adds nothing: no setup, check or include of it runs.
  const consented = consentedRepoSettings(repoRoot, live.ports.config(), live.ports.env.home);
  if (consented.untrusted) warn(rec, untrustedLine(repoRoot, consented.untrusted));
  const repo = consented.settings;
  const checks = joinLists(repo.checks, rec.checks);
  if (checks.length) rec.checks = checks;
  if (rec.checkTimeoutMs === undefined && repo.checkTimeoutMs !== undefined) rec.checkTimeoutMs = repo.checkTimeoutMs;
  const wt = rec.worktree;
  if (!wt) {
    if (asked) warn(rec, "include and setup were not applied: the task works in the checkout itself, not a worktree");
    return;
  }
  const include = joinLists(repo.worktree?.include, rec.include);
  const setup = rec.setup ?? repo.worktree?.setup;
  if (include.length === 0 && setup === undefined) return;
  const timeoutMs = rec.setupTimeoutMs ?? repo.worktree?.setupTimeoutMs ?? DEFAULT_CHECK_LIMITS.timeoutMs;
  let included: Included = { copied: [], linked: [], unmatched: [] };
  if (include.length) {
    included = await includeInto(repoRoot, wt.path, include);
    if (included.copied.length || included.linked.length)
      rec.included = { copied: included.copied, linked: included.linked };
    for (const p of included.unmatched)
      warn(rec, `include pattern ${JSON.stringify(p)} matched no untracked or ignored file in ${repoRoot}`);
  }
  // The daemon stopping (it ends a running setup): not the setup's failure. Nothing is recorded; the next daemon's
  // recovery drops the unused worktree and runs the setup again (startFailed ignores this when stopped).
  const stopping = () => {
    if (live.ports.stopped())
      throw new DshError(
        "DAEMON_UNAVAILABLE",
        "the daemon stopped during the worktree setup; the next daemon runs it again",
      );
  };
  stopping();
  const receipt = setup !== undefined ? await runSetup(live, setup, timeoutMs, repoRoot) : undefined;
  stopping();
  const summary = {
    type: "setup" as const,
    ...(setup !== undefined ? { command: setup } : {}),
    ...(include.length ? { include, copied: included.copied, linked: included.linked } : {}),
    ...(receipt
      ? {
          exitCode: receipt.exitCode,
          durationMs: receipt.durationMs,
          logPath: receipt.logPath,
          ...(receipt.cutOff ? { cutOff: receipt.cutOff } : {}),
          ...(receipt.signal ? { signal: receipt.signal } : {}),
        }
      : {}),
  };
  if (receipt && (receipt.exitCode !== 0 || receipt.cutOff !== undefined)) {
    await live.journal(unsynced({ ...summary, ok: false }));
    throw setupFailed(setup!, wt.path, receipt, timeoutMs);
  }
  // What setup (and the includes) left that git sees is the baseline: committed on the task branch, not the child's.
  const what = setup !== undefined ? setup : `include ${include.join(" ")}`;
  const base = await commitSetup(
    wt.path,
    wt.branch,
    rec.taskId,
    `dsh-herdr setup: ${what.split("\n")[0]!.slice(0, 120)}\n\nWhat the worktree setup of task ${rec.taskId} changed that git sees: the task's baseline, never landed with its work.`,
  );
  if (base) {
    rec.setupCommit = base;
    if (rec.baseline) rec.baseline = { ...rec.baseline, head: base.commit };
  }
  await live.journal(unsynced({ ...summary, ok: true, ...(base ? { from: base.from, commit: base.commit } : {}) }));
}

/** The setup command in the worktree; a close or abort of the task meanwhile ends it. */
async function runSetup(live: SetupPort, command: string, timeoutMs: number, repoRoot: string): Promise<CheckReceipt> {
  const { rec } = live;
  const ac = new AbortController();
  // Closed, or its cycle interrupted (an abort): the setup is ended.
  const off = live.onPhase(() => {
    if (lifecycleOf(live.state.phase) !== undefined) ac.abort();
  });
  const run = runCheck({
    command,
    cwd: rec.worktree!.path,
    logPath: join(live.ports.store.taskPaths(rec.taskId).dir, SETUP_LOG),
    timeoutMs,
    outputCapBytes: DEFAULT_CHECK_LIMITS.outputCapBytes,
    env: {
      ...process.env,
      DSH_HERDR_TASK_ID: rec.taskId,
      DSH_HERDR_REPO: repoRoot,
      DSH_HERDR_WORKTREE: rec.worktree!.path,
    },
    signal: ac.signal,
    scopeName: `setup-${rec.taskId}`,
    // A daemon killed outright cannot end it: the next one finds what is left by this group (recover-setup.ts).
    onSpawn: (pgid) => {
      crashPoint("setup_spawned"); // crash tests: the setup runs, no record names its group yet
      void live.journal(unsynced({ type: "setup_started", pgid }));
    },
  });
  // A daemon stop ends it too (TaskRunner.stop) and waits for its end: else it ran on with no daemon, and the next
  // daemon's recovery ran the setup again beside it in a recreated worktree.
  live.setupRun = { abort: () => ac.abort(), ended: run };
  try {
    return await run;
  } finally {
    off();
    delete live.setupRun;
  }
}

function setupFailed(command: string, where: string, r: CheckReceipt, timeoutMs: number): DshError {
  const how =
    r.cutOff === "timeout"
      ? `cut off: still running after ${Math.round(timeoutMs / 1000)} s (its timeout)`
      : r.cutOff === "output"
        ? "cut off: its output passed the cap"
        : r.exitCode === null
          ? `ended by ${r.signal ?? "a signal"}`
          : `exit ${r.exitCode}`;
  const tail = lastLines(r.outputTail);
  return new DshError(
    "SETUP_FAILED",
    `the worktree setup \`${command}\` failed in ${where} (${how}); the child was not started. ${tail ? `Its last lines:\n${tail}\n` : "It printed nothing. "}Its whole output: ${r.logPath}; fix the setup (spawn --setup, worktree.setup in .dsh-herdr.json or config.json repos), then spawn again`,
    { receipt: { command, exitCode: r.exitCode, logPath: r.logPath, ...(r.cutOff ? { cutOff: r.cutOff } : {}) } },
  );
}
