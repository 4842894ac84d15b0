// Isolated worktrees: one per task at <home>/worktrees/<repo>-<taskId> on branch dsh/<taskId>.
import { mkdir } from "node:fs/promises";
import { basename, join } from "node:path";
import { DshError } from "../core/errors.js";
import { assertTaskId } from "../core/ids.js";
import type { WorktreeInfo } from "../core/types.js";
import { headCommit, requireRepoRoot } from "./repo.js";
import { git, gitSucceeds } from "./run.js";

export function branchFor(taskId: string): string {
  return `dsh/${assertTaskId(taskId)}`;
}

export function worktreePathFor(home: string, repoRoot: string, taskId: string): string {
  // The repo's folder name keeps the path readable; only safe characters so it is never a path trick.
  const name = basename(repoRoot).replace(/[^A-Za-z0-9._-]+/g, "_").replace(/^\.+/, "_") || "repo";
  return join(home, "worktrees", `${name}-${assertTaskId(taskId)}`);
}

export interface CreateWorktreeOptions {
  /** Any directory inside the source repo. */
  repoCwd: string;
  home: string;
  taskId: string;
  /** Commit-ish to branch from; default HEAD. */
  base?: string;
  /** What captureBaseline already learned (the repo's top level and HEAD): saves asking git again. */
  known?: { repoRoot: string; head: string | null };
}

export async function createWorktree(opts: CreateWorktreeOptions): Promise<WorktreeInfo> {
  const repo = opts.known?.repoRoot ?? (await requireRepoRoot(opts.repoCwd));
  const base = opts.base ?? "HEAD";
  if (base.startsWith("-")) throw new DshError("BAD_PARAMS", `base ${JSON.stringify(base)} is not a commit-ish; pass a branch, tag or sha.`);
  const head = opts.known ? opts.known.head : await headCommit(repo);
  if (head === null) {
    throw new DshError("GIT_FAILED", `${repo} has no commits yet, so there is nothing to branch an isolated worktree from; commit once, or spawn without isolated.`);
  }
  // HEAD as the baseline saw it: branch from that exact commit (no second lookup, no race with a new commit).
  const from = base === "HEAD" && opts.known ? head : base;
  if (from !== head && !(await gitSucceeds(repo, ["rev-parse", "--verify", "--quiet", `${base}^{commit}`]))) {
    throw new DshError("BAD_PARAMS", `base ${JSON.stringify(base)} is not a commit in ${repo}; pass an existing branch, tag or sha.`);
  }
  const path = worktreePathFor(opts.home, repo, opts.taskId);
  const branch = branchFor(opts.taskId);
  await mkdir(join(opts.home, "worktrees"), { recursive: true, mode: 0o700 });
  await git(repo, ["worktree", "add", "-b", branch, path, from]);
  return { path, branch, repo, base };
}

export interface ListedWorktree {
  path: string;
  head: string | null;
  /** Full ref, e.g. refs/heads/dsh/t…; undefined when detached. */
  branch?: string;
  prunable: boolean;
}

/** `git worktree list --porcelain` of a repo (the main worktree first). */
export async function listWorktrees(repo: string): Promise<ListedWorktree[]> {
  const out = await git(repo, ["worktree", "list", "--porcelain", "-z"]);
  const list: ListedWorktree[] = [];
  let cur: ListedWorktree | undefined;
  for (const field of out.split("\0")) {
    if (field === "") {
      if (cur !== undefined) list.push(cur);
      cur = undefined;
      continue;
    }
    const sp = field.indexOf(" ");
    const key = sp < 0 ? field : field.slice(0, sp);
    const val = sp < 0 ? "" : field.slice(sp + 1);
    if (key === "worktree") cur = { path: val, head: null, prunable: false };
    else if (cur !== undefined && key === "HEAD") cur.head = val;
    else if (cur !== undefined && key === "branch") cur.branch = val;
    else if (cur !== undefined && key === "prunable") cur.prunable = true;
  }
  if (cur !== undefined) list.push(cur);
  return list;
}
