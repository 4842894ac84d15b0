// The git a task runner uses (its `git` port): the baseline, the isolated worktree, the diff. The real one is these
// functions of src/git; a test or bench may pass another.
import { captureBaseline } from "../git/baseline.js";
import { harvestDiff } from "../git/diff.js";
import { createWorktree, removeUnusedWorktree } from "../git/worktree.js";

export interface GitPort {
  captureBaseline: typeof captureBaseline;
  createWorktree: typeof createWorktree;
  removeUnusedWorktree: typeof removeUnusedWorktree;
  harvestDiff: typeof harvestDiff;
}

export const realGit: GitPort = { captureBaseline, createWorktree, removeUnusedWorktree, harvestDiff };
