// gc: remove the worktrees and dsh/* branches of closed tasks, but only when their work is captured: the saved
// patch is complete and equals a fresh harvest, or the branch is merged into its base with a clean worktree.
// Dry-run by default; every kept item says why.
import { randomBytes } from "node:crypto";
import { readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isValidTaskId } from "../core/ids.js";
import type { WorktreeInfo } from "../core/types.js";
import { harvestDiff } from "./diff.js";
import { git, gitMaybe, gitSucceeds } from "./run.js";
import { listWorktrees } from "./worktree.js";

export interface GcTask {
  taskId: string;
  /** Open tasks (anything not closed/finished) are never touched. */
  open: boolean;
  worktree?: WorktreeInfo;
  /** From the last harvest. */
  diff?: { baselineHead: string | null; patchPath: string; truncated: boolean };
}

export interface GcPlanItem {
  taskId: string;
  repo: string;
  path: string | null;
  branch: string;
  action: "remove" | "keep";
  reason: string;
  /** With yes:true: whether the removal happened (or the error). */
  done?: boolean;
  error?: string;
}

export interface GcOptions {
  tasks: GcTask[];
  /** Act; without it the plan is only computed. */
  yes?: boolean;
  capBytes?: number;
}

const PREFIX = "refs/heads/dsh/";

export async function gc(opts: GcOptions): Promise<GcPlanItem[]> {
  const byId = new Map(opts.tasks.map((t) => [t.taskId, t]));
  const repos = [...new Set(opts.tasks.flatMap((t) => (t.worktree ? [t.worktree.repo] : [])))];
  const plan: GcPlanItem[] = [];
  for (const repo of repos) {
    if ((await stat(repo).catch(() => undefined)) === undefined) continue;
    const worktrees = await listWorktrees(repo);
    const branches = (await git(repo, ["for-each-ref", "--format=%(refname)", PREFIX])).split("\n").filter((b) => b !== "");
    const seen = new Set<string>();
    for (const wt of worktrees) {
      if (wt.branch === undefined || !wt.branch.startsWith(PREFIX)) continue;
      seen.add(wt.branch);
      plan.push(await judge(repo, wt.branch.slice(PREFIX.length), wt.path, byId, opts.capBytes));
    }
    for (const ref of branches) {
      if (!seen.has(ref)) plan.push(await judge(repo, ref.slice(PREFIX.length), null, byId, opts.capBytes));
    }
  }
  if (opts.yes === true) {
    for (const item of plan) if (item.action === "remove") await removeItem(item);
    for (const repo of repos) await gitMaybe(repo, ["worktree", "prune"]);
  }
  return plan;
}

async function judge(repo: string, taskId: string, path: string | null, byId: Map<string, GcTask>, capBytes?: number): Promise<GcPlanItem> {
  const branch = `dsh/${taskId}`;
  const item = (action: "remove" | "keep", reason: string): GcPlanItem => ({ taskId, repo, path, branch, action, reason });
  const task = isValidTaskId(taskId) ? byId.get(taskId) : undefined;
  if (task === undefined) return item("keep", "no task record for this branch; not removed (delete it by hand if it is yours)");
  if (task.open) return item("keep", "the task is still open; close it first (dsh-herdr done)");
  const base = task.worktree?.base ?? "HEAD";
  const merged = await gitSucceeds(repo, ["merge-base", "--is-ancestor", branch, base]);
  if (path === null || (await stat(path).catch(() => undefined)) === undefined) {
    // Without a worktree only a merge proves the branch's commits are kept elsewhere.
    return merged ? item("remove", `branch merged into ${base}`) : item("keep", `branch has commits not merged into ${base}, and no worktree to compare with the saved patch`);
  }
  const dirty = (await git(path, ["status", "--porcelain", "-z", "--untracked-files=all"])) !== "";
  if (merged && !dirty) return item("remove", `branch merged into ${base} and the worktree is clean`);
  if (task.diff === undefined) return item("keep", "no diff was harvested for this task; harvest it or inspect the worktree");
  if (task.diff.truncated) return item("keep", "the saved patch was truncated, so it does not hold all the work; raise patchCapBytes and harvest again");
  const saved = await readFile(task.diff.patchPath).catch(() => undefined);
  if (saved === undefined) return item("keep", `the saved patch ${task.diff.patchPath} is missing; harvest again`);
  const fresh = join(tmpdir(), `dsh-gc-${taskId}-${randomBytes(4).toString("hex")}.patch`);
  try {
    const ev = await harvestDiff({ cwd: path, baselineHead: task.diff.baselineHead, patchPath: fresh, capBytes: Math.max(capBytes ?? 0, saved.length + 1) });
    const now = await readFile(fresh);
    if (!ev.truncated && now.equals(saved)) return item("remove", "the saved patch equals a fresh harvest: all work is captured");
    return item("keep", "the worktree has changes made after the last harvest (fresh diff differs from the saved patch); harvest again or inspect it");
  } catch (e) {
    return item("keep", `could not compare with a fresh harvest: ${(e as Error).message}`);
  } finally {
    await rm(fresh, { force: true });
  }
}

async function removeItem(item: GcPlanItem): Promise<void> {
  try {
    // --force: untracked and modified files are in the saved patch (checked above), so removing them loses nothing.
    if (item.path !== null && (await stat(item.path).catch(() => undefined)) !== undefined) {
      await git(item.repo, ["worktree", "remove", "--force", item.path]);
    }
    await gitMaybe(item.repo, ["worktree", "prune"]);
    await git(item.repo, ["branch", "-D", item.branch]);
    item.done = true;
  } catch (e) {
    item.done = false;
    item.error = (e as Error).message;
  }
}
