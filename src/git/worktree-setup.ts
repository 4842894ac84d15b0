// Worktree setup (spawn --include / --setup): the untracked and ignored files a task needs from the user's checkout
// (`.env`, `node_modules`) brought into its new worktree, and, once the setup command ran, what setup changed that
// git sees committed on the task branch, so the task's baseline includes it: the diff, landability and `land` count
// only the child's work (landability.ts workWithoutSetup takes the setup commit out again when the work lands).
//
// Files are copied: they are small, and a child that edits its `.env` must not edit the user's. Directories are
// symlinked to the checkout's: they are dependency trees and caches (`node_modules`, `.venv`, `target`) that take
// seconds to minutes and gigabytes to copy, and a child reads them; the cost is that a child (or setup) that writes
// into a linked directory writes into the checkout's (docs/cli.md says so, and to use --setup "npm ci" instead).
import { copyFile, lstat, mkdir, readlink, symlink } from "node:fs/promises";
import { dirname, join } from "node:path";
import { DshError } from "../core/errors.js";
import { type Identity, snapshotWork } from "./landability.js";
import { git, splitZ } from "./run.js";

/** Past this many matched entries an include is refused: it names files one by one, not a tree. */
export const INCLUDE_MAX_ENTRIES = 1000;

/** What setup's commits are by: dsh-herdr on behalf of the task, at an address that can never be mailed. */
export function setupIdentity(taskId: string): Identity {
  return { name: "dsh-herdr setup", email: `setup-${taskId}@dsh-herdr.invalid` };
}

/** A pattern is one .gitignore line: no line breaks or NUL, not empty, not a comment. */
export function checkIncludePattern(p: string): string | undefined {
  if (p.trim() === "") return "is empty";
  if (/[\n\r\0]/.test(p)) return "has a line break";
  if (p.startsWith("#")) return "starts with # (a comment in .gitignore syntax)";
  return undefined;
}

/**
 * The untracked entries (ignored or not) of the checkout at repoRoot that one pattern in .gitignore syntax matches:
 * `git ls-files --others --ignored --exclude=PATTERN --directory`, so git does the matching and a matched directory
 * comes as one `dir/` entry. git also lists the directories that only contain a match (`config/` beside
 * `config/a.local.json`): those are dropped.
 */
export async function matchInclude(repoRoot: string, pattern: string): Promise<string[]> {
  const out = await git(repoRoot, ["ls-files", "-z", "--others", "--ignored", `--exclude=${pattern}`, "--directory"]);
  const entries = splitZ(out);
  return entries.filter((e) => !(e.endsWith("/") && entries.some((o) => o !== e && o.startsWith(e))));
}

export interface Included {
  /** Files copied into the worktree (paths relative to the repository root). */
  copied: string[];
  /** Directories symlinked to the checkout's. */
  linked: string[];
  /** Patterns that matched nothing. */
  unmatched: string[];
}

/** Copy (files) or link (directories) what the patterns match from repoRoot into the worktree at the same paths. */
export async function includeInto(repoRoot: string, worktree: string, patterns: readonly string[]): Promise<Included> {
  const matched = await Promise.all(patterns.map((p) => matchInclude(repoRoot, p)));
  const out: Included = { copied: [], linked: [], unmatched: patterns.filter((_, i) => matched[i]!.length === 0) };
  const entries = [...new Set(matched.flat())].sort();
  if (entries.length > INCLUDE_MAX_ENTRIES)
    throw new DshError(
      "BAD_PARAMS",
      `the include patterns (${patterns.join(", ")}) match ${entries.length} entries of ${repoRoot}, more than ${INCLUDE_MAX_ENTRIES}; name the files or the directory itself (node_modules/, not node_modules/**)`,
    );
  for (const e of entries) {
    const isDir = e.endsWith("/");
    const rel = isDir ? e.slice(0, -1) : e;
    // A directory already linked covers what is below it.
    if (out.linked.some((d) => rel.startsWith(`${d}/`))) continue;
    const src = join(repoRoot, rel);
    const dst = join(worktree, rel);
    // Never over anything the worktree has (a tracked file of the same name).
    if (
      await lstat(dst).then(
        () => true,
        () => false,
      )
    )
      continue;
    await mkdir(dirname(dst), { recursive: true });
    const st = await lstat(src);
    if (st.isSymbolicLink()) {
      await symlink(await readlink(src), dst);
      out.copied.push(rel);
    } else if (isDir || st.isDirectory()) {
      await symlink(src, dst);
      out.linked.push(rel);
    } else if (st.isFile()) {
      await copyFile(src, dst);
      out.copied.push(rel);
    }
  }
  return out;
}

export interface SetupBase {
  /** The commit the task branched from (the setup commit's parent). */
  from: string;
  /** What setup changed that git sees, committed on the task branch: the task's baseline. */
  commit: string;
}

/**
 * After setup: the worktree's changes that git sees (new files that are not ignored, edits of tracked files, a linked
 * directory that the .gitignore names only with a trailing slash) become one commit on the task branch, by
 * dsh-herdr setup, and the worktree's index takes it, so the child starts from a clean status. Undefined when setup
 * left nothing git sees (the usual case: what it makes is ignored).
 */
export async function commitSetup(
  worktree: string,
  branch: string,
  taskId: string,
  message: string,
): Promise<SetupBase | undefined> {
  const snap = await snapshotWork(worktree, setupIdentity(taskId), message);
  try {
    if (!snap.changed) return undefined;
    await git(worktree, ["update-ref", "-m", "dsh-herdr setup", `refs/heads/${branch}`, snap.commit, snap.tip]);
    await git(worktree, ["reset", "-q"]);
    return { from: snap.tip, commit: snap.commit };
  } finally {
    await snap.dispose();
  }
}
