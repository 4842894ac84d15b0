// Landability and land on real repositories: merge-tree of the task's work (uncommitted changes included) against
// the base tip, and land's strategies and refusals, each refusal leaving the checkout and the task as they were.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { DshError } from "../../src/core/errors.js";
import { gc } from "../../src/git/gc.js";
import { dryLand, landTask } from "../../src/git/land.js";
import { childIdentity, landabilityOf } from "../../src/git/landability.js";
import { createWorktree, type CreatedWorktree } from "../../src/git/worktree.js";
import { commitAll, git, makeRepo, write, type TempRepo } from "../helpers/git.js";

const ID = "tmg3k2a1c001";
const author = childIdentity("worker-flash-c001", ID);

async function setup(files: Record<string, string> = { "a.txt": "a\n", "b.txt": "b\n" }): Promise<{
  r: TempRepo;
  wt: CreatedWorktree;
}> {
  const r = makeRepo(files);
  const wt = await createWorktree({ repoCwd: r.dir, home: join(r.base, "home"), taskId: ID });
  return { r, wt };
}

/** Everything a refusal must leave alone: the checkout's HEAD, index and status; the task branch, index, status. */
function state(r: TempRepo, wt: CreatedWorktree): string[] {
  return [
    git(r.dir, "rev-parse", "HEAD"),
    git(r.dir, "status", "--porcelain=v1", "--untracked-files=all"),
    git(r.dir, "ls-files", "-s"),
    git(wt.path, "rev-parse", "HEAD"),
    git(wt.path, "status", "--porcelain=v1", "--untracked-files=all"),
    git(wt.path, "ls-files", "-s"),
  ];
}

test("landability: the branch plus uncommitted changes against the moved base; the task's index is untouched", async () => {
  const { r, wt } = await setup();
  try {
    write(wt.path, "a.txt", "a\nfrom the child\n"); // uncommitted
    write(wt.path, "new.txt", "new\n"); // untracked
    git(wt.path, "add", "new.txt"); // staged: the snapshot must keep the child's staging as it is
    const before = state(r, wt);
    const clean = await landabilityOf({ worktree: wt, author, now: 5 });
    assert.deepEqual(clean, {
      baseBranch: "main",
      baseHead: git(r.dir, "rev-parse", "HEAD").trim(),
      clean: true,
      conflicts: [],
      checkedAt: 5,
    });
    // The base moves: one change elsewhere (still clean), then one on the child's line (a conflict).
    write(r.dir, "b.txt", "b\nbase\n");
    commitAll(r.dir, "base: b");
    assert.equal((await landabilityOf({ worktree: wt, author })).clean, true);
    write(r.dir, "a.txt", "a\nfrom the base\n");
    const tip = commitAll(r.dir, "base: a");
    const conflicted = await landabilityOf({ worktree: wt, author });
    assert.equal(conflicted.clean, false);
    assert.equal(conflicted.baseHead, tip);
    assert.deepEqual(conflicted.conflicts, ["a.txt"]);
    const after = state(r, wt);
    assert.deepEqual(after.slice(3), before.slice(3), "the task's HEAD, index and status are as they were");
  } finally {
    r.cleanup();
  }
});

test("land fast-forwards when the base has not moved: the child's uncommitted work is committed by the child", async () => {
  const { r, wt } = await setup();
  try {
    write(wt.path, "a.txt", "a\nchild\n");
    write(wt.path, "fresh.txt", "fresh\n");
    const out = await landTask({ taskId: ID, worktree: wt, author, message: "add fresh.txt", now: 7 });
    assert.equal(out.already, false);
    assert.equal(out.landing.strategy, "fast-forward");
    assert.match(out.said, /fast-forward/);
    assert.ok(out.committed);
    assert.equal(out.landing.landedAs, out.committed);
    assert.equal(git(r.dir, "rev-parse", "HEAD").trim(), out.committed);
    assert.equal(readFileSync(join(r.dir, "fresh.txt"), "utf8"), "fresh\n", "the checkout's files moved too");
    assert.equal(git(r.dir, "status", "--porcelain"), "");
    assert.equal(
      git(r.dir, "log", "-1", "--format=%an <%ae>|%cn|%s").trim(),
      `${author.name} <${author.email}>|${author.name}|add fresh.txt`,
    );
    assert.equal(git(wt.path, "rev-parse", "HEAD").trim(), out.committed, "the task branch holds the commit");
    assert.equal(git(wt.path, "status", "--porcelain", "--untracked-files=all"), "", "and its worktree reads clean");
    // Repeat: says so, changes nothing.
    const again = await landTask({ taskId: ID, worktree: wt, author, message: "x", previous: out.landing });
    assert.equal(again.already, true);
    assert.match(again.said, /already landed/);
    assert.equal(git(r.dir, "rev-parse", "HEAD").trim(), out.committed);
  } finally {
    r.cleanup();
  }
});

test("land makes a merge commit when the base moved; gc then removes the landed task's worktree and branch", async () => {
  const { r, wt } = await setup();
  try {
    write(wt.path, "a.txt", "a\nchild\n");
    commitAll(wt.path, "child: a");
    write(wt.path, "c.txt", "c\n"); // and one uncommitted file
    write(r.dir, "b.txt", "b\nbase\n");
    const moved = commitAll(r.dir, "base: b");
    const out = await landTask({ taskId: ID, worktree: wt, author, message: "child work" });
    assert.equal(out.landing.strategy, "merge");
    assert.match(out.said, /moved/);
    const parents = git(r.dir, "log", "-1", "--format=%P").trim().split(" ");
    assert.deepEqual(parents, [moved, out.committed]);
    assert.equal(git(r.dir, "rev-parse", "HEAD").trim(), out.landing.landedAs);
    for (const [f, c] of [
      ["a.txt", "a\nchild\n"],
      ["b.txt", "b\nbase\n"],
      ["c.txt", "c\n"],
    ])
      assert.equal(readFileSync(join(r.dir, f!), "utf8"), c);
    const plan = await gc({
      tasks: [{ taskId: ID, open: false, worktree: wt, landing: out.landing }],
      yes: true,
    });
    assert.equal(plan[0]?.action, "remove", plan[0]?.reason);
    assert.equal(plan[0]?.done, true, plan[0]?.error);
    assert.ok(!existsSync(wt.path));
    assert.equal(git(r.dir, "branch", "--list", `dsh/${ID}`), "");
  } finally {
    r.cleanup();
  }
});

test("--squash and --rebase land one commit / the replayed commits; gc accepts a squash-landed task", async () => {
  for (const strategy of ["squash", "rebase"] as const) {
    const { r, wt } = await setup();
    try {
      write(wt.path, "a.txt", "a\none\n");
      commitAll(wt.path, "child: one");
      write(wt.path, "a.txt", "a\none\ntwo\n");
      commitAll(wt.path, "child: two");
      write(r.dir, "b.txt", "b\nbase\n");
      const moved = commitAll(r.dir, "base: b");
      const out = await landTask({ taskId: ID, worktree: wt, author, message: "the child's work", strategy });
      assert.equal(out.landing.strategy, strategy);
      const log = git(r.dir, "log", "--format=%s", `${moved}..HEAD`).trim().split("\n");
      assert.deepEqual(log, strategy === "squash" ? ["the child's work"] : ["child: two", "child: one"]);
      assert.equal(
        git(r.dir, "log", "-1", "--format=%P").trim(),
        strategy === "squash" ? moved : git(r.dir, "rev-parse", "HEAD~1").trim(),
      );
      assert.equal(readFileSync(join(r.dir, "a.txt"), "utf8"), "a\none\ntwo\n");
      if (strategy === "squash") {
        const plan = await gc({ tasks: [{ taskId: ID, open: false, worktree: wt, landing: out.landing }] });
        assert.equal(plan[0]?.action, "remove", plan[0]?.reason);
        assert.match(plan[0]!.reason, /landed as/);
      }
    } finally {
      r.cleanup();
    }
  }
});

test("land refuses, changing nothing: a conflict (paths named), a dirty checkout (files named), another branch", async () => {
  const { r, wt } = await setup();
  try {
    write(wt.path, "a.txt", "a\nchild\n");
    write(r.dir, "a.txt", "a\nbase\n");
    commitAll(r.dir, "base: a");
    let before = state(r, wt);
    await assert.rejects(landTask({ taskId: ID, worktree: wt, author, message: "m" }), (e: DshError) => {
      assert.equal(e.code, "LAND_CONFLICT");
      assert.match(e.message, /a\.txt/);
      return true;
    });
    assert.deepEqual(state(r, wt), before);

    // A clean change, but the user's checkout has uncommitted tracked changes.
    write(wt.path, "a.txt", "a\n");
    write(wt.path, "z.txt", "z\n");
    write(r.dir, "b.txt", "b\nuser's unsaved edit\n");
    before = state(r, wt);
    await assert.rejects(landTask({ taskId: ID, worktree: wt, author, message: "m" }), (e: DshError) => {
      assert.equal(e.code, "CHECKOUT_DIRTY");
      assert.match(e.message, /b\.txt/);
      return true;
    });
    assert.deepEqual(state(r, wt), before);
    git(r.dir, "checkout", "-q", "--", "b.txt");

    // An untracked file of the user's in the way of the child's new file: refused by name, nothing changes.
    write(r.dir, "z.txt", "the user's own z\n");
    before = state(r, wt);
    await assert.rejects(landTask({ taskId: ID, worktree: wt, author, message: "m" }), { code: "CHECKOUT_IN_THE_WAY" });
    assert.deepEqual(state(r, wt), before);
    assert.equal(readFileSync(join(r.dir, "z.txt"), "utf8"), "the user's own z\n");
    git(r.dir, "clean", "-fq");

    git(r.dir, "switch", "-q", "-c", "other");
    before = state(r, wt);
    await assert.rejects(landTask({ taskId: ID, worktree: wt, author, message: "m" }), (e: DshError) => {
      assert.equal(e.code, "CHECKOUT_ELSEWHERE");
      assert.match(e.message, /on other, not on main/);
      return true;
    });
    assert.deepEqual(state(r, wt), before);
  } finally {
    r.cleanup();
  }
});

test("land --dry-run refuses the checkout as land does (dirty, another branch) instead of saying it lands cleanly", async () => {
  const { r, wt } = await setup();
  try {
    write(wt.path, "z.txt", "z\n");
    const clean = await dryLand({ taskId: ID, worktree: wt, author });
    assert.equal(clean.clean, true);

    write(r.dir, "b.txt", "b\nuser's unsaved edit\n");
    let before = state(r, wt);
    for (const run of [
      () => dryLand({ taskId: ID, worktree: wt, author }),
      () => landTask({ taskId: ID, worktree: wt, author, message: "m" }),
    ])
      await assert.rejects(run(), (e: DshError) => {
        assert.equal(e.code, "CHECKOUT_DIRTY");
        assert.match(e.message, /b\.txt/);
        return true;
      });
    assert.deepEqual(state(r, wt), before);
    git(r.dir, "checkout", "-q", "--", "b.txt");

    git(r.dir, "switch", "-q", "-c", "other");
    before = state(r, wt);
    for (const run of [
      () => dryLand({ taskId: ID, worktree: wt, author }),
      () => landTask({ taskId: ID, worktree: wt, author, message: "m" }),
    ])
      await assert.rejects(run(), { code: "CHECKOUT_ELSEWHERE" });
    assert.deepEqual(state(r, wt), before);
  } finally {
    r.cleanup();
  }
});

test("land --check runs the check on the merged tree and a failure refuses, changing nothing", async () => {
  const { r, wt } = await setup();
  try {
    write(wt.path, "a.txt", "a\nchild\n");
    write(r.dir, "b.txt", "b\nbase\n");
    commitAll(r.dir, "base: b");
    const before = state(r, wt);
    const seen: string[] = [];
    await assert.rejects(
      landTask({
        taskId: ID,
        worktree: wt,
        author,
        message: "m",
        check: async (dir) => {
          // The merged tree: the child's a.txt and the base's b.txt together.
          seen.push(readFileSync(join(dir, "a.txt"), "utf8"), readFileSync(join(dir, "b.txt"), "utf8"));
          throw new DshError("CHECK_FAILED", "check `npm test` failed (exit 1)");
        },
      }),
      { code: "CHECK_FAILED" },
    );
    assert.deepEqual(seen, ["a\nchild\n", "b\nbase\n"]);
    assert.deepEqual(state(r, wt), before);
    assert.equal(
      git(r.dir, "worktree", "list", "--porcelain").match(/^worktree /gm)?.length,
      2,
      "no scratch tree left",
    );
  } finally {
    r.cleanup();
  }
});
