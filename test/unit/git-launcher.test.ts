// The daemon's git launcher (src/git/launcher.ts): git started by one /bin/sh beside the process, not forked by node,
// with the same answers as node's own spawn: output, exit codes, stdin, environment, awkward arguments, and a loud
// failure when the shell goes away with a command in flight.
import { after, afterEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isDshError } from "../../src/core/errors.js";
import { gitLauncherPid, isLauncherLost, useGitLauncher } from "../../src/git/launcher.js";
import { git, gitEnv, gitExit, gitMaybe, gitStdinFile, gitSucceeds, splitZ } from "../../src/git/run.js";
import { harvestDiff } from "../../src/git/diff.js";
import { streamDiff } from "../../src/git/patch-stream.js";
import { makeRepo, write } from "../helpers/git.js";
import { until } from "../helpers/wait.js";

/** The parent pid of a process, from /proc. */
function ppidOf(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[1]);
}

/** git's parent and grandparent, read by a git alias while git runs (its shell's $PPID is git). */
async function gitAncestry(cwd: string): Promise<{ parent: number; grandparent: number }> {
  const alias = "!p=$(cut -d' ' -f4 /proc/$PPID/stat); echo $p $(cut -d' ' -f4 /proc/$p/stat)";
  const [parent, grandparent] = (await git(cwd, ["-c", `alias.ancestry=${alias}`, "ancestry"])).trim().split(" ");
  return { parent: Number(parent), grandparent: Number(grandparent) };
}

const alive = (pid: number) => {
  try {
    return !readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.startsWith("Z");
  } catch {
    return false;
  }
};

describe("git launcher", () => {
  const repo = makeRepo({ "README.md": "hello\n" });
  const releases: (() => Promise<void>)[] = [];
  const use = () => {
    const r = useGitLauncher(() => gitEnv());
    releases.push(r);
    return r;
  };
  afterEach(async () => {
    for (const r of releases.splice(0)) await r();
  });
  after(() => repo.cleanup());

  test("git is started by the launcher's shell, not forked by this process", async () => {
    // Without a launcher: git's parent is this process.
    assert.equal((await gitAncestry(repo.dir)).parent, process.pid);
    use();
    const { parent, grandparent } = await gitAncestry(repo.dir);
    assert.notEqual(parent, process.pid, "git forked by node");
    const sh = gitLauncherPid()!;
    // git's parent is the command's subshell, whose parent is the launcher's shell, whose parent is this process.
    assert.equal(grandparent, sh);
    assert.equal(ppidOf(sh), process.pid);
  });

  test("the same answers as node's spawn: stdout, exit codes, stderr, stdin, awkward arguments", async () => {
    const awkward = 'it\'s a "file" with\nnewline $HOME `x` \\ é.txt';
    write(repo.dir, awkward, "content\n");
    const direct = {
      top: await git(repo.dir, ["rev-parse", "--show-toplevel"]),
      others: await git(repo.dir, ["ls-files", "-z", "--others"]),
      missing: await gitExit(repo.dir, ["cat-file", "-e", "0000000000000000000000000000000000000001"]),
      bad: await git(repo.dir, ["no-such-command"]).catch((e: Error) => e.message),
    };
    use();
    assert.equal(await git(repo.dir, ["rev-parse", "--show-toplevel"]), direct.top);
    const others = await git(repo.dir, ["ls-files", "-z", "--others"]);
    assert.equal(others, direct.others);
    assert.deepEqual(splitZ(others), [awkward]);
    const missing = await gitExit(repo.dir, ["cat-file", "-e", "0000000000000000000000000000000000000001"]);
    assert.equal(missing.code, direct.missing.code);
    assert.notEqual(missing.code, 0);
    assert.equal(await git(repo.dir, ["no-such-command"]).catch((e: Error) => e.message), direct.bad);
    assert.equal(await gitSucceeds(repo.dir, ["rev-parse", "--verify", "-q", "HEAD"]), true);
    assert.equal(await gitSucceeds(repo.dir, ["rev-parse", "--verify", "-q", "nope"]), false);
    assert.equal(await gitMaybe(repo.dir, ["rev-parse", "--verify", "nope"]), undefined);
    // stdin from a file: hash-object reads it.
    const input = join(repo.base, "stdin.txt");
    writeFileSync(input, "from stdin\n");
    await gitStdinFile(repo.dir, ["hash-object", "-w", "--stdin"], input);
    // hash-object of the path names the id without writing it: the object is there only if stdin reached git.
    const id = (await git(repo.dir, ["hash-object", input])).trim();
    assert.equal(await git(repo.dir, ["cat-file", "-p", id]), "from stdin\n");
  });

  test("each call's environment is the one git gets: extras set, variables removed from the process unset", async () => {
    use();
    const ident = (extra: Record<string, string> = {}) =>
      git(repo.dir, ["var", "GIT_AUTHOR_IDENT"], { GIT_AUTHOR_DATE: "1700000000 +0000", ...extra });
    assert.match(await ident({ GIT_AUTHOR_NAME: "Ada O'Neil" }), /^Ada O'Neil </);
    process.env.GIT_AUTHOR_NAME = "Set Later";
    try {
      assert.match(await ident(), /^Set Later </);
    } finally {
      delete process.env.GIT_AUTHOR_NAME;
    }
    // The launcher started before the variable existed and after it went: git must not see it now.
    assert.doesNotMatch(await ident(), /^Set Later </);
  });

  test("a cwd that is not there fails by name, as node's spawn does", async () => {
    use();
    await assert.rejects(git(join(repo.base, "gone"), ["status"]), (e: unknown) => {
      assert.ok(isDshError(e) && e.code === "GIT_FAILED", String(e));
      assert.match((e as Error).message, /gone/);
      return true;
    });
  });

  test("the shell killed with a command in flight: that command fails loudly (never a probe's 'no'), the next works", async () => {
    use();
    await git(repo.dir, ["status"]);
    const sh = gitLauncherPid()!;
    const slow = gitMaybe(repo.dir, ["-c", "alias.nap=!sleep 2", "nap"]);
    await until(
      "the command's subshell under the launcher",
      () => {
        try {
          return readFileSync(`/proc/${sh}/task/${sh}/children`, "utf8").trim() !== "";
        } catch {
          return false;
        }
      },
      5000,
      10,
    );
    process.kill(sh, "SIGKILL");
    await assert.rejects(slow, (e: unknown) => {
      assert.ok(isLauncherLost(e), String(e));
      assert.match((e as Error).message, /may not have run/);
      return true;
    });
    assert.equal((await git(repo.dir, ["rev-parse", "--is-inside-work-tree"])).trim(), "true");
    assert.notEqual(gitLauncherPid(), sh);
  });

  test("a directory left by a launcher whose process is gone is removed when a launcher starts; a live one's stays", async () => {
    const root = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
    const gone = spawnSync("true").pid!; // exited and reaped: its pid names no process
    const living = spawn("sleep", ["30"], { stdio: "ignore" });
    const stale = mkdtempSync(join(root, `dsh-herdr-git-${gone}-`));
    const kept = mkdtempSync(join(root, `dsh-herdr-git-${living.pid}-`));
    try {
      use();
      await git(repo.dir, ["status"]);
      assert.equal(existsSync(stale), false, "the gone launcher's directory was swept");
      assert.ok(existsSync(kept), "a live process's directory stays");
    } finally {
      living.kill("SIGKILL");
      rmSync(stale, { recursive: true, force: true });
      rmSync(kept, { recursive: true, force: true });
    }
  });

  test("the last release ends the shell and removes its directory; a harvest through it matches one without", async () => {
    write(repo.dir, "README.md", "changed\n");
    const head = (await git(repo.dir, ["rev-parse", "HEAD"])).trim();
    const harvest = (name: string) =>
      harvestDiff({ cwd: repo.dir, baselineHead: head, patchPath: join(repo.base, `${name}.patch`) });
    const before = await harvest("direct");
    const release = use();
    const second = use();
    const through = await harvest("launched");
    assert.deepEqual({ ...through, patchPath: "" }, { ...before, patchPath: "" });
    assert.equal(readFileSync(through.patchPath, "utf8"), readFileSync(before.patchPath, "utf8"));
    const sh = gitLauncherPid()!;
    const dir = readFileSync(`/proc/${sh}/cmdline`, "utf8").split("\0").filter(Boolean).pop()!;
    assert.match(dir, /dsh-herdr-git-/);
    assert.ok(existsSync(dir));
    await release();
    assert.ok(alive(sh), "one user left: the shell stays");
    await second();
    assert.equal(alive(sh), false, "no user left: the shell has exited and been reaped");
    assert.equal(gitLauncherPid(), undefined);
    assert.equal(existsSync(dir), false, "its directory removed");
  });

  test("a diff streams through the launcher: git's parent is the launcher's subshell, not this process", async () => {
    // An alias that prints a raw block (one added file) and then, as its patch, its own parent and grandparent.
    const alias =
      "!printf ':000000 100644 0 0 A\\0f\\0\\0'; p=$(cut -d' ' -f4 /proc/$PPID/stat); echo $p $(cut -d' ' -f4 /proc/$p/stat)";
    const ancestry = async (name: string) => {
      const file = join(repo.base, `${name}.patch`);
      const streamed = await streamDiff(
        repo.dir,
        ["-c", `alias.ancestry=${alias}`, "ancestry"],
        gitEnv(),
        file,
        1 << 20,
      );
      assert.deepEqual(streamed.entries, [{ status: "A", path: "f" }]);
      const [parent, grandparent] = readFileSync(file, "utf8").trim().split(" ").map(Number);
      return { parent: parent!, grandparent: grandparent! };
    };
    assert.equal((await ancestry("direct")).parent, process.pid, "without a launcher node spawns it");
    use();
    const { parent, grandparent } = await ancestry("launched");
    assert.notEqual(parent, process.pid, "git diff forked by node");
    assert.equal(grandparent, gitLauncherPid());
  });

  test("streamed diffs larger than a pipe holds, capped or not, 20 at once, match node's spawn", async () => {
    const big = makeRepo({ "a.txt": "a\n", "b.txt": "b\n" });
    try {
      // ~3 MB of patch: far over the 64 KB a pipe buffers, so git waits on this process's reads.
      const lines = (tag: string) =>
        Array.from({ length: 40_000 }, (_, i) => `${tag} line ${i} ${"x".repeat(30)}`).join("\n");
      write(big.dir, "a.txt", `${lines("A")}\n`);
      write(big.dir, "b.txt", `${lines("B")}\n`);
      write(big.dir, "new.txt", "untracked\n");
      const head = (await git(big.dir, ["rev-parse", "HEAD"])).trim();
      // Each harvest in its own directory, as each task's: a harvest clears its directory's leftover work dirs.
      const dirFor = (name: string) => {
        mkdirSync(join(big.base, name));
        return join(big.base, name);
      };
      const harvest = (name: string, capBytes?: number) =>
        harvestDiff({
          cwd: big.dir,
          baselineHead: head,
          patchPath: join(dirFor(name), "diff.patch"),
          ...(capBytes !== undefined ? { capBytes } : {}),
        });
      const direct = { whole: await harvest("whole"), capped: await harvest("capped", 2_000_000) };
      assert.equal(direct.whole.truncated, false);
      assert.equal(direct.capped.truncated, true, "the cap cuts the second file's patch");
      use();
      const wholes = await Promise.all(Array.from({ length: 20 }, (_, i) => harvest(`whole-${i}`)));
      for (const w of wholes) {
        assert.deepEqual({ ...w, patchPath: "" }, { ...direct.whole, patchPath: "" });
        assert.ok(readFileSync(w.patchPath).equals(readFileSync(direct.whole.patchPath)), "the same patch bytes");
      }
      const capped = await harvest("capped-launched", 2_000_000);
      assert.deepEqual({ ...capped, patchPath: "" }, { ...direct.capped, patchPath: "" });
      assert.ok(readFileSync(capped.patchPath).equals(readFileSync(direct.capped.patchPath)));
    } finally {
      big.cleanup();
    }
  });

  test("a streamed diff's failures read as node's: git's own words, a cwd that is gone", async () => {
    const bad = ["diff", "-z", "--raw", "-p", "0000000000000000000000000000000000000001"];
    const fail = (cwd: string) =>
      streamDiff(cwd, bad, gitEnv(), join(repo.base, "fail.patch"), 1 << 20).then(
        () => assert.fail("resolved"),
        (e: Error) => e,
      );
    const direct = await fail(repo.dir);
    use();
    const launched = await fail(repo.dir);
    assert.ok(isDshError(launched) && launched.code === "GIT_FAILED", String(launched));
    assert.equal(launched.message, direct.message);
    assert.match(launched.message, /bad object|unknown revision/);
    const gone = await fail(join(repo.base, "gone"));
    assert.ok(isDshError(gone) && gone.code === "GIT_FAILED", String(gone));
    assert.match(gone.message, /could not start in .*gone.*can't cd/);
  });

  test("the shell killed while a diff streams: the diff fails loudly, the next one works", async () => {
    use();
    await git(repo.dir, ["status"]);
    const sh = gitLauncherPid()!;
    const slow = streamDiff(
      repo.dir,
      ["-c", "alias.nap=!printf '\\0\\0diff --git a/f b/f\\n'; sleep 2", "nap"],
      gitEnv(),
      join(repo.base, "nap.patch"),
      1 << 20,
    );
    // This shell has made the command's FIFO: the command is running under it, before or after this side opened it.
    const dir = readFileSync(`/proc/${sh}/cmdline`, "utf8").split("\0").filter(Boolean).pop()!;
    await until("the diff's FIFO", () => readdirSync(dir).some((f) => f.endsWith(".fifo")), 5000, 10);
    process.kill(sh, "SIGKILL");
    await assert.rejects(slow, (e: unknown) => {
      assert.ok(isLauncherLost(e), String(e));
      return true;
    });
    write(repo.dir, "README.md", "again\n");
    const head = (await git(repo.dir, ["rev-parse", "HEAD"])).trim();
    const d = await harvestDiff({ cwd: repo.dir, baselineHead: head, patchPath: join(repo.base, "after.patch") });
    assert.ok(d.files.includes("README.md"), String(d.files));
    assert.notEqual(gitLauncherPid(), sh);
  });
});
