// gc: remove the worktrees and dsh/* branches of closed tasks, but only when their work is captured: the saved
// patch is complete and equals a fresh harvest, or the branch is merged into its base with a clean worktree.
// Dry-run by default; every kept item says why. Nothing is lost unannounced: a removed branch's commits not in its
// base stay reachable under refs/dsh/archive/<id>, and gitignored files a removal would delete are named in the plan
// (and --yes deletes only ignored files a dry run named, passed back in as `announced`).
import { randomBytes } from "node:crypto";
import { realpathSync } from "node:fs";
import { lstat, readFile, readlink, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isValidTaskId } from "../core/ids.js";
import type { WorktreeInfo } from "../core/types.js";
import { harvestDiff } from "./diff.js";
import { git, gitMaybe, gitSucceeds, splitZ } from "./run.js";
import { listWorktrees, withWorktreeLock } from "./worktree.js";

export interface GcTask {
  taskId: string;
  /** Open tasks (anything not closed/finished) are never touched. */
  open: boolean;
  worktree?: WorktreeInfo;
  /** From the last harvest. */
  diff?: { baselineHead: string | null; patchPath: string; truncated: boolean };
  /** `dsh-herdr land` landed it (AgentResult.landing): removable once its base holds the landed commit. */
  landing?: { baseBranch: string; landedAs?: string; workHead?: string };
  /** What `--include` brought into the worktree (task.json `included`): a copy still equal to its source is no work. */
  included?: Included;
}

/** Paths relative to the worktree: files copied from the checkout, directories linked to it. */
export interface Included {
  copied: string[];
  linked: string[];
}

export interface GcPlanItem {
  taskId: string;
  repo: string;
  path: string | null;
  branch: string;
  action: "remove" | "keep";
  reason: string;
  /** Gitignored files in the worktree that removing it deletes (they are in no patch). */
  ignored?: IgnoredFiles;
  /** The branch has commits not in its base: they are kept at this ref when the branch is deleted. */
  archiveRef?: string;
  /** With yes:true: whether the removal happened (or the error). */
  done?: boolean;
  error?: string;
}

export interface IgnoredFiles {
  count: number;
  bytes: number;
  /** The first few paths (relative to the worktree), for the plan. */
  first: string[];
  /** Every path → its size, to check against a dry run's announcement. */
  all: Record<string, number>;
}

/** What a dry run named: worktree path → ignored file → size. */
export type Announced = Record<string, Record<string, number>>;

export interface GcOptions {
  tasks: GcTask[];
  /** Act; without it the plan is only computed. */
  yes?: boolean;
  capBytes?: number;
  /** With yes: the ignored files the last dry run named; a worktree holding any other ignored file is kept. */
  announced?: Announced;
}

export const ARCHIVE_PREFIX = "refs/dsh/archive/";
const SHOWN_IGNORED = 5;
/** An included copy larger than this is not compared with its source. */
const COMPARE_MAX_BYTES = 64 * 1024 * 1024;

const PREFIX = "refs/heads/dsh/";

export async function gc(opts: GcOptions): Promise<GcPlanItem[]> {
  const byId = new Map(opts.tasks.map((t) => [t.taskId, t]));
  const repos = [...new Set(opts.tasks.flatMap((t) => (t.worktree ? [t.worktree.repo] : [])))];
  const plan: GcPlanItem[] = [];
  for (const repo of repos) {
    if ((await stat(repo).catch(() => undefined)) === undefined) continue;
    const worktrees = await listWorktrees(repo);
    const branches = (await git(repo, ["for-each-ref", "--format=%(refname)", PREFIX]))
      .split("\n")
      .filter((b) => b !== "");
    const seen = new Set<string>();
    for (const wt of worktrees.slice(1)) {
      const known = opts.tasks.find(
        (t) => t.worktree !== undefined && t.worktree.repo === repo && samePath(t.worktree.path, wt.path),
      );
      if (wt.branch === undefined || !wt.branch.startsWith(PREFIX)) {
        // A task's worktree that left its dsh/ branch (detached, or switched): listed, never removed blindly.
        if (known?.worktree) {
          const where =
            wt.branch === undefined
              ? `detached at ${wt.head?.slice(0, 12) ?? "?"}`
              : `on ${wt.branch.replace("refs/heads/", "")}`;
          plan.push({
            taskId: known.taskId,
            repo,
            path: wt.path,
            branch: known.worktree.branch,
            action: "keep",
            reason: `the worktree is ${where}, not on ${known.worktree.branch}: commits made there may be on no branch; inspect it, then \`git worktree remove\` it by hand`,
          });
        }
        continue;
      }
      seen.add(wt.branch);
      const taskId = wt.branch.slice(PREFIX.length);
      if (!branches.includes(wt.branch)) {
        plan.push({
          taskId,
          repo,
          path: wt.path,
          branch: `dsh/${taskId}`,
          action: "keep",
          reason: `its branch dsh/${taskId} was deleted while the worktree was on it: commits made there may be unreachable; inspect it, then \`git worktree remove\` it by hand`,
        });
        continue;
      }
      plan.push(await judge(repo, taskId, wt.path, byId, opts.capBytes));
    }
    for (const ref of branches) {
      if (!seen.has(ref)) plan.push(await judge(repo, ref.slice(PREFIX.length), null, byId, opts.capBytes));
    }
  }
  for (const item of plan)
    if (item.action === "remove" && item.path !== null) await noteIgnored(item, byId.get(item.taskId)?.included);
  if (opts.yes === true) {
    for (const item of plan) {
      if (item.action === "remove" && item.ignored && !announcedAll(item.ignored, opts.announced?.[item.path!])) {
        item.action = "keep";
        item.reason = `${item.ignored.count} ignored file(s) (${item.ignored.first.join(", ")}${item.ignored.count > item.ignored.first.length ? ", ..." : ""}) would be deleted that no dry run named; run \`dsh-herdr gc\` to see them, then \`gc --yes\``;
      }
    }
    for (const item of plan) if (item.action === "remove") await removeItem(item, byId.get(item.taskId)?.included);
    for (const repo of repos) await withWorktreeLock(repo, () => gitMaybe(repo, ["worktree", "prune"]));
  }
  return plan;
}

async function judge(
  repo: string,
  taskId: string,
  path: string | null,
  byId: Map<string, GcTask>,
  capBytes?: number,
): Promise<GcPlanItem> {
  const branch = `dsh/${taskId}`;
  const item = (action: "remove" | "keep", reason: string): GcPlanItem => ({
    taskId,
    repo,
    path,
    branch,
    action,
    reason,
  });
  const task = isValidTaskId(taskId) ? byId.get(taskId) : undefined;
  if (task === undefined)
    return item("keep", "no task record for this branch; not removed (delete it by hand if it is yours)");
  const landed = await judgeLanded(repo, path, branch, task);
  if (landed !== undefined)
    return { ...item(landed.action, landed.reason), ...(landed.archiveRef ? { archiveRef: landed.archiveRef } : {}) };
  if (task.open)
    return item(
      "keep",
      `the task is still open (\`dsh-herdr list\` shows it); close it first (dsh-herdr done ${taskId})`,
    );
  const base = task.worktree?.base ?? "HEAD";
  const merged = await gitSucceeds(repo, ["merge-base", "--is-ancestor", branch, base]);
  const judged = await judgeWork(repo, taskId, path, branch, base, merged, task, capBytes);
  if (judged.action === "remove" && !merged) {
    // Captured in the saved patch, but the commits themselves must not become unreachable.
    judged.archiveRef = `${ARCHIVE_PREFIX}${taskId}`;
    judged.reason += `; its commits not in ${base} are kept at ${judged.archiveRef}`;
  }
  return judged;
}

/**
 * A landed task: removable when its base branch holds the landed commit, the branch is still at what was landed and
 * the worktree has nothing since. Undefined when the task never landed (the other rules decide).
 */
async function judgeLanded(
  repo: string,
  path: string | null,
  branch: string,
  task: GcTask,
): Promise<{ action: "remove" | "keep"; reason: string; archiveRef?: string } | undefined> {
  const l = task.landing;
  if (l?.landedAs === undefined) return undefined;
  const short = l.landedAs.slice(0, 12);
  // Open, landed or not: its child may still work there (a follow-up, a steer); the open-task rule keeps it.
  if (task.open) return undefined;
  const base = `refs/heads/${l.baseBranch}`;
  if (!(await gitSucceeds(repo, ["merge-base", "--is-ancestor", l.landedAs, base])))
    return { action: "keep", reason: `landed as ${short}, which ${l.baseBranch} no longer holds; inspect it` };
  const tip = (await gitMaybe(repo, ["rev-parse", "--verify", "-q", `refs/heads/${branch}`]))?.trim();
  if (l.workHead !== undefined && tip !== l.workHead)
    return {
      action: "keep",
      reason: `${branch} has commits made after it landed as ${short}; land it again or inspect it`,
    };
  if (path !== null && (await stat(path).catch(() => undefined)) !== undefined) {
    const dirty = await dirtyBeyondIncluded(path, repo, task.included);
    if (dirty)
      return {
        action: "keep",
        reason: `the worktree has changes made after it landed as ${short}; land it again or inspect it`,
      };
  }
  const merged = tip !== undefined && (await gitSucceeds(repo, ["merge-base", "--is-ancestor", tip, base]));
  const reason = `landed as ${short} in ${l.baseBranch}`;
  // Squashed or rebased: the content is in the base, the branch's own commits are kept at the archive ref.
  return merged
    ? { action: "remove", reason }
    : {
        action: "remove",
        reason: `${reason}; its own commits are kept at ${ARCHIVE_PREFIX}${task.taskId}`,
        archiveRef: `${ARCHIVE_PREFIX}${task.taskId}`,
      };
}

async function judgeWork(
  repo: string,
  taskId: string,
  path: string | null,
  branch: string,
  base: string,
  merged: boolean,
  task: GcTask,
  capBytes?: number,
): Promise<GcPlanItem> {
  const item = (action: "remove" | "keep", reason: string): GcPlanItem => ({
    taskId,
    repo,
    path,
    branch,
    action,
    reason,
  });
  if (path === null || (await stat(path).catch(() => undefined)) === undefined) {
    // Without a worktree only a merge proves the branch's commits are kept elsewhere.
    return merged
      ? item("remove", `branch merged into ${base}`)
      : item("keep", `branch has commits not merged into ${base}, and no worktree to compare with the saved patch`);
  }
  const dirty = await dirtyBeyondIncluded(path, repo, task.included);
  if (merged && !dirty) return item("remove", `branch merged into ${base} and the worktree is clean`);
  if (task.diff === undefined)
    return item("keep", "no diff was harvested for this task; harvest it or inspect the worktree");
  if (task.diff.truncated)
    return item(
      "keep",
      "the saved patch was truncated, so it does not hold all the work; raise patchCapBytes and harvest again",
    );
  const saved = await readFile(task.diff.patchPath).catch(() => undefined);
  if (saved === undefined) return item("keep", `the saved patch ${task.diff.patchPath} is missing; harvest again`);
  const fresh = join(tmpdir(), `dsh-gc-${taskId}-${randomBytes(4).toString("hex")}.patch`);
  try {
    const ev = await harvestDiff({
      cwd: path,
      baselineHead: task.diff.baselineHead,
      patchPath: fresh,
      capBytes: Math.max(capBytes ?? 0, saved.length + 1),
    });
    const now = await readFile(fresh);
    if (!ev.truncated && now.equals(saved))
      return item("remove", "the saved patch equals a fresh harvest: all work is captured");
    return item(
      "keep",
      "the worktree has changes made after the last harvest (fresh diff differs from the saved patch); harvest again or inspect it",
    );
  } catch (e) {
    return item("keep", `could not compare with a fresh harvest: ${(e as Error).message}`);
  } finally {
    await rm(fresh, { force: true });
  }
}

/** git prints real paths; a recorded path may go through a symlink (a home under /tmp on macOS). */
function samePath(recorded: string, listed: string): boolean {
  if (recorded === listed) return true;
  try {
    return realpathSync(recorded) === listed;
  } catch {
    return false;
  }
}

/**
 * Whether `rel` in the worktree is what `--include` put there, unchanged: a copy byte for byte equal to the
 * checkout's file (or the same link), or the link to the checkout's directory. Removing it loses nothing.
 */
async function isIncludedCopy(worktree: string, repo: string, rel: string, included?: Included): Promise<boolean> {
  if (included === undefined) return false;
  const here = join(worktree, rel);
  const there = join(repo, rel);
  try {
    if (included.linked.includes(rel)) {
      const st = await lstat(here);
      return st.isSymbolicLink() && (await readlink(here)) === there;
    }
    if (!included.copied.includes(rel)) return false;
    const [a, b] = await Promise.all([lstat(here), lstat(there)]);
    if (a.isSymbolicLink() || b.isSymbolicLink())
      return a.isSymbolicLink() && b.isSymbolicLink() && (await readlink(here)) === (await readlink(there));
    // Past the bound it is not compared (kept, named as an ignored file): an include names small files.
    if (!a.isFile() || !b.isFile() || a.size !== b.size || a.size > COMPARE_MAX_BYTES) return false;
    const [x, y] = await Promise.all([readFile(here), readFile(there)]);
    return x.equals(y);
  } catch {
    return false;
  }
}

/** `git status` has entries other than untracked included copies equal to their source. */
async function dirtyBeyondIncluded(path: string, repo: string, included?: Included): Promise<boolean> {
  const entries = splitZ(await git(path, ["status", "--porcelain", "-z", "--untracked-files=all"])).filter(
    (e) => e !== "",
  );
  for (const e of entries) {
    if (!e.startsWith("?? ")) return true;
    if (!(await isIncludedCopy(path, repo, e.slice(3), included))) return true;
  }
  return false;
}

/**
 * Gitignored files of a worktree: the removal deletes them and no patch holds them, so the plan names them. An
 * included copy equal to its source is left out: the checkout still has it.
 */
async function listIgnored(path: string, repo?: string, included?: Included): Promise<IgnoredFiles | undefined> {
  const out = await gitMaybe(path, ["ls-files", "-z", "--others", "--ignored", "--exclude-standard"]);
  const listed = splitZ(out ?? "").filter((f) => f !== "" && !f.endsWith("/"));
  const files: string[] = [];
  for (const f of listed) if (repo === undefined || !(await isIncludedCopy(path, repo, f, included))) files.push(f);
  if (files.length === 0) return undefined;
  const all: Record<string, number> = {};
  let bytes = 0;
  for (const f of files) {
    const size = (await lstat(join(path, f)).catch(() => undefined))?.size ?? 0;
    all[f] = size;
    bytes += size;
  }
  return { count: files.length, bytes, first: files.slice(0, SHOWN_IGNORED), all };
}

async function noteIgnored(item: GcPlanItem, included?: Included): Promise<void> {
  const ignored = await listIgnored(item.path!, item.repo, included);
  if (ignored === undefined) return;
  item.ignored = ignored;
  const more = ignored.count > ignored.first.length ? `, +${ignored.count - ignored.first.length} more` : "";
  item.reason += `; also deletes ${ignored.count} ignored file(s), ${formatBytes(ignored.bytes)}: ${ignored.first.join(", ")}${more}`;
}

function announcedAll(ignored: IgnoredFiles, announced: Record<string, number> | undefined): boolean {
  if (announced === undefined) return false;
  return Object.entries(ignored.all).every(([f, size]) => announced[f] === size);
}

function formatBytes(n: number): string {
  return n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

async function removeItem(item: GcPlanItem, included?: Included): Promise<void> {
  try {
    // What was named is what goes: an ignored file that appeared since the plan keeps the worktree.
    if (item.path !== null && (await stat(item.path).catch(() => undefined)) !== undefined) {
      const now = await listIgnored(item.path, item.repo, included);
      if (now !== undefined && !announcedAll(now, item.ignored?.all)) {
        item.done = false;
        item.error = "ignored files appeared since the plan was made; run `dsh-herdr gc` again";
        return;
      }
    }
    // Under the repository's worktree lock: a daemon adding a worktree to it meanwhile would fail its spawn.
    await withWorktreeLock(item.repo, async () => {
      // --force: untracked and modified files are in the saved patch (checked above), so removing them loses nothing.
      if (item.path !== null && (await stat(item.path).catch(() => undefined)) !== undefined) {
        await git(item.repo, ["worktree", "remove", "--force", item.path]);
      }
      await gitMaybe(item.repo, ["worktree", "prune"]);
      if (item.archiveRef) await git(item.repo, ["update-ref", item.archiveRef, `refs/heads/${item.branch}`]);
      await git(item.repo, ["branch", "-D", item.branch]);
    });
    item.done = true;
  } catch (e) {
    item.done = false;
    item.error = (e as Error).message;
  }
}
