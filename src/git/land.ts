// Landing a task's work on its base branch in the user's checkout. Everything that can refuse is decided before
// anything changes: the landed commit is built as objects first (the child's uncommitted work as a commit of its
// own, by the child), what is untracked or ignored in the checkout on the landing's paths refuses it by name, then an
// intent record is written (the caller's: the task, the branch, its old head and the commit about to be its head),
// then the checkout and branch move together, all or nothing (checkout-update.ts); only then does the task branch
// take the child's commit. A crash after the intent record is resolved from git (resolveIntent): the branch holds
// the landed commit → landed, once; else the checkout is put back. Refusals carry a code and name what is wrong.
import { mkdtemp, rename, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DshError } from "../core/errors.js";
import type { Landing, WorktreeInfo } from "../core/types.js";
import {
  baseBranchOf,
  branchTip,
  identityEnv,
  isAncestor,
  mergeTree,
  type SetupCommit,
  snapshotWork,
  type Identity,
  measureWork,
  workWithoutSetup,
} from "./landability.js";
import { indexPaths, moveCheckout, refuseIfInTheWay, restoreCheckout } from "./checkout-update.js";
import { git, gitExit, gitMaybe, splitZ, withGitBounds, withoutCancel } from "./run.js";
import { withWorktreeLock } from "./worktree.js";

export type LandStrategy = "auto" | "merge" | "squash" | "rebase";

export interface LandOptions {
  taskId: string;
  worktree: WorktreeInfo;
  /** The child: author of the commit of its uncommitted changes and of the commits land makes. */
  author: Identity;
  /** Commit message for the child's uncommitted changes (and a squash): from its summary. */
  message: string;
  strategy?: LandStrategy;
  /** The task's setup commit (worktree-setup.ts): what setup changed is not landed, only the child's work. */
  setup?: SetupCommit;
  /** The task's earlier landing, if any: a repeat says so and changes nothing. */
  previous?: Landing;
  /**
   * `land --check`: run the task's checks in a checkout of the commit about to land; throw (CHECK_FAILED) to refuse.
   * The directory is removed afterwards.
   */
  check?: (dir: string, commit: string) => Promise<void>;
  /**
   * Written before the checkout or the branch changes (durably, by the caller): what resolveIntent needs to tell
   * after a crash whether the landing happened. A throw stops the landing, nothing changed.
   */
  onIntent?: (intent: LandIntent) => Promise<void>;
  /** Told as the landing passes its steps (the crash tests' kill points). */
  progress?: (step: "intent" | "checkout_updated" | "branch_moved") => void;
  /** Aborted: the landing stops before it changes anything (its requester went away). */
  signal?: AbortSignal;
  /** Each git process the landing starts ends (with its process group) after this long; default 5 minutes. */
  timeoutMs?: number;
  now?: number;
}

/** A landing about to happen, recorded before anything changes. */
export interface LandIntent {
  taskId: string;
  repo: string;
  baseBranch: string;
  /** The base branch's head before, and the commit about to become its head. */
  oldHead: string;
  newHead: string;
  strategy: NonNullable<Landing["strategy"]>;
  said: string;
  /** The task's work as one commit (the snapshot), and whether it is new (the child's uncommitted work). */
  workHead: string;
  committed?: string;
  /** The task branch's tip when the snapshot was made: it takes workHead only from there. */
  taskTip: string;
  worktree: WorktreeInfo;
  at: number;
}

export interface LandOutcome {
  taskId: string;
  /** Nothing was done: the work is already on the base branch. */
  already: boolean;
  landing: Landing;
  /** The commit made of the child's uncommitted changes on the task branch, when there were any. */
  committed?: string;
  /** Why this strategy, in words (`the base moved: a merge commit`). */
  said: string;
}

const SHOWN = 10;

function named(paths: string[]): string {
  const more = paths.length > SHOWN ? `, +${paths.length - SHOWN} more` : "";
  return paths.slice(0, SHOWN).join(", ") + more;
}

/**
 * Land one task. Throws CHECKOUT_ELSEWHERE, CHECKOUT_DIRTY, CHECKOUT_IN_THE_WAY, LAND_CONFLICT, CHECK_FAILED or
 * LAND_CANCELLED having changed nothing; a failure of the checkout update (GIT_FAILED, TIMEOUT) with the checkout put
 * back, or naming what was left and the command that restores it.
 */
export function landTask(opts: LandOptions): Promise<LandOutcome> {
  return bounded(opts, () => landBounded(opts));
}

async function landBounded(opts: LandOptions): Promise<LandOutcome> {
  if (opts.signal?.aborted) throw cancelled(opts.taskId, opts.signal);
  const wt = opts.worktree;
  const repo = wt.repo;
  const now = opts.now ?? Date.now();
  const baseBranch = await baseBranchOf(wt);
  const baseHead = await branchTip(repo, baseBranch);
  const snap = await snapshotWork(wt.path, opts.author, opts.message);
  try {
    // The commit that lands: the work itself, or with a setup commit the work without it (one commit on its parent).
    const work = opts.setup
      ? await workWithoutSetup(repo, snap.commit, opts.setup, opts.author, opts.message)
      : { commit: snap.commit, conflicts: [] };
    // A repeat: the landed commit is in the base and the task has no work since.
    const prev = opts.previous;
    if (
      prev?.landedAs !== undefined &&
      prev.workHead === snap.commit &&
      (await isAncestor(repo, prev.landedAs, baseHead))
    ) {
      return { taskId: opts.taskId, already: true, landing: prev, said: `already landed as ${short(prev.landedAs)}` };
    }
    if (work.conflicts.length === 0 && (await isAncestor(repo, work.commit, baseHead))) {
      const landing: Landing = { baseBranch, baseHead, clean: true, conflicts: [], checkedAt: now };
      return { taskId: opts.taskId, already: true, landing, said: `nothing to land: ${baseBranch} has all its work` };
    }
    await refuseUnlessOnBase(repo, baseBranch);
    await refuseIfDirty(repo, baseBranch);
    const measured = (clean: boolean, conflicts: string[]): Landing => ({
      baseBranch,
      baseHead,
      clean,
      conflicts,
      checkedAt: now,
    });
    if (work.conflicts.length)
      throw new DshError(
        "LAND_CONFLICT",
        `task ${opts.taskId}'s work changes what its worktree setup changed, in ${work.conflicts.length} path(s): ${named(work.conflicts)}; the two cannot be told apart, so nothing was changed; merge ${wt.branch} by hand (its first commit is setup's)`,
        { conflicts: work.conflicts, landing: measured(false, work.conflicts) },
      );
    const merged = await mergeTree(repo, baseHead, work.commit);
    if (!merged.clean)
      throw new DshError(
        "LAND_CONFLICT",
        `task ${opts.taskId}'s work conflicts with ${baseBranch} (${short(baseHead)}) in ${merged.conflicts.length} path(s): ${named(merged.conflicts)}; nothing was changed; merge ${wt.branch} by hand, or respond to the child to rebase its work onto ${baseBranch}`,
        { conflicts: merged.conflicts, landing: measured(false, merged.conflicts) },
      );
    // What the checkout holds untracked or ignored on the landing's paths (the merged tree is the landed tree).
    await refuseIfInTheWay(repo, opts.taskId, baseHead, merged.tree).catch(withLanding(measured(true, [])));
    const moved = !(await isAncestor(repo, baseHead, work.commit));
    // With a setup commit the work is a new commit (work.commit is not the task's): never a fast-forward of its branch.
    const recreated = work.commit !== snap.commit;
    const built = await buildLanded(opts, repo, baseHead, work.commit, merged.tree, moved, baseBranch, recreated);
    if (opts.check) await onMergedTree(repo, built.commit, opts.check).catch(withLanding(measured(true, [])));
    if (opts.signal?.aborted) throw cancelled(opts.taskId, opts.signal);
    const intent: LandIntent = {
      taskId: opts.taskId,
      repo,
      baseBranch,
      oldHead: baseHead,
      newHead: built.commit,
      strategy: built.strategy,
      said: built.said,
      workHead: snap.commit,
      ...(snap.changed ? { committed: snap.commit } : {}),
      taskTip: snap.tip,
      worktree: wt,
      at: now,
    };
    await opts.onIntent?.(intent);
    opts.progress?.("intent");
    // The one change to the user's checkout, all or nothing (checkout-update.ts).
    await moveCheckout({
      repo,
      taskId: opts.taskId,
      branch: baseBranch,
      from: baseHead,
      to: built.commit,
      message: `dsh-herdr land: task ${opts.taskId} (${built.strategy})`,
      ...(opts.progress ? { progress: opts.progress } : {}),
    });
    // The child's uncommitted work now lives on its branch (the worktree's index takes the snapshot's, so the
    // worktree reads clean), and the branch is kept until gc sees the base holding the landed commit.
    // Landed now, whatever follows: a task branch that moved meanwhile keeps its tip (the work is in landedAs).
    if (snap.changed) await withoutCancel(() => adoptSnapshot(wt, snap.tip, snap.commit)).catch(() => undefined);
    const landing: Landing = {
      baseBranch,
      baseHead,
      clean: true,
      conflicts: [],
      checkedAt: now,
      landedAs: built.commit,
      strategy: built.strategy,
      workHead: snap.commit,
      landedAt: now,
    };
    return {
      taskId: opts.taskId,
      already: false,
      landing,
      ...(snap.changed ? { committed: snap.commit } : {}),
      said: built.said,
    };
  } finally {
    await snap.dispose();
  }
}

const short = (sha: string) => sha.slice(0, 12);

/** A refusal made after the landing was measured carries the measurement, for the task's record. */
function withLanding(landing: Landing): (e: unknown) => never {
  return (e) => {
    if (e instanceof DshError && e.details?.["landing"] === undefined)
      throw new DshError(e.code, e.message, { ...e.details, landing });
    throw e;
  };
}

async function refuseUnlessOnBase(repo: string, baseBranch: string): Promise<void> {
  const head = (await gitMaybe(repo, ["symbolic-ref", "-q", "HEAD"]))?.trim();
  if (head === `refs/heads/${baseBranch}`) return;
  const where = head ? `on ${head.replace(/^refs\/heads\//, "")}` : "detached";
  throw new DshError(
    "CHECKOUT_ELSEWHERE",
    `the checkout ${repo} is ${where}, not on ${baseBranch}, the task's base branch; \`git -C ${repo} switch ${baseBranch}\`, then land again`,
  );
}

async function refuseIfDirty(repo: string, baseBranch: string): Promise<void> {
  const out = await git(repo, ["status", "--porcelain=v1", "-z", "--untracked-files=no", "--ignore-submodules=dirty"]);
  const paths: string[] = [];
  const fields = splitZ(out);
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i]!;
    paths.push(f.slice(3));
    if (/[RC]/.test(f.slice(0, 2))) i++; // a rename's source path follows
  }
  if (paths.length === 0) return;
  throw new DshError(
    "CHECKOUT_DIRTY",
    `the checkout ${repo} (${baseBranch}) has uncommitted changes to ${paths.length} tracked file(s): ${named(paths)}; commit or stash them, then land again`,
    { files: paths },
  );
}

/** The commit the base branch moves to, by strategy (made as objects only; no ref moves here). */
async function buildLanded(
  opts: LandOptions,
  repo: string,
  baseHead: string,
  work: string,
  mergedTree: string,
  moved: boolean,
  baseBranch: string,
  recreated: boolean,
): Promise<{ commit: string; strategy: NonNullable<Landing["strategy"]>; said: string }> {
  const strategy = opts.strategy ?? "auto";
  const env = identityEnv(opts.author);
  const branch = opts.worktree.branch;
  if (strategy === "squash") {
    const commit = (await git(repo, ["commit-tree", mergedTree, "-p", baseHead, "-m", opts.message], env)).trim();
    return { commit, strategy: "squash", said: `squashed into one commit on ${baseBranch}` };
  }
  if (strategy === "auto" && !moved && recreated)
    // The work without the task's setup commit is one new commit on the base: what lands is a squash of the work.
    return {
      commit: work,
      strategy: "squash",
      said: `one new commit of the work on ${baseBranch} (the task branch's worktree-setup commit left out)`,
    };
  if (strategy === "merge" || (strategy === "auto" && moved)) {
    const msg = `Merge ${branch} into ${baseBranch}\n\n${opts.message}`;
    const commit = (await git(repo, ["commit-tree", mergedTree, "-p", baseHead, "-p", work, "-m", msg], env)).trim();
    const why = strategy === "merge" ? "--merge" : `${baseBranch} moved since the task branched`;
    return { commit, strategy: "merge", said: `a merge commit (${why})` };
  }
  if (!moved)
    return {
      commit: work,
      strategy: "fast-forward",
      said: `a fast-forward (${baseBranch} has not moved since the task branched)`,
    };
  return { commit: await rebased(repo, baseHead, work, env), strategy: "rebase", said: `rebased onto ${baseBranch}` };
}

/** The work's commits replayed onto baseHead, in a throwaway detached worktree (git 2.39 has no merge-base option). */
async function rebased(repo: string, onto: string, work: string, env: Record<string, string>): Promise<string> {
  return inScratch(repo, onto, async (dir) => {
    const from = (await git(repo, ["merge-base", onto, work])).trim();
    const r = await gitExit(dir, ["-c", "commit.gpgsign=false", "cherry-pick", "--allow-empty", `${from}..${work}`], {
      // The commits keep their authors; the committer is the child too.
      GIT_COMMITTER_NAME: env.GIT_COMMITTER_NAME!,
      GIT_COMMITTER_EMAIL: env.GIT_COMMITTER_EMAIL!,
    });
    if (r.code !== 0) {
      await gitMaybe(dir, ["cherry-pick", "--abort"]);
      throw new DshError(
        "LAND_CONFLICT",
        `rebasing the task's commits onto ${short(onto)} stopped on a conflict (${(r.stderr.trim().split("\n")[0] ?? "").trim()}); nothing was changed; land with --merge or --squash instead`,
      );
    }
    return (await git(dir, ["rev-parse", "HEAD"])).trim();
  });
}

/** `land --check`: the commit about to land, checked out in a throwaway worktree, handed to the check. */
async function onMergedTree(
  repo: string,
  commit: string,
  check: (dir: string, commit: string) => Promise<void>,
): Promise<void> {
  await inScratch(repo, commit, (dir) => check(dir, commit));
}

async function inScratch<T>(repo: string, at: string, op: (dir: string) => Promise<T>): Promise<T> {
  // The daemon's pid in the name and the repository in a file beside the tree: a later daemon's recovery removes
  // (and unregisters) what a killed one left (land-scratch.ts).
  const parent = await mkdtemp(join(tmpdir(), `dsh-land-tree-${process.pid}-`));
  const dir = join(parent, "tree");
  await writeFile(join(parent, "repo"), repo);
  await withWorktreeLock(repo, () => git(repo, ["worktree", "add", "--detach", "-q", dir, at]));
  try {
    return await op(dir);
  } finally {
    // Removed even when the land was cancelled (within the timeout).
    await withoutCancel(() =>
      withWorktreeLock(repo, async () => {
        await gitMaybe(repo, ["worktree", "remove", "--force", dir]).catch(() => undefined);
        await gitMaybe(repo, ["worktree", "prune"]).catch(() => undefined);
      }),
    );
    await rm(parent, { recursive: true, force: true });
  }
}

/** The task branch takes the snapshot commit (only if it has not moved), and its index the commit's tree. */
async function adoptSnapshot(wt: WorktreeInfo, tip: string, commit: string): Promise<void> {
  const ref = `refs/heads/${wt.branch}`;
  await git(wt.path, ["update-ref", "-m", "dsh-herdr land: the child's uncommitted work", ref, commit, tip]);
  // A mixed reset: the index now matches the new tip; the files (already that content) are not touched.
  await git(wt.path, ["reset", "-q"]);
}

/**
 * `land --dry-run`: the landability (landabilityOf) and, when the work merges cleanly, the same refusals `land` would
 * give for the checkout (not on the base branch: CHECKOUT_ELSEWHERE; uncommitted tracked changes: CHECKOUT_DIRTY;
 * something untracked or ignored on the landing's paths: CHECKOUT_IN_THE_WAY), so it never says "lands cleanly" where
 * land refuses. Changes nothing.
 */
export async function dryLand(opts: {
  taskId: string;
  worktree: WorktreeInfo;
  author: Identity;
  setup?: SetupCommit;
  now?: number;
  timeoutMs?: number;
  signal?: AbortSignal;
}): Promise<Landing> {
  return bounded(opts, async () => {
    const m = await measureWork(opts);
    if (m.tree) {
      const repo = opts.worktree.repo;
      const refused = withLanding(m.landing);
      await refuseUnlessOnBase(repo, m.landing.baseBranch).catch(refused);
      await refuseIfDirty(repo, m.landing.baseBranch).catch(refused);
      await refuseIfInTheWay(repo, opts.taskId, m.landing.baseHead, m.tree).catch(refused);
    }
    return m.landing;
  });
}

/** Each git process a landing starts, bounded: land.timeoutMs (config) or this default. */
export const DEFAULT_LAND_TIMEOUT_MS = 5 * 60_000;

function bounded<T>(opts: { timeoutMs?: number; signal?: AbortSignal }, op: () => Promise<T>): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_LAND_TIMEOUT_MS;
  return withGitBounds(
    { timeoutMs, timeoutName: `land.timeoutMs (${timeoutMs} ms)`, ...(opts.signal ? { signal: opts.signal } : {}) },
    op,
  );
}

function cancelled(taskId: string, signal: AbortSignal): DshError {
  const r: unknown = signal.reason;
  const why = r instanceof Error ? r.message : "its requester went away";
  return new DshError("LAND_CANCELLED", `the landing of task ${taskId} was abandoned (${why}); nothing was landed`, {
    reason: "cancelled",
  });
}

/**
 * A landing recorded as intended and not recorded as done (the daemon died in between): decided from git. The base
 * branch holds the intended commit → it landed (the index and the task branch are finished); else the checkout is
 * put back on the landing's paths and nothing landed.
 */
export async function resolveIntent(
  i: LandIntent,
  opts: { timeoutMs?: number; now?: number } = {},
): Promise<{ landed: boolean; landing?: Landing; said: string }> {
  return bounded(opts, async () => {
    const repo = i.repo;
    const tip = (await gitMaybe(repo, ["rev-parse", "--verify", "-q", `refs/heads/${i.baseBranch}^{commit}`]))?.trim();
    const head = (await gitMaybe(repo, ["symbolic-ref", "-q", "HEAD"]))?.trim();
    const onBranch = head === `refs/heads/${i.baseBranch}`;
    const { index, copy } = await indexPaths(repo, i.taskId);
    const copied = await stat(copy).then(
      () => true,
      () => false,
    );
    const landed = tip !== undefined && (tip === i.newHead || (await isAncestor(repo, i.newHead, tip)));
    if (landed) {
      // The files were written before the branch moved; the index copy may not have replaced the index yet.
      if (copied && onBranch && tip === i.newHead) await rename(copy, index);
      await rm(copy, { force: true });
      await rm(`${copy}.lock`, { force: true });
      if (i.committed !== undefined) {
        const ref = `refs/heads/${i.worktree.branch}`;
        const moved = await gitMaybe(repo, [
          "update-ref",
          "-m",
          "dsh-herdr land: the child's uncommitted work",
          ref,
          i.workHead,
          i.taskTip,
        ]);
        if (moved !== undefined) await gitMaybe(i.worktree.path, ["reset", "-q"]).catch(() => undefined);
      }
      const landing: Landing = {
        baseBranch: i.baseBranch,
        baseHead: i.oldHead,
        clean: true,
        conflicts: [],
        checkedAt: opts.now ?? Date.now(),
        landedAs: i.newHead,
        strategy: i.strategy,
        workHead: i.workHead,
        landedAt: i.at,
      };
      return { landed: true, landing, said: `landed on ${i.baseBranch} as ${short(i.newHead)}: ${i.said}` };
    }
    // Not landed: what the checkout update may have written goes back (only while the checkout is where it was).
    if (tip === i.oldHead && onBranch) await restoreCheckout(repo, i.oldHead, i.newHead, { onlyOurs: true });
    await rm(copy, { force: true });
    await rm(`${copy}.lock`, { force: true });
    return {
      landed: false,
      said: `not landed: ${i.baseBranch} is ${tip === i.oldHead ? "where it was" : `at ${tip ? short(tip) : "nothing"}`}; the checkout's landing paths were put back`,
    };
  });
}
