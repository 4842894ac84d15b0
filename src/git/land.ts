// Landing a task's work on its base branch in the user's checkout. Everything that can refuse is decided before
// anything changes: the landed commit is built as objects first (the child's uncommitted work as a commit of its
// own, by the child), then the checkout moves to it with `git merge --ff-only`, which changes nothing when it
// cannot; only then does the task branch take the child's commit. Refusals carry a code and name what is wrong.
import { mkdtemp, rm } from "node:fs/promises";
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
  workWithoutSetup,
} from "./landability.js";
import { git, gitExit, gitMaybe, splitZ } from "./run.js";
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
  now?: number;
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

/** Land one task. Throws CHECKOUT_ELSEWHERE, CHECKOUT_DIRTY, LAND_CONFLICT or CHECK_FAILED having changed nothing. */
export async function landTask(opts: LandOptions): Promise<LandOutcome> {
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
    if (work.conflicts.length)
      throw new DshError(
        "LAND_CONFLICT",
        `task ${opts.taskId}'s work changes what its worktree setup changed, in ${work.conflicts.length} path(s): ${named(work.conflicts)}; the two cannot be told apart, so nothing was changed; merge ${wt.branch} by hand (its first commit is setup's)`,
        { conflicts: work.conflicts },
      );
    const merged = await mergeTree(repo, baseHead, work.commit);
    if (!merged.clean)
      throw new DshError(
        "LAND_CONFLICT",
        `task ${opts.taskId}'s work conflicts with ${baseBranch} (${short(baseHead)}) in ${merged.conflicts.length} path(s): ${named(merged.conflicts)}; nothing was changed; merge ${wt.branch} by hand, or respond to the child to rebase its work onto ${baseBranch}`,
        { conflicts: merged.conflicts },
      );
    const moved = !(await isAncestor(repo, baseHead, work.commit));
    const built = await buildLanded(opts, repo, baseHead, work.commit, merged.tree, moved, baseBranch);
    if (opts.check) await onMergedTree(repo, built.commit, opts.check);
    // The one change to the user's checkout: a fast-forward to the built commit (git refuses, changing nothing, when
    // a file in the way is untracked or the branch moved meanwhile).
    const ff = await gitExit(repo, ["merge", "--ff-only", "--no-edit", "-q", built.commit]);
    if (ff.code !== 0) {
      const why = ff.stderr.trim() || ff.stdout.trim();
      if (/untracked working tree files would be overwritten|local changes/i.test(why))
        throw new DshError(
          "CHECKOUT_DIRTY",
          `the checkout ${repo} has files in the way of task ${opts.taskId}'s work: ${why.replace(/\s+/g, " ")}; move them, then land again`,
        );
      throw new DshError(
        "GIT_FAILED",
        `could not move ${baseBranch} in ${repo} to ${short(built.commit)}: ${why}; nothing was landed; land again`,
      );
    }
    // The child's uncommitted work now lives on its branch (the worktree's index takes the snapshot's, so the
    // worktree reads clean), and the branch is kept until gc sees the base holding the landed commit.
    if (snap.changed) await adoptSnapshot(wt, snap.tip, snap.commit);
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
): Promise<{ commit: string; strategy: NonNullable<Landing["strategy"]>; said: string }> {
  const strategy = opts.strategy ?? "auto";
  const env = identityEnv(opts.author);
  const branch = opts.worktree.branch;
  if (strategy === "squash") {
    const commit = (await git(repo, ["commit-tree", mergedTree, "-p", baseHead, "-m", opts.message], env)).trim();
    return { commit, strategy: "squash", said: `squashed into one commit on ${baseBranch}` };
  }
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
  const parent = await mkdtemp(join(tmpdir(), "dsh-land-tree-"));
  const dir = join(parent, "tree");
  await withWorktreeLock(repo, () => git(repo, ["worktree", "add", "--detach", "-q", dir, at]));
  try {
    return await op(dir);
  } finally {
    await withWorktreeLock(repo, async () => {
      await gitMaybe(repo, ["worktree", "remove", "--force", dir]);
      await gitMaybe(repo, ["worktree", "prune"]);
    });
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
