// The git baseline recorded at spawn: HEAD (or null before the first commit), what was already dirty, and a hash of
// each dirty file's content (so a later edit of an already-dirty file is still seen).
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { lstat } from "node:fs/promises";
import { join } from "node:path";
import { porcelainPath } from "../core/result/summary.js";
import { repoFacts } from "./repo.js";
import { git, gitMaybe, splitZ } from "./run.js";

export interface Baseline {
  /** false when cwd is not in a git work tree: no diff will be harvested. */
  isRepo: boolean;
  repoRoot: string | null;
  baselineHead: string | null;
  /** `git status --porcelain` lines (`XY path`, renames `XY old -> new`), names exact (not quoted). */
  dirtyAtStart: string[];
  /** Path (relative to repoRoot) → content hash of each file dirty at spawn (up to DIRTY_HASH_MAX files). */
  dirtyHashes?: Record<string, string>;
  warnings: string[];
}

/** Past this many dirty files none is hashed: the dirty-at-spawn paths are then only subtracted (as before). */
export const DIRTY_HASH_MAX = 2000;

/** sha256 of a regular file's bytes; "missing" when absent, "link:"/"other:" for what is not a regular file. */
export async function contentHash(path: string): Promise<string> {
  const st = await lstat(path).catch(() => undefined);
  if (st === undefined) return "missing";
  if (!st.isFile()) return st.isSymbolicLink() ? `link:${st.size}:${st.mtimeMs}` : "other";
  const h = createHash("sha256");
  await new Promise<void>((resolve, reject) => {
    createReadStream(path)
      .on("data", (b) => h.update(b))
      .on("end", () => resolve())
      .on("error", reject);
  });
  return h.digest("hex");
}

/** Content hashes of the paths of porcelain lines, or undefined when there are too many to hash. */
export async function hashDirty(root: string, lines: string[]): Promise<Record<string, string> | undefined> {
  if (lines.length > DIRTY_HASH_MAX) return undefined;
  const paths = [...new Set(lines.map(porcelainPath))];
  const out: Record<string, string> = {};
  for (const p of paths) out[p] = await contentHash(join(root, p)).catch(() => "unreadable");
  return out;
}

/** Paths dirty at spawn whose content is no longer what it was then. */
export async function changedSinceBaseline(root: string, hashes: Record<string, string>): Promise<string[]> {
  const changed: string[] = [];
  for (const [p, h] of Object.entries(hashes)) {
    if ((await contentHash(join(root, p)).catch(() => "unreadable")) !== h) changed.push(p);
  }
  return changed;
}

export interface CaptureOptions {
  /** false: skip `git status` (an isolated task starts in a fresh worktree, so nothing there is dirty yet). */
  dirty?: boolean;
  /** Root and HEAD already asked for moments ago (the spawn request's repo check): not asked again. */
  known?: { root: string; head: string | null };
}

export async function captureBaseline(cwd: string, opts: CaptureOptions = {}): Promise<Baseline> {
  // Root and HEAD in one call; the dirty list (porcelain paths are relative to the top level) alongside it.
  const [facts, status] = await Promise.all([
    opts.known ?? repoFacts(cwd),
    opts.dirty === false
      ? ""
      : gitMaybe(cwd, ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=dirty"]),
  ]);
  if (facts === undefined) {
    return {
      isRepo: false,
      repoRoot: null,
      baselineHead: null,
      dirtyAtStart: [],
      warnings: [`${cwd} is not a git repository: no diff will be recorded for this task.`],
    };
  }
  // A status that failed in a repo is a real problem (not "nothing dirty"): ask again and let it throw.
  const dirty =
    status ??
    (await git(facts.root, ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=dirty"]));
  const dirtyAtStart = porcelainLines(dirty);
  const dirtyHashes = dirtyAtStart.length > 0 ? await hashDirty(facts.root, dirtyAtStart) : undefined;
  return {
    isRepo: true,
    repoRoot: facts.root,
    baselineHead: facts.head,
    dirtyAtStart,
    ...(dirtyHashes ? { dirtyHashes } : {}),
    warnings: [],
  };
}

/** `git status --porcelain -z` → lines; a rename/copy entry carries its source path as the next field. */
export function porcelainLines(z: string): string[] {
  const fields = splitZ(z);
  const lines: string[] = [];
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i]!;
    const xy = f.slice(0, 2);
    if (xy.includes("R") || xy.includes("C")) {
      const from = fields[++i] ?? "";
      lines.push(`${xy} ${from} -> ${f.slice(3)}`);
    } else {
      lines.push(f);
    }
  }
  return lines;
}
