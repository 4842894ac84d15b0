// land and the user's own files: every path a landing would create, replace or delete that is untracked or ignored in
// the checkout is named and refused before anything changes (land and its dry run alike), and a checkout update that
// fails half-way (a full disk) leaves the checkout exactly as it was. The user's ignored files (.env,
// config.local.json, localdata/) are compared byte for byte before and after every case.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import type { DshError } from "../../src/core/errors.js";
import { dryLand, type LandIntent, landTask, resolveIntent } from "../../src/git/land.js";
import { childIdentity } from "../../src/git/landability.js";
import { createWorktree, type CreatedWorktree } from "../../src/git/worktree.js";
import { commitAll, git, makeRepo, write, type TempRepo } from "../helpers/git.js";

const ID = "tmg3k2a1c077";
const author = childIdentity("worker-flash-c077", ID);

const IGNORE = ".env\nconfig.local.json\nlocaldata/\ncache\n";

/** The user's repo with a .gitignore and the user's own ignored files; the task's worktree. */
async function setup(extra: Record<string, string> = {}): Promise<{ r: TempRepo; wt: CreatedWorktree }> {
  const r = makeRepo({ "README.md": "hello\n", "tracked.txt": "tracked\n", ".gitignore": IGNORE, ...extra });
  write(r.dir, ".env", "OPENAI_API_KEY=sk-user-real-secret\n");
  write(r.dir, "config.local.json", '{"theme":"the user\'s own"}\n');
  write(r.dir, "localdata/one.db", "one\n");
  write(r.dir, "localdata/two.db", "two\n");
  write(r.dir, "localdata/deep/three.db", "three\n");
  write(r.dir, "cache", "a cache file of the user's\n");
  const wt = await createWorktree({ repoCwd: r.dir, home: join(r.base, "home"), taskId: ID });
  return { r, wt };
}

/** Every untracked or ignored file of the checkout, byte for byte (path → content). */
function userFiles(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const list = git(dir, "ls-files", "-z", "--others").split("\0").filter(Boolean);
  const ignored = git(dir, "ls-files", "-z", "--others", "--ignored", "--exclude-standard").split("\0").filter(Boolean);
  for (const p of [...list, ...ignored]) out.set(p, readFileSync(join(dir, p)).toString("base64"));
  return out;
}

/** The checkout and task as a refusal must leave them. */
function state(r: TempRepo, wt: CreatedWorktree): unknown[] {
  return [
    git(r.dir, "rev-parse", "HEAD"),
    git(r.dir, "status", "--porcelain=v1", "--untracked-files=all", "--ignored"),
    git(r.dir, "ls-files", "-s"),
    [...userFiles(r.dir)],
    git(wt.path, "rev-parse", "HEAD"),
    git(wt.path, "status", "--porcelain=v1", "--untracked-files=all"),
  ];
}

/** land and its dry run both refuse with CHECKOUT_IN_THE_WAY naming exactly `paths`, and change nothing. */
async function refusedInTheWay(r: TempRepo, wt: CreatedWorktree, paths: string[]): Promise<void> {
  const before = state(r, wt);
  const files = userFiles(r.dir);
  const check = (e: DshError) => {
    assert.equal(e.code, "CHECKOUT_IN_THE_WAY", e.message);
    const named = (e.details as { paths: { path: string }[] } | undefined)?.paths ?? [];
    assert.deepEqual(named.map((p) => p.path).sort(), [...paths].sort());
    for (const p of paths) assert.ok(e.message.includes(p), `${p} named in: ${e.message}`);
    assert.match(e.message, /nothing was changed/);
    return true;
  };
  await assert.rejects(dryLand({ taskId: ID, worktree: wt, author }), check);
  assert.deepEqual(state(r, wt), before, "the dry run changed nothing");
  await assert.rejects(landTask({ taskId: ID, worktree: wt, author, message: "m" }), check);
  assert.deepEqual(state(r, wt), before, "land changed nothing");
  assert.deepEqual(userFiles(r.dir), files, "the user's ignored files, byte for byte");
}

test("a child that commits the user's ignored .env (git add -f) is refused by name; the secret stays", async () => {
  const { r, wt } = await setup();
  try {
    write(wt.path, ".env", "CHILD=placeholder\n");
    git(wt.path, "add", "-f", ".env");
    commitAll(wt.path, "child: .env");
    await refusedInTheWay(r, wt, [".env"]);
    assert.equal(readFileSync(join(r.dir, ".env"), "utf8"), "OPENAI_API_KEY=sk-user-real-secret\n");
  } finally {
    r.cleanup();
  }
});

test("a child that drops a .gitignore line and writes config.local.json (uncommitted) is refused by name", async () => {
  const { r, wt } = await setup();
  try {
    write(wt.path, ".gitignore", ".env\nlocaldata/\ncache\n");
    write(wt.path, "config.local.json", '{"theme":"the child\'s"}\n');
    await refusedInTheWay(r, wt, ["config.local.json"]);
  } finally {
    r.cleanup();
  }
});

test("a child's file named like the user's ignored directory (localdata) is refused; the directory stays", async () => {
  const { r, wt } = await setup();
  try {
    write(wt.path, "localdata", "a file now\n");
    git(wt.path, "add", "-f", "localdata");
    commitAll(wt.path, "child: localdata file");
    await refusedInTheWay(r, wt, ["localdata"]);
    assert.equal(readFileSync(join(r.dir, "localdata/deep/three.db"), "utf8"), "three\n");
  } finally {
    r.cleanup();
  }
});

test("a child's file under the user's ignored file (cache/x) or over one in an ignored dir is refused by name", async () => {
  const { r, wt } = await setup();
  try {
    write(wt.path, "cache/x.txt", "x\n");
    write(wt.path, "localdata/one.db", "the child's\n");
    git(wt.path, "add", "-f", "cache/x.txt", "localdata/one.db");
    commitAll(wt.path, "child: under ignored paths");
    await refusedInTheWay(r, wt, ["cache", "localdata/one.db"]);
  } finally {
    r.cleanup();
  }
});

test("an untracked (not ignored) file of the user in the way is refused by the same code", async () => {
  const { r, wt } = await setup();
  try {
    write(wt.path, "notes.txt", "the child's notes\n");
    write(r.dir, "notes.txt", "the user's notes\n");
    await refusedInTheWay(r, wt, ["notes.txt"]);
  } finally {
    r.cleanup();
  }
});

test("a tracked directory the landing turns into a file, holding an ignored file of the user, is refused", async () => {
  const { r, wt } = await setup({ "lib/a.js": "a\n", "lib/.gitignore": "*.log\n" });
  try {
    write(r.dir, "lib/debug.log", "the user's log\n");
    git(wt.path, "rm", "-rq", "lib");
    write(wt.path, "lib", "now a file\n");
    commitAll(wt.path, "child: lib is a file");
    await refusedInTheWay(r, wt, ["lib/debug.log"]);
  } finally {
    r.cleanup();
  }
});

test("work beside the user's ignored files lands and leaves them alone (a new file in an ignored dir, too)", async () => {
  const { r, wt } = await setup();
  try {
    const files = userFiles(r.dir);
    write(wt.path, "tracked.txt", "tracked\nby the child\n");
    write(wt.path, "localdata/new.txt", "the child's new file\n");
    git(wt.path, "add", "-f", "localdata/new.txt");
    commitAll(wt.path, "child: beside");
    const dry = await dryLand({ taskId: ID, worktree: wt, author });
    assert.equal(dry.clean, true);
    const out = await landTask({ taskId: ID, worktree: wt, author, message: "m" });
    assert.equal(out.landing.strategy, "fast-forward");
    assert.equal(git(r.dir, "rev-parse", "HEAD").trim(), out.landing.landedAs);
    assert.equal(readFileSync(join(r.dir, "localdata/new.txt"), "utf8"), "the child's new file\n");
    assert.equal(git(r.dir, "status", "--porcelain=v1", "--untracked-files=all"), "");
    const now = userFiles(r.dir);
    assert.deepEqual(now, files, "the user's ignored files, byte for byte");
  } finally {
    r.cleanup();
  }
});

// --- a full disk ---

const mounts: string[] = [];
function tmpfs(dir: string, size: string): string | undefined {
  mkdirSync(dir, { recursive: true });
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", dir], { stdio: "pipe" });
  } catch (e) {
    return `mount -t tmpfs failed (${String((e as Error).message).split("\n")[0]}); needs root or CAP_SYS_ADMIN`;
  }
  mounts.push(dir);
  return undefined;
}

function tree(dir: string, rel = ""): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(dir, rel)).sort()) {
    if (rel === "" && name === ".git") continue;
    const p = rel ? `${rel}/${name}` : name;
    const st = statSync(join(dir, p));
    if (st.isDirectory()) out.push(`${p}/`, ...tree(dir, p));
    else out.push(`${p} ${st.size} ${readFileSync(join(dir, p)).toString("base64").slice(0, 64)}`);
  }
  return out;
}

test("a full disk (3 MiB tmpfs) during the checkout update: the checkout is exactly as it was, then lands", async (t) => {
  const r = makeRepo({ "README.md": "hello\n" }, false);
  const disk = join(r.base, "disk");
  const skip = tmpfs(disk, "3m");
  if (skip) {
    r.cleanup();
    t.skip(skip);
    return;
  }
  try {
    // The user's repository on the small disk; the task's worktree elsewhere.
    const repo = join(disk, "repo");
    mkdirSync(repo);
    git(repo, "init", "-q");
    write(repo, "tracked.txt", "tracked\n");
    write(repo, ".gitignore", IGNORE);
    commitAll(repo, "initial");
    write(repo, ".env", "OPENAI_API_KEY=sk-user-real-secret\n");
    write(repo, "localdata/one.db", "one\n");
    const wt = await createWorktree({ repoCwd: repo, home: join(r.base, "home"), taskId: ID });
    write(wt.path, "tracked.txt", "tracked\nthe child's edit\n");
    for (const f of ["f1.bin", "f2.bin", "f3.bin"]) write(wt.path, f, randomBytes(700_000));
    const before = tree(repo);
    const head = git(repo, "rev-parse", "HEAD");
    const status = git(repo, "status", "--porcelain=v1", "--untracked-files=all", "--ignored");
    await assert.rejects(landTask({ taskId: ID, worktree: wt, author, message: "m" }), (e: DshError) => {
      assert.match(e.message, /nothing was landed/, e.message);
      return true;
    });
    assert.deepEqual(tree(repo), before, "every file of the checkout as it was");
    assert.equal(git(repo, "rev-parse", "HEAD"), head);
    assert.equal(git(repo, "status", "--porcelain=v1", "--untracked-files=all", "--ignored"), status);
    // Room again (the task's objects stay): the same land goes through.
    rmSync(join(repo, "localdata"), { recursive: true });
    execFileSync("mount", ["-o", "remount,size=12m", disk], { stdio: "pipe" });
    const out = await landTask({ taskId: ID, worktree: wt, author, message: "m" });
    assert.equal(git(repo, "rev-parse", "HEAD").trim(), out.landing.landedAs);
    assert.equal(statSync(join(repo, "f2.bin")).size, 700_000);
    assert.equal(git(repo, "status", "--porcelain=v1"), "");
    assert.equal(readFileSync(join(repo, ".env"), "utf8"), "OPENAI_API_KEY=sk-user-real-secret\n");
  } finally {
    for (const m of mounts.splice(0)) {
      try {
        execFileSync("umount", ["-l", m], { stdio: "pipe" });
      } catch {
        /* already gone */
      }
    }
    r.cleanup();
  }
});

// --- an interrupted landing, decided from git ---

/** A landing stopped dead at `step` (as a SIGKILL would: no clean-up runs); returns its intent record. */
async function stoppedAt(wt: CreatedWorktree, step: "intent" | "checkout_updated" | "branch_moved") {
  let intent: LandIntent | undefined;
  await assert.rejects(
    landTask({
      taskId: ID,
      worktree: wt,
      author,
      message: "m",
      onIntent: async (i) => {
        intent = i;
      },
      progress: (s) => {
        if (s === step) throw new Error(`stopped at ${s}`);
      },
    }),
    /stopped at/,
  );
  return intent!;
}

test("an interrupted landing: files written, branch not moved → put back, and a file the user changed since is left", async () => {
  const { r, wt } = await setup();
  try {
    write(wt.path, "tracked.txt", "tracked\nthe child's\n");
    write(wt.path, "README.md", "hello\nthe child's too\n");
    write(wt.path, "fresh.txt", "fresh\n");
    const head = git(r.dir, "rev-parse", "HEAD");
    const files = userFiles(r.dir);
    const intent = await stoppedAt(wt, "checkout_updated");
    assert.equal(readFileSync(join(r.dir, "fresh.txt"), "utf8"), "fresh\n", "the update had written the files");
    write(r.dir, "README.md", "hello\nthe user's edit after the crash\n");
    const out = await resolveIntent(intent);
    assert.equal(out.landed, false, out.said);
    assert.equal(git(r.dir, "rev-parse", "HEAD"), head);
    assert.equal(readFileSync(join(r.dir, "tracked.txt"), "utf8"), "tracked\n", "the landing's edit put back");
    assert.ok(!existsSync(join(r.dir, "fresh.txt")), "the landing's new file removed");
    assert.equal(readFileSync(join(r.dir, "README.md"), "utf8"), "hello\nthe user's edit after the crash\n");
    assert.equal(git(r.dir, "status", "--porcelain=v1", "--untracked-files=all"), " M README.md\n");
    assert.deepEqual(userFiles(r.dir), new Map([...files]), "the user's ignored files, byte for byte");
  } finally {
    r.cleanup();
  }
});

test("an interrupted landing: branch moved, index not replaced → landed, the index finished, the task branch too", async () => {
  const { r, wt } = await setup();
  try {
    write(wt.path, "fresh.txt", "fresh\n");
    const files = userFiles(r.dir);
    const intent = await stoppedAt(wt, "branch_moved");
    assert.equal(git(r.dir, "rev-parse", "HEAD").trim(), intent.newHead);
    assert.notEqual(git(r.dir, "status", "--porcelain=v1"), "", "the index still holds the old tree");
    const out = await resolveIntent(intent);
    assert.equal(out.landed, true, out.said);
    assert.equal(out.landing?.landedAs, intent.newHead);
    assert.equal(git(r.dir, "status", "--porcelain=v1", "--untracked-files=all"), "");
    assert.equal(git(wt.path, "rev-parse", "HEAD").trim(), intent.workHead, "the task branch holds the work");
    assert.deepEqual(userFiles(r.dir), files, "the user's ignored files, byte for byte");
    // A repeat: already landed, nothing changes.
    const again = await landTask({ taskId: ID, worktree: wt, author, message: "m", previous: out.landing! });
    assert.equal(again.already, true, again.said);
  } finally {
    r.cleanup();
  }
});
