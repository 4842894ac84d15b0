// The process adapter with real processes (sh, sleep, yes): exit codes and signals as outcomes, a timeout or a cancel
// that ends the whole process group (grandchildren holding the output pipe too), what a command leaves running in
// its group ended when it exits, the output cap, a program that does not exist.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runProcess, shellLine } from "../../src/process/run.js";

/** Running: a process with this pid that is not a zombie (PID 1 here does not reap orphans; kill(pid, 0) would
 *  succeed on one). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) [ZX]/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

async function gone(pid: number, ms = 3000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (running(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

/** The pids a command printed, one a line, as they come (read while it runs). */
function pidsPrinted(): { onOutput: (c: Buffer) => void; pids: () => number[] } {
  let text = "";
  return {
    onOutput: (c) => {
      text += c.toString("utf8");
    },
    pids: () => [...text.matchAll(/^pid (\d+)$/gm)].map((m) => Number(m[1])),
  };
}

test("exit codes are outcomes, not throws; stdout and stderr apart, or merged in order", async () => {
  const ok = await runProcess({ ...shellLine("echo out; echo err >&2; exit 0") });
  assert.equal(ok.exitCode, 0);
  assert.equal(ok.signal, null);
  assert.equal(ok.stdout, "out\n");
  assert.equal(ok.stderr, "err\n");
  assert.equal(ok.timedOut, false);
  assert.equal(ok.cancelled, false);
  assert.equal(ok.notFound, false);
  assert.equal(typeof ok.pid, "number");
  const bad = await runProcess({
    ...shellLine("echo a; sleep 0.05; echo b >&2; sleep 0.05; echo c; exit 3"),
    merge: true,
  });
  assert.equal(bad.exitCode, 3);
  assert.equal(bad.output, "a\nb\nc\n");
  assert.equal(bad.stdout, "a\nb\nc\n");
  assert.equal(bad.stderr, "");
  const killed = await runProcess({ ...shellLine("kill -USR1 $$; sleep 5") });
  assert.equal(killed.exitCode, null);
  assert.equal(killed.signal, "SIGUSR1");
  assert.equal(killed.ended, undefined);
});

test("a timeout ends the whole group, grandchildren holding the output pipe too, and says so", async () => {
  const seen = pidsPrinted();
  const t0 = Date.now();
  const r = await runProcess({
    ...shellLine("sleep 100 & echo pid $!; sleep 100 & echo pid $!; wait"),
    timeoutMs: 300,
    graceMs: 500,
    onOutput: seen.onOutput,
  });
  const took = Date.now() - t0;
  assert.equal(r.timedOut, true);
  assert.equal(r.ended, "timeout");
  assert.equal(r.exitCode, null);
  assert.equal(r.signal, "SIGTERM");
  assert.ok(took < 3000, `it returned after ${took} ms, not when the sleeps end`);
  const pids = seen.pids();
  assert.equal(pids.length, 2, r.stdout);
  for (const p of pids) assert.ok(await gone(p), `grandchild ${p} still runs`);
});

test("a group that ignores SIGTERM is SIGKILLed after the grace", async () => {
  const seen = pidsPrinted();
  const t0 = Date.now();
  // An ignored signal stays ignored in the children: only SIGKILL ends them.
  const r = await runProcess({
    ...shellLine("trap '' TERM; sleep 100 & echo pid $!; wait; wait"),
    timeoutMs: 200,
    graceMs: 400,
    onOutput: seen.onOutput,
  });
  const took = Date.now() - t0;
  assert.equal(r.timedOut, true);
  assert.equal(r.signal, "SIGKILL");
  assert.ok(took >= 550, `ended after ${took} ms: before its grace`);
  assert.ok(took < 4000, `ended after ${took} ms`);
  for (const p of seen.pids()) assert.ok(await gone(p), `grandchild ${p} still runs`);
});

test("what a command leaves running in its group ends with it; its exit is not held up by the pipe", async () => {
  const t0 = Date.now();
  const r = await runProcess({ ...shellLine("sleep 100 & echo pid $!; echo done") });
  assert.equal(r.exitCode, 0);
  assert.equal(r.ended, undefined);
  assert.match(r.stdout, /done\n/);
  assert.ok(Date.now() - t0 < 3000, "not held by the background sleep");
  const pid = Number(/pid (\d+)/.exec(r.stdout)?.[1]);
  assert.ok(await gone(pid), `background ${pid} still runs`);
});

test("output: kept up to keepBytes (head or tail), the rest dropped and marked; maxOutputBytes ends the group", async () => {
  const head = await runProcess({ ...shellLine("yes | head -c 100000"), keepBytes: 1000 });
  assert.equal(head.exitCode, 0);
  assert.equal(head.truncated, true);
  assert.equal(head.stdout.length, 1000);
  assert.equal(head.outputBytes, 100000);
  const tail = await runProcess({ ...shellLine("seq 1 20000"), keepBytes: 12, keep: "tail", merge: true });
  assert.equal(tail.output, "19999\n20000\n");
  assert.equal(tail.truncated, true);
  const whole = await runProcess({ ...shellLine("echo small"), keepBytes: 1000 });
  assert.equal(whole.truncated, false);

  const seen = pidsPrinted();
  const t0 = Date.now();
  const flood = await runProcess({
    ...shellLine("echo pid $$; sleep 100 & echo pid $!; yes"),
    maxOutputBytes: 200_000,
    keepBytes: 4096,
    onOutput: seen.onOutput,
  });
  assert.equal(flood.ended, "output");
  assert.equal(flood.exitCode, null);
  assert.ok(flood.outputBytes > 200_000);
  assert.ok(Date.now() - t0 < 4000);
  for (const p of seen.pids()) assert.ok(await gone(p), `${p} still runs`);
});

test("a cancel ends the group; a signal already aborted starts nothing", async () => {
  const ac = new AbortController();
  const seen = pidsPrinted();
  setTimeout(() => ac.abort(new Error("the daemon stops")), 200);
  const r = await runProcess({
    ...shellLine("sleep 100 & echo pid $!; wait"),
    signal: ac.signal,
    graceMs: 500,
    onOutput: seen.onOutput,
  });
  assert.equal(r.cancelled, true);
  assert.equal(r.ended, "cancelled");
  assert.equal(r.signal, "SIGTERM");
  for (const p of seen.pids()) assert.ok(await gone(p), `grandchild ${p} still runs`);

  const dir = mkdtempSync(join(tmpdir(), "dsh-run-"));
  try {
    const marker = join(dir, "ran");
    const pre = await runProcess({ ...shellLine(`touch ${marker}`), signal: AbortSignal.abort() });
    assert.equal(pre.cancelled, true);
    assert.equal(pre.pid, undefined);
    await new Promise((r2) => setTimeout(r2, 100));
    assert.throws(() => readFileSync(marker), "the command did not run");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a program that does not exist: a clear outcome, no throw; a shell line's missing command too", async () => {
  const r = await runProcess({ file: "dsh-herdr-no-such-program", args: ["x"], timeoutMs: 1000 });
  assert.equal(r.notFound, true);
  assert.equal(r.exitCode, null);
  assert.equal(r.pid, undefined);
  assert.match(r.spawnError ?? "", /ENOENT/);
  const sh = await runProcess({ ...shellLine("dsh-herdr-no-such-command") });
  assert.equal(sh.exitCode, 127);
  assert.equal(sh.notFound, true);
  assert.equal(sh.spawnError, undefined);
  const cwd = await runProcess({ ...shellLine("true"), cwd: "/nonexistent/dsh-herdr" });
  assert.equal(cwd.exitCode, null);
  assert.ok(cwd.spawnError, "a bad cwd is a spawn error");
});

test("stdin from a file, cwd and env as given (nothing of the daemon's added)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-run-"));
  try {
    const input = join(dir, "in");
    writeFileSync(input, "from the file\n");
    const r = await runProcess({
      ...shellLine('cat; pwd; echo "[$ONLY][$HOME]"'),
      cwd: dir,
      env: { ONLY: "this", PATH: process.env.PATH ?? "/usr/bin:/bin" },
      stdin: { file: input },
    });
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, `from the file\n${dir}\n[this][]\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a process that left the group and holds the output pipe does not hold up the outcome", async () => {
  const t0 = Date.now();
  // setsid: a session and group of its own, so the group's end does not reach it (a cgroup scope does, checks/scope.ts).
  const r = await runProcess({
    ...shellLine("setsid sh -c 'echo pid $$; exec sleep 30' & sleep 0.3; echo done"),
    timeoutMs: 10_000,
  });
  const took = Date.now() - t0;
  const pid = Number(/pid (\d+)/.exec(r.stdout)?.[1]);
  try {
    assert.equal(r.exitCode, 0);
    assert.match(r.stdout, /done\n/);
    assert.ok(took < 2500, `the outcome waited ${took} ms for the stray holder`);
    assert.ok(running(pid), "the stray holder (outside the group) still ran: the case is real");
  } finally {
    if (pid > 0 && running(pid)) process.kill(pid, "SIGKILL");
  }
});
