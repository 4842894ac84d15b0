// Diff harvest: everything that changed since the baseline commit (commits, working tree, untracked files) as one
// patch, computed with a throwaway index so the user's index and staging are never touched.
import { randomBytes } from "node:crypto";
import { appendFile, copyFile, mkdtemp, rename, rm, stat, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";
import type { DiffEvidence } from "../core/types.js";
import { emptyTree, requireRepoRoot } from "./repo.js";
import { git, gitEnv, splitZ, CONFIG_ARGS } from "./run.js";
import { shortstat, streamDiff } from "./patch-stream.js";

export const DEFAULT_PATCH_CAP = 8 * 1024 * 1024;

export interface HarvestOptions {
  /** The task's cwd (or its worktree); any directory inside the repo. */
  cwd: string;
  /** The commit recorded at spawn; null = the repo had no commits (diff against the empty tree). */
  baselineHead: string | null;
  dirtyAtStart?: string[];
  /** Where diff.patch goes (tasks/<id>/diff.patch); replaced atomically. */
  patchPath: string;
  capBytes?: number;
}

export async function harvestDiff(opts: HarvestOptions): Promise<DiffEvidence> {
  const root = await requireRepoRoot(opts.cwd);
  const cap = opts.capBytes ?? DEFAULT_PATCH_CAP;
  const base = opts.baselineHead ?? (await emptyTree(root));
  const work = await mkdtemp(join(tmpdir(), "dsh-harvest-"));
  const tmpPatch = `${opts.patchPath}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  try {
    const [untrackedOut, indexPathOut] = await Promise.all([
      git(root, ["ls-files", "-z", "--others", "--exclude-standard"]),
      git(root, ["rev-parse", "--git-path", "index"]),
    ]);
    const untracked = splitZ(untrackedOut);
    // A copy of the user's index keeps its stat cache (fast) while every change we make lands in the copy.
    const userIndex = resolve(root, indexPathOut.trim());
    const index = join(work, "index");
    await copyFile(userIndex, index).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== "ENOENT") throw e; // no index yet: git starts from an empty one
    });
    const env = gitEnv({ GIT_INDEX_FILE: index, GIT_LITERAL_PATHSPECS: "1" });
    // Intent-to-add makes untracked files show in `git diff <base>` as new files without writing objects.
    const addable = untracked.filter((p) => !p.endsWith("/"));
    if (addable.length > 0) {
      const list = join(work, "untracked");
      await writeFile(list, addable.join("\0") + "\0");
      await git(root, ["add", "--intent-to-add", `--pathspec-from-file=${list}`, "--pathspec-file-nul"], env);
    }
    const args = [
      ...CONFIG_ARGS,
      "diff", "-z", "--numstat", "-p", "--binary", "-M", "--no-color", "--no-ext-diff", "--no-textconv",
      "--src-prefix=a/", "--dst-prefix=b/", base, "--",
    ];
    const streamed = await streamDiff(root, args, env, tmpPatch, cap);
    if (streamed.truncated) await appendFile(tmpPatch, truncationNote(streamed.patchBytes, cap, root, base));
    await rename(tmpPatch, opts.patchPath);
    const patchBytes = (await stat(opts.patchPath)).size;
    const files: string[] = [];
    for (const e of streamed.numstat) {
      if (e.from !== undefined) files.push(e.from);
      files.push(e.path);
    }
    return {
      baselineHead: opts.baselineHead,
      stat: shortstat(streamed.numstat),
      files,
      untracked,
      patchPath: isAbsolute(opts.patchPath) ? opts.patchPath : resolve(opts.patchPath),
      patchBytes,
      truncated: streamed.truncated,
      dirtyAtStart: opts.dirtyAtStart ?? [],
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
