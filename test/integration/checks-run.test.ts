// Checks run for real (sh, real processes): exit codes and output tails in receipts, a hung check cut off by its
// timeout (its whole process group with it), a flooding check cut off by the output cap, the caller never stalled.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCheck } from "../../src/checks/run-check.js";
import { runTaskChecks } from "../../src/checks/task-checks.js";

function temp(): { dir: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), "dsh-checks-"));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test("a passing and a failing check: exit codes, tails, logs in the task dir; both run", async () => {
  const t = temp();
  try {
    const receipts = await runTaskChecks({
      commands: ["echo passing; pwd", "echo to-stderr >&2; echo failing; exit 3"],
      cwd: t.dir,
      taskDir: join(t.dir, "task"),
      runTag: "c1-5",
    });
    assert.equal(receipts.length, 2);
    const [ok, bad] = receipts as [(typeof receipts)[0], (typeof receipts)[0]];
    assert.equal(ok.exitCode, 0);
    assert.equal(ok.cutOff, undefined);
    assert.match(ok.outputTail, /passing\n/);
    assert.ok(ok.outputTail.includes(t.dir), "ran in cwd");
    assert.equal(ok.logPath, join(t.dir, "task", "checks", "c1-5-1.log"));
    assert.equal(readFileSync(ok.logPath, "utf8"), ok.outputTail);
    assert.equal(bad.exitCode, 3);
    assert.match(bad.outputTail, /to-stderr/);
    assert.match(bad.outputTail, /failing/);
    assert.ok(bad.startedAt >= ok.startedAt && ok.durationMs >= 0);
  } finally {
    t.cleanup();
  }
});

test("a hung check is cut off by its timeout, the processes it started with it", async () => {
  const t = temp();
  try {
    const pidFile = join(t.dir, "pid");
    const r = await runCheck({
      command: `sleep 600 & echo $! > ${pidFile}; echo started; wait`,
      cwd: t.dir,
      logPath: join(t.dir, "hung.log"),
      timeoutMs: 500,
      outputCapBytes: 1024,
    });
    assert.equal(r.cutOff, "timeout");
    assert.equal(r.exitCode, null);
    assert.match(r.outputTail, /started/);
    assert.match(r.outputTail, /cut off: still running after 500 ms/);
    const pid = Number(readFileSync(pidFile, "utf8").trim());
    for (let i = 0; i < 100 && alive(pid); i++) await new Promise((res) => setTimeout(res, 50));
    assert.equal(alive(pid), false, "the sleep it started is gone too");
  } finally {
    t.cleanup();
  }
});

test("a flooding check is cut off at the output cap; the log holds the cap and a note", async () => {
  const t = temp();
  try {
    const r = await runCheck({
      command: "yes flood",
      cwd: t.dir,
      logPath: join(t.dir, "flood.log"),
      timeoutMs: 60_000,
      outputCapBytes: 64 * 1024,
    });
    assert.equal(r.cutOff, "output");
    assert.equal(r.exitCode, null);
    const size = statSync(r.logPath).size;
    assert.ok(size >= 64 * 1024 && size < 64 * 1024 + 200, `log is ${size} bytes`);
    assert.match(r.outputTail, /flood\n/);
    assert.match(r.outputTail, /cut off: its output passed 65536 bytes/);
    assert.ok(r.outputTail.length < 4096);
  } finally {
    t.cleanup();
  }
});

test("a check in a directory that is gone fails with a receipt, not a throw", async () => {
  const t = temp();
  try {
    const r = await runCheck({
      command: "true",
      cwd: join(t.dir, "missing"),
      logPath: join(t.dir, "x.log"),
      timeoutMs: 5000,
      outputCapBytes: 1024,
    });
    assert.equal(r.exitCode, null);
    assert.match(r.outputTail, /could not run the check/);
    assert.ok(existsSync(r.logPath));
  } finally {
    t.cleanup();
  }
});

/** Runs: not gone and not a zombie (PID 1 here does not reap orphans, so kill(pid, 0) succeeds on a dead one). */
function runs(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) [ZX]/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

test("an abort ends a running check's group and the receipt names the signal; an abort before it starts runs nothing", async () => {
  const t = temp();
  try {
    const ac = new AbortController();
    let pgid = 0;
    setTimeout(() => ac.abort(), 300);
    const r = await runCheck({
      command: `sleep 100 & echo $! > '${join(t.dir, "bg")}'; wait`,
      cwd: t.dir,
      logPath: join(t.dir, "a.log"),
      timeoutMs: 60_000,
      outputCapBytes: 1024,
      signal: ac.signal,
      onSpawn: (p) => {
        pgid = p;
      },
    });
    assert.ok(pgid > 0);
    assert.equal(r.cutOff, undefined, "an abort is not a cut-off");
    assert.equal(r.exitCode, null);
    assert.equal(r.signal, "SIGTERM");
    const bg = Number(readFileSync(join(t.dir, "bg"), "utf8"));
    const deadline = Date.now() + 3000;
    while (runs(bg)) {
      assert.ok(Date.now() < deadline, `its background ${bg} still runs`);
      await new Promise((res) => setTimeout(res, 20));
    }

    const marker = join(t.dir, "ran");
    const pre = await runCheck({
      command: `touch '${marker}'`,
      cwd: t.dir,
      logPath: join(t.dir, "b.log"),
      timeoutMs: 60_000,
      outputCapBytes: 1024,
      signal: AbortSignal.abort(),
    });
    assert.equal(pre.exitCode, null);
    assert.match(pre.outputTail, /not run: cancelled before it started/);
    assert.equal(existsSync(marker), false);
  } finally {
    t.cleanup();
  }
});
