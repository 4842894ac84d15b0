// The git baseline recorded at spawn: HEAD (or null before the first commit) and what was already dirty.
import { repoFacts } from "./repo.js";
import { git, gitMaybe, splitZ } from "./run.js";

export interface Baseline {
  /** false when cwd is not in a git work tree: no diff will be harvested. */
  isRepo: boolean;
  repoRoot: string | null;
  baselineHead: string | null;
  /** `git status --porcelain` lines (`XY path`, renames `XY old -> new`), names exact (not quoted). */
  dirtyAtStart: string[];
  warnings: string[];
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
    opts.dirty === false ? "" : gitMaybe(cwd, ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=dirty"]),
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
  const dirty = status ?? (await git(facts.root, ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=dirty"]));
  return { isRepo: true, repoRoot: facts.root, baselineHead: facts.head, dirtyAtStart: porcelainLines(dirty), warnings: [] };
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
