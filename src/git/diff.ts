// Diff harvest: everything that changed since the baseline commit (commits, working tree, untracked files) as one
// patch, computed with a throwaway index so the user's index and staging are never touched.
import { randomBytes } from "node:crypto";
import {
  appendFile,
  copyFile,
  lstat,
  mkdtemp,
  readdir,
  rename,
  rm,
  stat,
  unlink,
  utimes,
  writeFile,
} from "node:fs/promises";
import { dirname, isAbsolute, join, resolve } from "node:path";
import type { DiffEvidence } from "../core/types.js";
import { DshError } from "../core/errors.js";
import { emptyTree } from "./repo.js";
import { git, gitEnv, gitStdinFile, splitZ, CONFIG_ARGS } from "./run.js";
import { shortstat, streamDiff } from "./patch-stream.js";
import { changedSinceBaseline } from "./baseline.js";

export const DEFAULT_PATCH_CAP = 8 * 1024 * 1024;

export interface HarvestOptions {
  /** The task's cwd (or its worktree); any directory inside the repo. */
  cwd: string;
  /** The commit recorded at spawn; null = the repo had no commits (diff against the empty tree). */
  baselineHead: string | null;
  dirtyAtStart?: string[];
  /** Content hashes of the dirty-at-start files (baseline.ts): those whose content changed are named in dirtyChanged. */
  dirtyHashes?: Record<string, string>;
  /** Where diff.patch goes (tasks/<id>/diff.patch); replaced atomically. */
  patchPath: string;
  capBytes?: number;
}

const HARVEST_WORK_PREFIX = ".harvest-";

/** Work dirs of earlier harvests in this dir that never finished (one harvest runs per task at a time). */
async function removeStaleWork(dir: string): Promise<void> {
  const names = await readdir(dir).catch(() => [] as string[]);
  await Promise.all(
    names
      .filter((n) => n.startsWith(HARVEST_WORK_PREFIX))
      .map((n) => rm(join(dir, n), { recursive: true, force: true })),
  );
}

export async function harvestDiff(opts: HarvestOptions): Promise<DiffEvidence> {
  const { root, userIndex, emptyBlob } = await locate(opts.cwd);
  const cap = opts.capBytes ?? DEFAULT_PATCH_CAP;
  const base = opts.baselineHead ?? (await emptyTree(root));
  // Beside the patch (the task dir), not in /tmp: a harvest killed mid-way (the daemon SIGKILLed) leaves its index
  // copy where the next harvest of the task removes it, and gc removes it with the task.
  const dir = dirname(opts.patchPath);
  await removeStaleWork(dir);
  const work = await mkdtemp(join(dir, HARVEST_WORK_PREFIX));
  const tmpPatch = `${opts.patchPath}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  try {
    // A copy of the user's index keeps its stat cache (fast) while every change we make lands in the copy. The copy
    // keeps the index's mtime: git re-reads ("racily clean") an entry whose file is not older than the index, and a
    // fresh mtime on the copy made a same-size edit in the index's second read as unchanged (CI saw a.txt missing).
    const index = join(work, "index");
    const [untrackedOut] = await Promise.all([
      git(root, ["ls-files", "-z", "--others", "--exclude-standard"]),
      copyIndex(userIndex, index),
    ]);
    const untracked = splitZ(untrackedOut);
    const env = gitEnv({ GIT_INDEX_FILE: index, GIT_LITERAL_PATHSPECS: "1" });
    // Untracked files enter the throwaway index as placeholder entries (empty-blob id, no stat data): git then finds
    // them "changed" and diffs the working-tree content as new files. `update-index --index-info` takes ~10 ms where
    // `git add -N` rescans the whole tree (~100 ms on 20k files) and hashing them would write objects into the repo.
    const addable = untracked.filter((p) => !p.endsWith("/"));
    if (addable.length > 0) {
      const lines = await Promise.all(addable.map(async (p) => `${await gitMode(join(root, p))} ${emptyBlob}\t${p}\0`));
      const list = join(work, "untracked");
      await writeFile(list, lines.join(""));
      await gitStdinFile(root, ["update-index", "-z", "--index-info"], list, env);
    }
    const args = [
      ...CONFIG_ARGS,
      "diff",
      "-z",
      "--raw",
      "-p",
      "--binary",
      "-M",
      "--no-color",
      "--no-ext-diff",
      "--no-textconv",
      "--src-prefix=a/",
      "--dst-prefix=b/",
      base,
      "--",
    ];
    const streamed = await streamDiff(root, args, env, tmpPatch, cap);
    if (streamed.truncated) await appendFile(tmpPatch, truncationNote(streamed.patchBytes, cap, root, base));
    await rename(tmpPatch, opts.patchPath);
    const patchBytes = (await stat(opts.patchPath)).size;
    const files: string[] = [];
    for (const e of streamed.entries) {
      if (e.from !== undefined) files.push(e.from);
      files.push(e.path);
    }
    const dirtyChanged = opts.dirtyHashes ? await changedSinceBaseline(root, opts.dirtyHashes) : undefined;
    return {
      baselineHead: opts.baselineHead,
      stat: shortstat(streamed.entries.length, streamed.insertions, streamed.deletions),
      files,
      untracked,
      patchPath: isAbsolute(opts.patchPath) ? opts.patchPath : resolve(opts.patchPath),
      patchBytes,
      truncated: streamed.truncated,
      dirtyAtStart: opts.dirtyAtStart ?? [],
      ...(dirtyChanged ? { dirtyChanged } : {}),
    };
  } finally {
    await unlink(tmpPatch).catch(() => undefined);
    await rm(work, { recursive: true, force: true });
  }
}

function truncationNote(kept: number, cap: number, root: string, base: string): string {
  return (
    `\n# dsh-herdr: diff truncated: kept ${kept} bytes of whole file patches (patchCapBytes ${cap}).\n` +
    `# The whole diff: cd ${JSON.stringify(root)} && git diff --binary ${base}; new files: git ls-files --others --exclude-standard.\n` +
    `# Or raise the cap (dsh-herdr config set patchCapBytes <bytes>) and harvest again.\n`
  );
}

/** The user's index copied with its timestamps (git's racy-clean check compares entries with the index's mtime). */
async function copyIndex(from: string, to: string): Promise<void> {
  try {
    const st = await stat(from);
    await copyFile(from, to);
    await utimes(to, st.atime, st.mtime);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e; // no index yet: git starts from an empty one
  }
}

/** The index mode git would record for a working-tree file: symlink, executable or plain. */
async function gitMode(path: string): Promise<string> {
  const st = await lstat(path).catch(() => undefined);
  if (st?.isSymbolicLink()) return "120000";
  return st !== undefined && (st.mode & 0o111) !== 0 ? "100755" : "100644";
}

const EMPTY_BLOB: Record<string, string> = {
  sha1: "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391",
  sha256: "473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813",
};

interface Located {
  root: string;
  userIndex: string;
  emptyBlob: string;
}

/** Where each cwd's repo was found, with its git dir's identity then (a repo made again under the path has another). */
const located = new Map<string, { at: Located; gitDir: string }>();
/** Enough for every live task's workdir; the oldest is dropped first. */
const LOCATED_MAX = 1024;

/**
 * The repo's top level, the user's index file and the empty blob id: one git call the first time per cwd, then one
 * stat. Each git process costs the daemon's event loop 5-9 ms on a 2-CPU VM (node's fork waits for the child's
 * exec), and a settle in a repo ran three: a burst of settles queued behind them (docs/performance.md).
 */
async function locate(cwd: string): Promise<Located> {
  const st = await stat(cwd).catch(() => undefined);
  if (st === undefined || !st.isDirectory())
    throw new DshError("BAD_PARAMS", `${cwd} is not a directory; pass the task's working directory.`);
  const known = located.get(cwd);
  if (known && (await gitDirIdentity(known.at)) === known.gitDir) return known.at;
  const at = await locateByGit(cwd);
  const gitDir = await gitDirIdentity(at);
  if (gitDir !== undefined) {
    located.delete(cwd);
    if (located.size >= LOCATED_MAX) located.delete(located.keys().next().value!);
    located.set(cwd, { at, gitDir });
  }
  return at;
}

/** The directory holding the index, as inode and birth time: another repo made under the same path differs. */
async function gitDirIdentity(at: Located): Promise<string | undefined> {
  const st = await stat(dirname(at.userIndex)).catch(() => undefined);
  return st && `${st.ino}:${st.birthtimeMs}`;
}

async function locateByGit(cwd: string): Promise<Located> {
  let out: string;
  try {
    out = await git(cwd, ["rev-parse", "--show-toplevel", "--git-path", "index", "--show-object-format"]);
  } catch {
    throw new DshError(
      "NOT_A_REPO",
      `${cwd} is not inside a git work tree, so there is no diff to harvest; run \`git init\` there or pick a repo directory.`,
    );
  }
  const [root = "", index = "", format = "sha1"] = out.split("\n");
  // --git-path is relative to cwd unless absolute.
  return { root, userIndex: resolve(cwd, index), emptyBlob: EMPTY_BLOB[format] ?? EMPTY_BLOB.sha1! };
}
