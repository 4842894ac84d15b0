// Isolated worktrees: one per task at <home>/worktrees/<repo>-<taskId> on branch dsh/<taskId>.
import { existsSync, readFileSync, statSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { basename, join, resolve } from "node:path";
import lockfile from "proper-lockfile";
import { DshError } from "../core/errors.js";
import { assertTaskId } from "../core/ids.js";
import { KeyedQueue } from "../core/keyed-queue.js";
import type { WorktreeInfo } from "../core/types.js";
import { headCommit, requireRepoRoot } from "./repo.js";
import { git, gitMaybe, gitSucceeds } from "./run.js";

/**
 * `git worktree add` is not safe twice at once in one repository: the second reads the first's half-made
 * .git/worktrees/<name> entry and fails ("failed to read .git/worktrees/<name>/commondir"; 3 of 30 adds here when ten
 * ran at once, and CI failed a task's spawn on it). So one repository's worktrees change one at a time: in this
 * process through a queue, across processes (the daemon and a `dsh-herdr gc`, two homes) through a lock directory
 * in the repository's common git dir, which all its worktrees share.
 */
const repoQueues = new KeyedQueue();

export function withWorktreeLock<T>(repoRoot: string, op: () => Promise<T>): Promise<T> {
  const common = gitCommonDir(repoRoot);
  return repoQueues.run(common, () => acrossProcesses(common, op));
}

/** The git dir every worktree of the repository shares: <top>/.git, or where a linked worktree's .git points. */
export function gitCommonDir(repoRoot: string): string {
  const dotGit = join(repoRoot, ".git");
  try {
    if (statSync(dotGit).isDirectory()) return dotGit;
    const m = /^gitdir:\s*(.+)$/m.exec(readFileSync(dotGit, "utf8"));
    if (!m) return dotGit;
    const gitDir = resolve(repoRoot, m[1]!.trim());
    try {
      return resolve(gitDir, readFileSync(join(gitDir, "commondir"), "utf8").trim());
    } catch {
      return gitDir; // a submodule's own git dir: nothing shared above it
    }
  } catch {
    return dotGit;
  }
}

/** What a holder that died is given before its lock counts as stale (proper-lockfile refreshes it meanwhile). */
const LOCK_STALE_MS = 10_000;
const LOCK_RETRY_MS = 25;

async function acrossProcesses<T>(commonDir: string, op: () => Promise<T>): Promise<T> {
  const lockPath = join(commonDir, "dsh-herdr-worktrees.lock");
  const waitMs = LOCK_STALE_MS * 1.5;
  const until = Date.now() + waitMs;
  let release: (() => void) | undefined;
  for (;;) {
    try {
      // The sync API with our own retry loop: the async one's mkdir, stat and rmdir were three thread-pool round
      // trips on every spawn (~3 ms here); lock + release this way is ~1.3 ms.
      release = lockfile.lockSync(commonDir, {
        lockfilePath: lockPath,
        realpath: false,
        stale: LOCK_STALE_MS,
        // A refresh that fails (the lock dir removed by hand) must not crash the daemon: the op is short.
        onCompromised: () => undefined,
      });
      break;
    } catch (e) {
      // No lock to be had (a read-only git dir, ...): git says what is wrong, if anything, as it did before.
      if ((e as NodeJS.ErrnoException).code !== "ELOCKED") break;
      // Held: by a gc removing worktrees, or by a holder that died (its lock goes stale, then it is taken over).
      if (Date.now() > until)
        throw new DshError(
          "GIT_FAILED",
          `another process has held the worktree lock of ${commonDir} for over ${waitMs / 1000} s (${lockPath}); wait for it (a \`dsh-herdr gc --yes\`?), or remove that directory if no dsh-herdr process runs`,
        );
      await new Promise((r) => setTimeout(r, LOCK_RETRY_MS));
    }
  }
  try {
    return await op();
  } finally {
    try {
      release?.();
    } catch {
      // already gone (removed by hand, or taken over as stale): nothing of ours to remove
    }
  }
}

/**
 * Remove a worktree no work went into, and its branch (a spawn that failed after starting it, a task started again
 * after a crash before its launch). GIT_FAILED naming the command when the worktree cannot be removed.
 */
export function removeUnusedWorktree(repoRoot: string, path: string, branch: string): Promise<void> {
  return withWorktreeLock(repoRoot, async () => {
    if (existsSync(path) && (await gitMaybe(repoRoot, ["worktree", "remove", "--force", path])) === undefined)
      throw new DshError(
        "GIT_FAILED",
        `could not remove the unused worktree ${path}; remove it with \`git worktree remove --force ${path}\``,
      );
    await gitMaybe(repoRoot, ["worktree", "prune"]);
    await gitMaybe(repoRoot, ["branch", "-D", branch]);
  });
}

export function branchFor(taskId: string): string {
  return `dsh/${assertTaskId(taskId)}`;
}

export function worktreePathFor(home: string, repoRoot: string, taskId: string): string {
  // The repo's folder name keeps the path readable; only safe characters so it is never a path trick.
  const name =
    basename(repoRoot)
      .replace(/[^A-Za-z0-9._-]+/g, "_")
      .replace(/^\.+/, "_") || "repo";
  return join(home, "worktrees", `${name}-${assertTaskId(taskId)}`);
}

export interface CreateWorktreeOptions {
  /** Any directory inside the source repo. */
  repoCwd: string;
  home: string;
  taskId: string;
  /** Commit-ish to branch from; default HEAD. */
  base?: string;
  /**
   * What the caller already learned: the repo's top level, and HEAD as captureBaseline saw it. Without `head`
   * (the spawn request found the repo without git), the worktree branches from HEAD and its new branch says
   * which commit that was: one git process in all, as by hand.
   */
  known?: { repoRoot: string; head?: string | null };
}

/** The worktree, and the commit its branch starts at (the task's baseline). */
export type CreatedWorktree = WorktreeInfo & { head: string };

export async function createWorktree(opts: CreateWorktreeOptions): Promise<CreatedWorktree> {
  const repo = opts.known?.repoRoot ?? (await requireRepoRoot(opts.repoCwd));
  const base = opts.base ?? "HEAD";
  if (base.startsWith("-"))
    throw new DshError("BAD_PARAMS", `base ${JSON.stringify(base)} is not a commit-ish; pass a branch, tag or sha.`);
  if (opts.known && opts.known.head === undefined && base === "HEAD") return addFromHead(opts, repo);
  const head = opts.known?.head !== undefined ? opts.known.head : await headCommit(repo);
  if (head === null) {
    throw new DshError(
      "GIT_FAILED",
      `${repo} has no commits yet, so there is nothing to branch an isolated worktree from; commit once, or spawn without isolated.`,
    );
  }
  // HEAD as the baseline saw it: branch from that exact commit (no second lookup, no race with a new commit).
  const from = base === "HEAD" && opts.known ? head : base;
  if (from !== head && !(await gitSucceeds(repo, ["rev-parse", "--verify", "--quiet", `${base}^{commit}`]))) {
    throw new DshError(
      "BAD_PARAMS",
      `base ${JSON.stringify(base)} is not a commit in ${repo}; pass an existing branch, tag or sha.`,
    );
  }
  const path = worktreePathFor(opts.home, repo, opts.taskId);
  const branch = branchFor(opts.taskId);
  await mkdir(join(opts.home, "worktrees"), { recursive: true, mode: 0o700 });
  const baseBranch = base === "HEAD" ? checkoutBranch(repo) : await localBranch(repo, base);
  await withWorktreeLock(repo, () => git(repo, ["worktree", "add", "-b", branch, path, from]));
  return {
    path,
    branch,
    repo,
    base,
    ...(baseBranch !== undefined ? { baseBranch } : {}),
    head: from === head ? head : ((await headCommit(path)) ?? head),
  };
}

/**
 * The branch a checkout is on, from its HEAD file (no git process; the spawn's path counts them): what `land`
 * later merges the task's work into. Undefined when detached, or when HEAD is not a plain file (git is then asked).
 */
export function checkoutBranch(root: string): string | undefined {
  try {
    const dotGit = join(root, ".git");
    let gitDir = dotGit;
    if (!statSync(dotGit).isDirectory()) {
      const m = /^gitdir:\s*(.+)$/m.exec(readFileSync(dotGit, "utf8"));
      if (!m) return undefined;
      gitDir = resolve(root, m[1]!.trim());
    }
    const ref = /^ref:\s*refs\/heads\/(.+)$/m.exec(readFileSync(join(gitDir, "HEAD"), "utf8"));
    return ref ? ref[1]!.trim() : undefined;
  } catch {
    return undefined;
  }
}

/** `base` when it names a local branch, else undefined (a tag or a sha has no branch to land on). */
async function localBranch(repo: string, base: string): Promise<string | undefined> {
  const name = base.startsWith("refs/heads/") ? base.slice("refs/heads/".length) : base;
  return (await gitSucceeds(repo, ["show-ref", "--verify", "--quiet", `refs/heads/${name}`])) ? name : undefined;
}

const NO_COMMITS = (repo: string) =>
  new DshError(
    "GIT_FAILED",
    `${repo} has no commits yet, so there is nothing to branch an isolated worktree from; commit once, or spawn without isolated.`,
  );

/** `git worktree add` from HEAD; the commit it used is read back from the new branch's ref file. */
async function addFromHead(opts: CreateWorktreeOptions, repo: string): Promise<CreatedWorktree> {
  const path = worktreePathFor(opts.home, repo, opts.taskId);
  const branch = branchFor(opts.taskId);
  await mkdir(join(opts.home, "worktrees"), { recursive: true, mode: 0o700 });
  const baseBranch = checkoutBranch(repo);
  try {
    await withWorktreeLock(repo, () => git(repo, ["worktree", "add", "-b", branch, path, "HEAD"]));
  } catch (e) {
    if ((await headCommit(repo)) === null) throw NO_COMMITS(repo);
    throw e;
  }
  const head = branchTip(path, branch) ?? (await headCommit(path));
  if (head === null) throw NO_COMMITS(repo);
  return { path, branch, repo, base: "HEAD", ...(baseBranch !== undefined ? { baseBranch } : {}), head };
}

/**
 * The sha a branch just created by `git worktree add` points at, from its loose ref file in the common git dir
 * (no git process); undefined when the layout is not the plain files backend (reftable, packed), then git is asked.
 */
// Three tiny reads on the spawn's path, done synchronously (a thread-pool round trip each cost more than the read).
function branchTip(worktree: string, branch: string): string | undefined {
  try {
    const sha = readFileSync(join(gitCommonDir(worktree), "refs", "heads", ...branch.split("/")), "utf8").trim();
    return /^[0-9a-f]{40,64}$/.test(sha) ? sha : undefined;
  } catch {
    return undefined;
  }
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
