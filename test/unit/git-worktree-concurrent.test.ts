// Isolated worktrees created at once in one real repository: git's `worktree add` fails when another add in the same
// repo is half done ("failed to read .git/worktrees/<name>/commondir"; CI failed a spawn on it), so createWorktree
// runs one repo's adds one after another. Ten spawns' worth at once, three rounds: every add succeeds.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { realpathSync } from "node:fs";
import { join } from "node:path";
import { newTaskId } from "../../src/core/ids.js";
import { createWorktree } from "../../src/git/worktree.js";
import { git, makeRepo } from "../helpers/git.js";

test("thirty worktrees of one repo, ten at a time: all created, each on its own branch at HEAD", async () => {
  const repo = makeRepo();
  try {
    const home = join(repo.base, "home");
    const root = realpathSync(repo.dir);
    const head = git(repo.dir, "rev-parse", "HEAD").trim();
    const made: string[] = [];
    for (let round = 0; round < 3; round++) {
      const ids = Array.from({ length: 10 }, () => newTaskId(Date.now(), randomBytes(3)));
      const results = await Promise.allSettled(
        ids.map((taskId) => createWorktree({ repoCwd: repo.dir, home, taskId, known: { repoRoot: root } })),
      );
      const failed = results.flatMap((r) => (r.status === "rejected" ? [String(r.reason)] : []));
      assert.deepEqual(failed, [], `round ${round}: adds failed`);
      for (const r of results) {
        const wt = (r as PromiseFulfilledResult<Awaited<ReturnType<typeof createWorktree>>>).value;
        assert.equal(wt.head, head);
        assert.equal(git(wt.path, "rev-parse", "HEAD").trim(), head);
        made.push(wt.path);
      }
    }
    const listed = git(repo.dir, "worktree", "list", "--porcelain").match(/^worktree /gm)?.length;
    assert.equal(listed, 1 + made.length);
  } finally {
    repo.cleanup();
  }
});
