// Isolated worktrees and gc on real repositories: gc removes only captured work and says why it keeps the rest.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { captureBaseline } from "../../src/git/baseline.js";
import { harvestDiff } from "../../src/git/diff.js";
import { gc, type GcTask } from "../../src/git/gc.js";
import { locateRepo, requireRepo } from "../../src/git/repo.js";
import { createWorktree } from "../../src/git/worktree.js";
import { commitAll, git, makeRepo, write } from "../helpers/git.js";

const IDS = ["tmg3k2a1b001", "tmg3k2a1b002", "tmg3k2a1b003", "tmg3k2a1b004"] as const;

test("worktree add makes dsh/<taskId> under <home>/worktrees; the diff is computed in the worktree", async () => {
  const r = makeRepo({ "src/a.txt": "a\n" });
  try {
    const home = join(r.base, "home");
    const wt = await createWorktree({ repoCwd: join(r.dir, "src"), home, taskId: IDS[0] });
    assert.deepEqual(wt, {
      path: join(home, "worktrees", `repo-${IDS[0]}`),
      branch: `dsh/${IDS[0]}`,
      repo: r.dir,
      base: "HEAD",
      baseBranch: "main",
      head: git(r.dir, "rev-parse", "HEAD").trim(),
    });
    assert.equal(git(wt.path, "rev-parse", "--abbrev-ref", "HEAD").trim(), `dsh/${IDS[0]}`);
    const b = await captureBaseline(wt.path);
    write(wt.path, "src/a.txt", "a\nin worktree\n");
    write(wt.path, "fresh.txt", "new\n");
    commitAll(wt.path, "child commit");
    write(wt.path, "later.txt", "uncommitted\n");
    const d = await harvestDiff({ cwd: wt.path, baselineHead: b.baselineHead, patchPath: join(r.base, "p.patch") });
    assert.deepEqual([...d.files].sort(), ["fresh.txt", "later.txt", "src/a.txt"]);
    assert.equal(git(r.dir, "status", "--porcelain"), "", "the source checkout is untouched");
    await assert.rejects(createWorktree({ repoCwd: r.dir, home, taskId: "../evil" }), { code: "BAD_TASK_ID" });
    await assert.rejects(createWorktree({ repoCwd: r.dir, home, taskId: IDS[1], base: "no-such-branch" }), {
      code: "BAD_PARAMS",
    });
  } finally {
    r.cleanup();
  }
});

test("gc removes captured worktrees only; keeps open tasks, unknown branches and work after the last harvest", async () => {
  const r = makeRepo({ "a.txt": "a\n" });
  try {
    const home = join(r.base, "home");
    const tasks: GcTask[] = [];
    for (const id of IDS.slice(0, 3)) {
      const wt = await createWorktree({ repoCwd: r.dir, home, taskId: id });
      const b = await captureBaseline(wt.path);
      write(wt.path, "a.txt", `a\n${id}\n`);
      write(wt.path, "untracked.txt", "u\n");
      const patchPath = join(r.base, `${id}.patch`);
      const d = await harvestDiff({ cwd: wt.path, baselineHead: b.baselineHead, patchPath });
      tasks.push({
        taskId: id,
        open: id === IDS[2],
        worktree: wt,
        diff: { baselineHead: d.baselineHead, patchPath, truncated: d.truncated },
      });
    }
    // Task 2: an uncommitted change made after its last harvest.
    write(tasks[1]!.worktree!.path, "a.txt", "a\nchanged after harvest\n");
    // A dsh/* branch with no task record.
    git(r.dir, "branch", `dsh/${IDS[3]}`);

    const plan = await gc({ tasks });
    const by = (id: string) => plan.find((p) => p.taskId === id)!;
    assert.equal(by(IDS[0]).action, "remove");
    assert.match(by(IDS[0]).reason, /equals a fresh harvest/);
    assert.equal(by(IDS[1]).action, "keep");
    assert.match(by(IDS[1]).reason, /after the last harvest/);
    assert.equal(by(IDS[2]).action, "keep");
    assert.match(by(IDS[2]).reason, /still open/);
    assert.equal(by(IDS[3]).action, "keep");
    assert.match(by(IDS[3]).reason, /no task record/);
    assert.ok(existsSync(tasks[0]!.worktree!.path), "dry-run removes nothing");

    const done = await gc({ tasks, yes: true });
    assert.equal(done.find((p) => p.taskId === IDS[0])!.done, true);
    assert.ok(!existsSync(tasks[0]!.worktree!.path));
    const branches = git(r.dir, "branch", "--list", "dsh/*");
    assert.doesNotMatch(branches, new RegExp(IDS[0]));
    for (const id of IDS.slice(1)) assert.match(branches, new RegExp(id));
    assert.equal(readFileSync(join(tasks[1]!.worktree!.path, "a.txt"), "utf8"), "a\nchanged after harvest\n");
    assert.ok(existsSync(tasks[2]!.worktree!.path));
  } finally {
    r.cleanup();
  }
});

test("gc removes a merged branch with a clean worktree, and keeps an unmerged branch whose worktree is gone", async () => {
  const r = makeRepo({ "a.txt": "a\n" });
  try {
    const home = join(r.base, "home");
    const merged = await createWorktree({ repoCwd: r.dir, home, taskId: IDS[0] });
    write(merged.path, "m.txt", "merged work\n");
    commitAll(merged.path, "merged work");
    git(r.dir, "merge", "-q", "--ff-only", merged.branch);
    const lost = await createWorktree({ repoCwd: r.dir, home, taskId: IDS[1] });
    write(lost.path, "l.txt", "unmerged\n");
    commitAll(lost.path, "unmerged work");
    git(r.dir, "worktree", "remove", "--force", lost.path);
    const plan = await gc({
      tasks: [
        { taskId: IDS[0], open: false, worktree: merged },
        { taskId: IDS[1], open: false, worktree: lost },
      ],
      yes: true,
    });
    const m = plan.find((p) => p.taskId === IDS[0])!;
    assert.equal(m.action, "remove");
    assert.match(m.reason, /merged/);
    const l = plan.find((p) => p.taskId === IDS[1])!;
    assert.equal(l.action, "keep");
    assert.match(l.reason, /not merged/);
    assert.match(git(r.dir, "branch", "--list", "dsh/*"), new RegExp(IDS[1]));
    assert.doesNotMatch(git(r.dir, "branch", "--list", "dsh/*"), new RegExp(IDS[0]));
  } finally {
    r.cleanup();
  }
});

test("the spawn's git-free path: locateRepo finds the work tree as git does, and the worktree's branch gives the baseline HEAD", async () => {
  const r = makeRepo({ "src/a.txt": "a\n" });
  const empty = makeRepo({}, false);
  try {
    const home = join(r.base, "home");
    assert.deepEqual(await locateRepo(join(r.dir, "src")), { root: r.dir });
    assert.equal(await locateRepo(join(r.dir, ".git")), undefined, "inside the git dir is not a work tree");
    assert.equal(await locateRepo(r.base), undefined);
    await assert.rejects(requireRepo(r.base), { code: "NOT_A_REPO" });
    write(r.dir, "b.txt", "b\n");
    commitAll(r.dir, "second"); // HEAD moves after the request's check: the worktree branches from HEAD as it is now
    const wt = await createWorktree({ repoCwd: r.dir, home, taskId: IDS[2], known: { repoRoot: r.dir } });
    assert.equal(wt.head, git(r.dir, "rev-parse", "HEAD").trim());
    assert.equal(git(wt.path, "rev-parse", "HEAD").trim(), wt.head);
    const linked = await locateRepo(wt.path);
    assert.deepEqual(linked, { root: wt.path }, "a linked worktree (.git is a file) is a work tree too");
    await assert.rejects(
      createWorktree({ repoCwd: empty.dir, home, taskId: IDS[3], known: { repoRoot: empty.dir } }),
      (e: Error & { code?: string }) => e.code === "GIT_FAILED" && /no commits yet/.test(e.message),
    );
  } finally {
    r.cleanup();
    empty.cleanup();
  }
});
