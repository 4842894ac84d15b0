// git() over execFile on real repos: empty output is returned at once (simple-git waited 50 ms after exit for it),
// failures carry git's stderr, a parent git's GIT_DIR cannot redirect it, and the spawn path reuses what the
// baseline learned (one call for the top level, worktree branched from the baseline's HEAD).
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { captureBaseline } from "../../src/git/baseline.js";
import { headCommit, repoRoot, requireRepoRoot } from "../../src/git/repo.js";
import { git as runGit } from "../../src/git/run.js";
import { createWorktree } from "../../src/git/worktree.js";
import { commitAll, git, makeRepo, write } from "../helpers/git.js";

test("git(): empty stdout quickly, stdout verbatim, GIT_FAILED naming the command and git's stderr", async () => {
  const r = makeRepo({ "a.txt": "a\n" });
  try {
    const empty: number[] = [];
    const full: number[] = [];
    for (let i = 0; i < 5; i++) {
      let t0 = performance.now();
      assert.equal(await runGit(r.dir, ["status", "--porcelain"]), "");
      empty.push(performance.now() - t0);
      t0 = performance.now();
      assert.notEqual(await runGit(r.dir, ["rev-parse", "HEAD"]), "");
      full.push(performance.now() - t0);
    }
    // simple-git waited >= 50 ms after every empty answer. Relative to a git call with output in the same loop, so
    // a loaded machine slows both alike.
    assert.ok(
      Math.min(...empty) < Math.min(...full) + 40,
      `fastest empty git status ${Math.min(...empty).toFixed(1)} ms, rev-parse ${Math.min(...full).toFixed(1)} ms`,
    );
    assert.equal((await runGit(r.dir, ["rev-parse", "HEAD"])).trim(), git(r.dir, "rev-parse", "HEAD").trim());
    await assert.rejects(runGit(r.dir, ["rev-parse", "--verify", "no-such-ref"]), (e: Error & { code?: string }) => {
      assert.equal(e.code, "GIT_FAILED");
      assert.match(e.message, /git rev-parse --verify no-such-ref failed in .*: fatal: Needed a single revision/);
      return true;
    });
  } finally {
    r.cleanup();
  }
});

test("repoRoot: the top level from a subdirectory, none inside .git or outside a repo; a leaked GIT_DIR is ignored", async () => {
  const r = makeRepo({ "src/deep/a.txt": "a\n" });
  const other = makeRepo({ "b.txt": "b\n" });
  const saved = process.env.GIT_DIR;
  try {
    assert.equal(await repoRoot(join(r.dir, "src", "deep")), r.dir);
    assert.equal(await repoRoot(join(r.dir, ".git")), undefined);
    assert.equal(await repoRoot(r.base), undefined);
    await assert.rejects(requireRepoRoot(r.base), { code: "NOT_A_REPO" });
    const head = git(r.dir, "rev-parse", "HEAD").trim();
    assert.notEqual(git(other.dir, "rev-parse", "HEAD").trim(), head);
    // As when the daemon is started from a git hook: GIT_DIR points at another repository.
    process.env.GIT_DIR = join(other.dir, ".git");
    assert.equal(await repoRoot(r.dir), r.dir);
    assert.equal(await headCommit(r.dir), head);
  } finally {
    if (saved === undefined) delete process.env.GIT_DIR;
    else process.env.GIT_DIR = saved;
    r.cleanup();
    other.cleanup();
  }
});

test("spawn path: a baseline without status for isolated tasks; the worktree branches from the baseline's HEAD", async () => {
  const r = makeRepo({ "a.txt": "a\n", "sub/b.txt": "b\n" });
  const empty = makeRepo({}, false);
  try {
    write(r.dir, "dirty.txt", "not committed\n");
    const full = await captureBaseline(r.dir);
    assert.deepEqual(full.dirtyAtStart, ["?? dirty.txt"]);
    // From a subdirectory: the same root, HEAD and root-relative dirty paths.
    assert.deepEqual(await captureBaseline(join(r.dir, "sub")), full);
    // Before the first commit: a repo with no HEAD.
    const none = await captureBaseline(empty.dir);
    assert.equal(none.isRepo, true);
    assert.equal(none.baselineHead, null);
    assert.equal(none.repoRoot, empty.dir);
    const lean = await captureBaseline(r.dir, { dirty: false });
    const { dirtyHashes: _hashes, ...fullButHashes } = full;
    assert.deepEqual({ ...lean, dirtyAtStart: [] }, { ...fullButHashes, dirtyAtStart: [] });
    assert.deepEqual(Object.keys(full.dirtyHashes ?? {}), ["dirty.txt"], "a hash per dirty file; none without status");
    assert.equal(lean.dirtyHashes, undefined);
    assert.deepEqual(lean.dirtyAtStart, []);
    // A commit lands after the baseline: the worktree still starts from the baseline's HEAD.
    write(r.dir, "later.txt", "later\n");
    commitAll(r.dir, "after the baseline");
    const home = join(r.base, "home");
    const wt = await createWorktree({
      repoCwd: r.dir,
      home,
      taskId: "tmg3k2a1b010",
      known: { repoRoot: lean.repoRoot!, head: lean.baselineHead },
    });
    assert.equal(git(wt.path, "rev-parse", "HEAD").trim(), lean.baselineHead);
    assert.equal(wt.base, "HEAD");
    await assert.rejects(
      createWorktree({ repoCwd: r.dir, home, taskId: "tmg3k2a1b011", known: { repoRoot: r.dir, head: null } }),
      { code: "GIT_FAILED" },
    );
  } finally {
    r.cleanup();
    empty.cleanup();
  }
});
