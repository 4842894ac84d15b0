// Landability: does a task's work (its branch plus what is uncommitted in its worktree) still apply to the current
// tip of its base branch? The uncommitted part becomes a commit object through a throwaway index, so the task's own
// index and files are never touched; `git merge-tree --write-tree` (git >= 2.38) then merges in memory.
import { copyFile, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { DshError } from "../core/errors.js";
import type { Landing, WorktreeInfo } from "../core/types.js";
import { git, gitExit, gitMaybe, gitSucceeds, splitZ } from "./run.js";
import { checkoutBranch } from "./worktree.js";

/** Who a commit made for the child is by: the child itself, never the user's configured identity. */
export interface Identity {
  name: string;
  email: string;
}

export function identityEnv(author: Identity, committer: Identity = author): Record<string, string> {
  return {
    GIT_AUTHOR_NAME: author.name,
    GIT_AUTHOR_EMAIL: author.email,
    GIT_COMMITTER_NAME: committer.name,
    GIT_COMMITTER_EMAIL: committer.email,
  };
}

/** The child's identity for commits of its work: its agent name at an address that can never be mailed. */
export function childIdentity(agentName: string, taskId: string): Identity {
  return { name: agentName, email: `${taskId}@dsh-herdr.invalid` };
}

/** A commit of the task's whole work: the branch tip, or a new commit on top of it holding the uncommitted changes. */
export interface WorkSnapshot {
  /** The commit holding all the work (== tip when nothing is uncommitted). */
  commit: string;
  /** The task branch's tip when the snapshot was made. */
  tip: string;
  /** There were uncommitted changes: `commit` is new, on no branch yet. */
  changed: boolean;
  dispose(): Promise<void>;
}

/**
 * Snapshot the worktree's work as a commit without touching its index or files: a copy of its index (stat cache
 * kept), `git add -A` into the copy, `write-tree`, and `commit-tree` on the tip when the tree differs.
 */
export async function snapshotWork(worktreePath: string, author: Identity, message: string): Promise<WorkSnapshot> {
  const out = await git(worktreePath, ["rev-parse", "--git-path", "index", "HEAD"]);
  const [indexRel = "", tip = ""] = out.trim().split("\n");
  // The pid in the name: a daemon's recovery removes what a killed one left (land-scratch.ts).
  const work = await mkdtemp(join(tmpdir(), `dsh-land-${process.pid}-`));
  const dispose = () => rm(work, { recursive: true, force: true });
  try {
    const index = join(work, "index");
    await copyFile(resolve(worktreePath, indexRel), index).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== "ENOENT") throw e;
    });
    const env = { GIT_INDEX_FILE: index };
    await git(worktreePath, ["add", "-A", "--", "."], env);
    const tree = (await git(worktreePath, ["write-tree"], env)).trim();
    const tipTree = (await git(worktreePath, ["rev-parse", `${tip}^{tree}`])).trim();
    if (tree === tipTree) return { commit: tip, tip, changed: false, dispose };
    const commit = (
      await git(worktreePath, ["commit-tree", tree, "-p", tip, "-m", message], identityEnv(author))
    ).trim();
    return { commit, tip, changed: true, dispose };
  } catch (e) {
    await dispose();
    throw e;
  }
}

/**
 * The branch the task's work lands on: the one recorded at spawn; for an older record with base `HEAD`, the branch
 * its repository's checkout is on now; for a base given as a local branch, that branch. BAD_STATE otherwise.
 */
export async function baseBranchOf(wt: WorktreeInfo): Promise<string> {
  if (wt.baseBranch !== undefined) return wt.baseBranch;
  if (wt.base === "HEAD") {
    const now = checkoutBranch(wt.repo) ?? (await gitMaybe(wt.repo, ["symbolic-ref", "-q", "--short", "HEAD"]))?.trim();
    if (now) return now;
  } else if (await gitSucceeds(wt.repo, ["show-ref", "--verify", "--quiet", `refs/heads/${wt.base}`])) return wt.base;
  throw new DshError(
    "BAD_STATE",
    `the task branched from ${wt.base} in ${wt.repo}, which names no branch to land on; merge ${wt.branch} by hand (git merge ${wt.branch})`,
  );
}

export async function branchTip(repo: string, branch: string): Promise<string> {
  const sha = (await gitMaybe(repo, ["rev-parse", "--verify", "-q", `refs/heads/${branch}^{commit}`]))?.trim();
  if (!sha)
    throw new DshError(
      "BAD_STATE",
      `the base branch ${branch} no longer exists in ${repo}; land by hand or recreate it`,
    );
  return sha;
}

/** `git merge-tree --write-tree` of two commits: the merged tree, or the conflicting paths. */
export async function mergeTree(
  repo: string,
  ours: string,
  theirs: string,
): Promise<{ clean: boolean; tree: string; conflicts: string[] }> {
  const r = await gitExit(repo, ["merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", ours, theirs]);
  if (r.code !== 0 && r.code !== 1)
    throw new DshError(
      "GIT_FAILED",
      `git merge-tree --write-tree ${ours} ${theirs} failed in ${repo} (exit ${r.code}): ${r.stderr.trim()}; it needs git 2.38 or newer`,
    );
  const [tree = "", ...paths] = splitZ(r.stdout);
  return { clean: r.code === 0, tree, conflicts: [...new Set(paths.filter((p) => p !== ""))] };
}

export function isAncestor(repo: string, a: string, b: string): Promise<boolean> {
  return gitSucceeds(repo, ["merge-base", "--is-ancestor", a, b]);
}

/** The setup commit of a task whose setup changed what git sees (worktree-setup.ts): its parent and itself. */
export interface SetupCommit {
  from: string;
  commit: string;
}

/**
 * The work as it lands: the task's work without what its setup committed, as one commit on the commit the task
 * branched from (`from + (work - setup)`, a three-way merge with setup's tree as the base, in objects only: git 2.39's
 * merge-tree takes no merge base, so the three trees get commits of their own with setup's as the common parent).
 * `conflicts`: the child changed the same lines its setup changed, so the two cannot be told apart.
 */
export async function workWithoutSetup(
  repo: string,
  work: string,
  setup: SetupCommit,
  author: Identity,
  message: string,
): Promise<{ commit: string; conflicts: string[] }> {
  const trees = (await git(repo, ["rev-parse", `${work}^{tree}`, `${setup.commit}^{tree}`, `${setup.from}^{tree}`]))
    .trim()
    .split("\n");
  const [workTree = "", setupTree = "", fromTree = ""] = trees;
  if (workTree === setupTree) return { commit: setup.from, conflicts: [] };
  const env = identityEnv(author);
  const commitTree = async (tree: string, parents: string[], msg: string) =>
    (await git(repo, ["commit-tree", tree, ...parents.flatMap((p) => ["-p", p]), "-m", msg], env)).trim();
  const base = await commitTree(setupTree, [], "dsh-herdr: the tree setup left");
  const ours = await commitTree(fromTree, [base], "dsh-herdr: the tree the task branched from");
  const theirs = await commitTree(workTree, [base], "dsh-herdr: the task's work");
  const m = await mergeTree(repo, ours, theirs);
  if (!m.clean) return { commit: "", conflicts: m.conflicts };
  return { commit: await commitTree(m.tree, [setup.from], message), conflicts: [] };
}

export interface LandabilityOptions {
  worktree: WorktreeInfo;
  author: Identity;
  /** The task's setup commit, when its setup changed what git sees: it is not part of the work. */
  setup?: SetupCommit;
  now?: number;
}

/** The task's work (branch + uncommitted changes) against the current tip of its base branch. */
export async function landabilityOf(opts: LandabilityOptions): Promise<Landing> {
  return (await measureWork(opts)).landing;
}

/**
 * landabilityOf, with the tree the landing would give the base branch when it merges cleanly (what `land` would put
 * in the checkout: the dry run names what is in its way from it).
 */
export async function measureWork(opts: LandabilityOptions): Promise<{ landing: Landing; tree?: string }> {
  const wt = opts.worktree;
  const baseBranch = await baseBranchOf(wt);
  const baseHead = await branchTip(wt.repo, baseBranch);
  const snap = await snapshotWork(wt.path, opts.author, "dsh-herdr: landability snapshot");
  try {
    const work = opts.setup
      ? await workWithoutSetup(wt.repo, snap.commit, opts.setup, opts.author, "dsh-herdr: landability snapshot")
      : { commit: snap.commit, conflicts: [] };
    const m = work.conflicts.length
      ? { clean: false, conflicts: work.conflicts, tree: undefined }
      : await mergeTree(wt.repo, baseHead, work.commit);
    const landing: Landing = {
      baseBranch,
      baseHead,
      clean: m.clean,
      conflicts: m.conflicts,
      checkedAt: opts.now ?? Date.now(),
    };
    return m.clean && m.tree ? { landing, tree: m.tree } : { landing };
  } finally {
    await snap.dispose();
  }
}
