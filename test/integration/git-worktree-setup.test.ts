// Worktree setup on real repositories: --include patterns (.gitignore lines) matched by git, files copied and
// directories linked into a new worktree; what setup changed committed as the task's baseline; and landing (and
// landability) that carry the child's work without setup's changes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, lstatSync, mkdirSync, readFileSync, readlinkSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { DshError } from "../../src/core/errors.js";
import { landTask } from "../../src/git/land.js";
import { childIdentity, landabilityOf } from "../../src/git/landability.js";
import { createWorktree, type CreatedWorktree } from "../../src/git/worktree.js";
import { checkIncludePattern, commitSetup, includeInto, matchInclude } from "../../src/git/worktree-setup.js";
import { git, makeRepo, write, type TempRepo } from "../helpers/git.js";

const ID = "tmg3k2a1s001";
const author = childIdentity("worker-flash-s001", ID);

async function repoWithIgnored(): Promise<{ r: TempRepo; wt: CreatedWorktree }> {
  const r = makeRepo({
    ".gitignore": ".env\nnode_modules/\n*.local.json\n",
    "README.md": "# demo\nline two\nline three\n",
    "config/app.json": "{}\n",
  });
  write(r.dir, ".env", "SECRET=1\n");
  chmodSync(join(r.dir, ".env"), 0o600);
  write(r.dir, "node_modules/dep/index.js", "module.exports = 1;\n");
  write(r.dir, "config/db.local.json", '{"db":"local"}\n');
  write(r.dir, "sub/node_modules/x.js", "x\n");
  write(r.dir, "notes.txt", "untracked, not ignored\n");
  const wt = await createWorktree({ repoCwd: r.dir, home: join(r.base, "home"), taskId: ID });
  return { r, wt };
}

test("include patterns: git matches them as .gitignore lines; a matched directory is one entry, its parents are not", async () => {
  const { r } = await repoWithIgnored();
  try {
    assert.deepEqual(await matchInclude(r.dir, ".env"), [".env"]);
    assert.deepEqual(await matchInclude(r.dir, "/node_modules/"), ["node_modules/"]);
    assert.deepEqual((await matchInclude(r.dir, "node_modules/")).sort(), ["node_modules/", "sub/node_modules/"]);
    assert.deepEqual(await matchInclude(r.dir, "*.local.json"), ["config/db.local.json"]);
    assert.deepEqual(await matchInclude(r.dir, "notes.txt"), ["notes.txt"], "untracked and not ignored counts");
    assert.deepEqual(await matchInclude(r.dir, "README.md"), [], "a tracked file is in the worktree already");
    assert.equal(checkIncludePattern("# comment") !== undefined, true);
    assert.equal(checkIncludePattern("a\nb") !== undefined, true);
    assert.equal(checkIncludePattern(".env"), undefined);
  } finally {
    r.cleanup();
  }
});

test("includeInto: files are copied (mode kept), directories linked to the checkout's, unmatched patterns named", async () => {
  const { r, wt } = await repoWithIgnored();
  try {
    const inc = await includeInto(r.dir, wt.path, [".env", "/node_modules/", "*.local.json", "nothing-*.txt"]);
    assert.deepEqual(inc, {
      copied: [".env", "config/db.local.json"],
      linked: ["node_modules"],
      unmatched: ["nothing-*.txt"],
    });
    const env = lstatSync(join(wt.path, ".env"));
    assert.ok(env.isFile(), "a copy, not a link: the child may edit its own .env");
    assert.equal(env.mode & 0o777, 0o600);
    assert.equal(readFileSync(join(wt.path, ".env"), "utf8"), "SECRET=1\n");
    assert.ok(lstatSync(join(wt.path, "node_modules")).isSymbolicLink());
    assert.equal(readlinkSync(join(wt.path, "node_modules")), join(r.dir, "node_modules"));
    assert.equal(readFileSync(join(wt.path, "node_modules/dep/index.js"), "utf8"), "module.exports = 1;\n");
    assert.equal(readFileSync(join(wt.path, "config/db.local.json"), "utf8"), '{"db":"local"}\n');
    // The checkout's files are the checkout's: a copy written in the worktree leaves them alone.
    writeFileSync(join(wt.path, ".env"), "CHANGED=1\n");
    assert.equal(readFileSync(join(r.dir, ".env"), "utf8"), "SECRET=1\n");
    // A second include of the same never writes over what is there.
    const again = await includeInto(r.dir, wt.path, [".env"]);
    assert.deepEqual(again.copied, []);
    assert.equal(readFileSync(join(wt.path, ".env"), "utf8"), "CHANGED=1\n");
  } finally {
    r.cleanup();
  }
});

test("an include that names more than the bound is refused by name", async () => {
  const { r, wt } = await repoWithIgnored();
  try {
    mkdirSync(join(r.dir, "many"));
    for (let i = 0; i < 1001; i++) writeFileSync(join(r.dir, "many", `f${i}.tmp`), "");
    await assert.rejects(
      () => includeInto(r.dir, wt.path, ["*.tmp"]),
      (e: DshError) => e.code === "BAD_PARAMS" && /1001 entries/.test(e.message),
    );
  } finally {
    r.cleanup();
  }
});

test("commitSetup: what setup changed that git sees becomes the baseline commit; ignored output and a clean run make none", async () => {
  const { r, wt } = await repoWithIgnored();
  try {
    // Only ignored files: nothing git sees, no commit.
    await includeInto(r.dir, wt.path, [".env", "*.local.json"]);
    assert.equal(await commitSetup(wt.path, wt.branch, ID, "setup"), undefined);
    assert.equal(git(wt.path, "rev-parse", "HEAD").trim(), wt.head);
    // build.log is untracked and not ignored, README.md tracked: setup's, so they go into the setup commit.
    write(wt.path, "build.log", "x\n");
    write(wt.path, "README.md", "# demo\nline two\nline three\nsetup was here\n");
    const base = await commitSetup(wt.path, wt.branch, ID, "dsh-herdr setup: make");
    assert.ok(base);
    assert.equal(base.from, wt.head);
    assert.equal(git(wt.path, "rev-parse", "HEAD").trim(), base.commit);
    assert.equal(git(wt.path, "rev-parse", `${base.commit}^`).trim(), wt.head);
    assert.equal(
      git(wt.path, "log", "-1", "--format=%an <%ae>").trim(),
      `dsh-herdr setup <setup-${ID}@dsh-herdr.invalid>`,
    );
    assert.equal(git(wt.path, "status", "--porcelain"), "", "the child starts from a clean status");
    assert.deepEqual(git(wt.path, "show", "--name-only", "--format=", "HEAD").trim().split("\n").sort(), [
      "README.md",
      "build.log",
    ]);
    assert.equal(readFileSync(join(wt.path, ".env"), "utf8"), "SECRET=1\n", "ignored files stay as they are");
  } finally {
    r.cleanup();
  }
});

test("landing with a setup commit: the child's work lands, setup's changes do not; landability ignores them too", async () => {
  const { r, wt } = await repoWithIgnored();
  try {
    write(wt.path, "gen.txt", "generated by setup\n");
    write(wt.path, "README.md", "# demo\nline two\nline three\nsetup was here\n");
    const setup = (await commitSetup(wt.path, wt.branch, ID, "setup"))!;
    // The child: a new file, an edit of another line of the file setup edited, and one commit of its own.
    write(wt.path, "feature.txt", "feature\n");
    git(wt.path, "add", "feature.txt");
    git(wt.path, "commit", "-q", "-m", "child commits");
    write(wt.path, "README.md", "# demo, by the child\nline two\nline three\nsetup was here\n");
    const land = await landabilityOf({ worktree: wt, author, setup });
    assert.equal(land.clean, true, JSON.stringify(land));
    const out = await landTask({ taskId: ID, worktree: wt, author, message: "the child's work", setup });
    // The work is re-created without setup's commit: one new commit, reported as what it is, not a fast-forward.
    assert.equal(out.landing.strategy, "squash");
    assert.match(out.said, /one new commit .*setup commit left out/);
    assert.notEqual(out.landing.landedAs, out.landing.workHead, "landedAs is a new commit, not the task's");
    assert.equal(git(r.dir, "rev-parse", "HEAD").trim(), out.landing.landedAs);
    assert.equal(
      git(r.dir, "rev-parse", "HEAD^").trim(),
      setup.from,
      "one commit on the commit the task branched from",
    );
    assert.deepEqual(git(r.dir, "diff", "--name-only", setup.from, "HEAD").trim().split("\n").sort(), [
      "README.md",
      "feature.txt",
    ]);
    assert.equal(readFileSync(join(r.dir, "README.md"), "utf8"), "# demo, by the child\nline two\nline three\n");
    assert.throws(() => statSync(join(r.dir, "gen.txt")), "setup's file is not landed");
    assert.equal(git(r.dir, "log", "-1", "--format=%an").trim(), "worker-flash-s001");
  } finally {
    r.cleanup();
  }
});

test("a child that changes the lines its setup changed: landability and land name the paths, nothing changes", async () => {
  const { r, wt } = await repoWithIgnored();
  try {
    write(wt.path, "README.md", "# demo\nline two\nline three\nsetup was here\n");
    const setup = (await commitSetup(wt.path, wt.branch, ID, "setup"))!;
    write(wt.path, "README.md", "# demo\nline two\nline three\nthe child rewrote setup's line\n");
    const land = await landabilityOf({ worktree: wt, author, setup });
    assert.deepEqual([land.clean, land.conflicts], [false, ["README.md"]]);
    const before = [
      git(r.dir, "rev-parse", "HEAD"),
      git(r.dir, "status", "--porcelain"),
      git(wt.path, "rev-parse", "HEAD"),
    ];
    await assert.rejects(
      () => landTask({ taskId: ID, worktree: wt, author, message: "m", setup }),
      (e: DshError) => e.code === "LAND_CONFLICT" && /README\.md/.test(e.message) && /setup/.test(e.message),
    );
    assert.deepEqual(
      [git(r.dir, "rev-parse", "HEAD"), git(r.dir, "status", "--porcelain"), git(wt.path, "rev-parse", "HEAD")],
      before,
    );
  } finally {
    r.cleanup();
  }
});

test("a setup that changed nothing the child keeps: nothing to land", async () => {
  const { r, wt } = await repoWithIgnored();
  try {
    write(wt.path, "gen.txt", "generated\n");
    const setup = (await commitSetup(wt.path, wt.branch, ID, "setup"))!;
    const head = git(r.dir, "rev-parse", "HEAD");
    const out = await landTask({ taskId: ID, worktree: wt, author, message: "m", setup });
    assert.equal(out.already, true);
    assert.match(out.said, /nothing to land/);
    assert.equal(git(r.dir, "rev-parse", "HEAD"), head);
  } finally {
    r.cleanup();
  }
});
