// The worktree lock across processes (withWorktreeLock in src/git/worktree.ts): a daemon's `git worktree add` and a
// `dsh-herdr gc --yes` (or a second daemon on another home) change one repository's worktrees one at a time, since
// git's own add is not safe beside another change. Real git, real processes, a real SIGKILL.
import { test } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { DshError } from "../../src/core/errors.js";
import { newTaskId } from "../../src/core/ids.js";
import { createWorktree, gitCommonDir } from "../../src/git/worktree.js";
import { git, makeRepo } from "../helpers/git.js";

const worktreeModule = pathToFileURL(join(import.meta.dirname, "../../src/git/worktree.js")).href;

/** Another process that takes the repo's worktree lock, says "held", then holds it for `holdMs` (or for ever). */
function holder(repo: string, holdMs: number | "forever", marker: string): Promise<ChildProcess> {
  const script = `import { withWorktreeLock } from ${JSON.stringify(worktreeModule)};
    import { writeFileSync } from "node:fs";
    await withWorktreeLock(${JSON.stringify(repo)}, async () => {
      console.log("held");
      await new Promise((r) => ${holdMs === "forever" ? "setInterval(() => {}, 1000)" : `setTimeout(r, ${holdMs})`});
      writeFileSync(${JSON.stringify(marker)}, "released");
    });`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.once("line", (l) => (l === "held" ? resolve(child) : reject(new Error(`holder said ${l}`))));
    child.once("exit", (code) => reject(new Error(`holder exited (code ${code}) before holding the lock`)));
  });
}

const newId = () => newTaskId(Date.now(), randomBytes(3));

test("a worktree add waits while another process changes the repo's worktrees", async () => {
  const repo = makeRepo();
  try {
    const marker = join(repo.base, "released");
    const other = await holder(repo.dir, 1500, marker);
    const exited = new Promise((r) => other.once("exit", r));
    const wt = await createWorktree({
      repoCwd: repo.dir,
      home: join(repo.base, "home"),
      taskId: newId(),
      known: { repoRoot: realpathSync(repo.dir) },
    });
    assert.ok(existsSync(marker), "the add finished only after the other process's change was done");
    assert.equal(git(wt.path, "rev-parse", "HEAD").trim(), git(repo.dir, "rev-parse", "HEAD").trim());
    await exited;
  } finally {
    repo.cleanup();
  }
});

test("a linked worktree shares its repository's lock (one common git dir)", async () => {
  const repo = makeRepo();
  try {
    const wt = await createWorktree({ repoCwd: repo.dir, home: join(repo.base, "home"), taskId: newId() });
    assert.equal(realpathSync(gitCommonDir(wt.path)), realpathSync(join(repo.dir, ".git")));
    assert.equal(gitCommonDir(repo.dir), join(repo.dir, ".git"));
  } finally {
    repo.cleanup();
  }
});

test("a lock left by a process killed while holding it is taken over once stale", { timeout: 60_000 }, async () => {
  const repo = makeRepo();
  try {
    const other = await holder(repo.dir, "forever", join(repo.base, "never"));
    const gone = new Promise((r) => other.once("exit", r));
    other.kill("SIGKILL");
    await gone;
    // The lock directory is still there; the add waits until it goes stale (10 s), then takes it over.
    assert.ok(existsSync(join(repo.dir, ".git", "dsh-herdr-worktrees.lock")), "the dead holder's lock stayed");
    const wt = await createWorktree({ repoCwd: repo.dir, home: join(repo.base, "home"), taskId: newId() });
    assert.ok(existsSync(wt.path));
    assert.ok(!existsSync(join(repo.dir, ".git", "dsh-herdr-worktrees.lock")), "released after the add");
  } finally {
    repo.cleanup();
  }
});

test("a lock a live process holds too long fails the add by name, and changes nothing", {
  timeout: 60_000,
}, async () => {
  const repo = makeRepo();
  try {
    const other = await holder(repo.dir, "forever", join(repo.base, "never"));
    try {
      const taskId = newId();
      await assert.rejects(
        createWorktree({ repoCwd: repo.dir, home: join(repo.base, "home"), taskId }),
        (e: unknown) =>
          e instanceof DshError &&
          e.code === "GIT_FAILED" &&
          e.message.includes(join(repo.dir, ".git", "dsh-herdr-worktrees.lock")),
      );
      assert.equal(git(repo.dir, "branch", "--list", `dsh/${taskId}`).trim(), "", "no branch was made");
    } finally {
      other.kill("SIGKILL");
    }
  } finally {
    repo.cleanup();
  }
});
