// The daemon's one door to git. GitPort is what a task runner is handed (its `git` port: the baseline, the isolated
// worktree, the diff); the real one is these functions of src/git, and a test or bench may pass another. The rest
// of what the daemon asks of git (repository facts, land and its intent, landability, the worktree setup, the
// launcher) is named below, so no other daemon module imports src/git (test/unit/daemon-git-seam.test.ts).
import { captureBaseline } from "../../git/baseline.js";
import { harvestDiff } from "../../git/diff.js";
import { createWorktree, removeUnusedWorktree } from "../../git/worktree.js";

export interface GitPort {
  captureBaseline: typeof captureBaseline;
  createWorktree: typeof createWorktree;
  removeUnusedWorktree: typeof removeUnusedWorktree;
  harvestDiff: typeof harvestDiff;
}

export const realGit: GitPort = { captureBaseline, createWorktree, removeUnusedWorktree, harvestDiff };

export { useGitLauncher } from "../../git/launcher.js";
export { gitEnv, gitMaybe } from "../../git/run.js";
export { repoFacts, requireRepo } from "../../git/repo.js";
export { branchFor, type CreatedWorktree, worktreePathFor } from "../../git/worktree.js";
export { checkIncludePattern, commitSetup, type Included, includeInto } from "../../git/worktree-setup.js";
export {
  dryLand,
  type LandIntent,
  type LandOutcome,
  type LandStrategy,
  landTask,
  resolveIntent,
} from "../../git/land.js";
export { CHECK_PGIDS, sweepLandScratch } from "../../git/land-scratch.js";
export { childIdentity, landabilityOf, mergeTree, snapshotWork, workWithoutSetup } from "../../git/landability.js";
