// A notify command target run once for real (sh): the task's facts in its environment, its output's end as the
// answer's text, its process group ended at its timeout or when the daemon stops, and a command that leaves a
// background process behind answered when it exits (not held until its timeout by the process's open pipe).
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NotifyBody } from "../../src/core/notify.js";
import type { AgentResult } from "../../src/core/types.js";
import { runCommand } from "../../src/notify/send.js";
import { NotifyService, type NotifySource } from "../../src/notify/service.js";

const body: NotifyBody = {
  deliveryId: "t1-c1-completed",
  taskId: "t1",
  agent: "worker-a1b2",
  status: "completed",
  summary: "did it",
  nextAction: "inspect",
  owner: "o1",
  at: "2026-01-01T00:00:00.000Z",
};

function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) [ZX]/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

test("a command target: ok on exit 0, the task's facts in its environment, the end of its output as text", async () => {
  const a = await runCommand({ command: 'echo "$DSH_HERDR_TASK_ID $DSH_HERDR_STATUS"; seq 1 2000' }, body);
  assert.equal(a.ok, true);
  assert.equal(a.exitCode, 0);
  assert.ok(a.text !== undefined && a.text.length <= 2048);
  assert.ok(a.text.endsWith("1999\n2000\n"), a.text.slice(-40));
  const first = await runCommand({ command: ["/bin/sh", "-c", 'echo "$DSH_HERDR_AGENT"; exit 4'] }, body);
  assert.equal(first.ok, false);
  assert.equal(first.exitCode, 4);
  assert.equal(first.text, "worker-a1b2\n");
});

test("a command that leaves a background process is answered when it exits, and the process ends with it", async () => {
  const t0 = Date.now();
  const a = await runCommand({ command: "sleep 100 & echo pid $!", timeoutMs: 8000 }, body);
  assert.ok(Date.now() - t0 < 4000, `answered after ${Date.now() - t0} ms`);
  assert.equal(a.ok, true);
  const pid = Number(/pid (\d+)/.exec(a.text ?? "")?.[1]);
  await new Promise((r) => setTimeout(r, 100));
  assert.ok(!running(pid), `background ${pid} still runs`);
});

test("a hung command is ended with its group at its timeout; a daemon stop ends it too", async () => {
  const t0 = Date.now();
  const a = await runCommand({ command: "sleep 100 & echo pid $!; wait", timeoutMs: 300 }, body);
  assert.equal(a.ok, false);
  assert.match(a.error ?? "", /ended after its 300 ms timeout/);
  assert.ok(Date.now() - t0 < 3000);
  const pid = Number(/pid (\d+)/.exec(a.text ?? "")?.[1]);
  assert.ok(!running(pid), `grandchild ${pid} still runs`);

  const ac = new AbortController();
  setTimeout(() => ac.abort(), 200);
  const s = await runCommand({ command: "sleep 100", timeoutMs: 10_000 }, body, process.env, ac.signal);
  assert.equal(s.ok, false);
  assert.match(s.error ?? "", /the daemon stopped/);
  assert.ok(s.durationMs < 3000);
});

test("a command that does not exist: not ok, the reason named", async () => {
  const a = await runCommand({ command: ["dsh-herdr-no-such-notifier"] }, body);
  assert.equal(a.ok, false);
  assert.match(a.error ?? "", /ENOENT/);
});

test("the notify service's stop (the daemon stopping) ends a command target still running, its group with it", async () => {
  const home = mkdtempSync(join(tmpdir(), "dsh-notify-stop-"));
  const pidFile = join(home, "pids");
  const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
  const svc = new NotifyService({
    home,
    log: quiet,
    config: () => ({ commands: [{ command: `sleep 100 & echo $$ $! > '${pidFile}'; wait` }] }),
    userAgent: "test",
  });
  try {
    await svc.start();
    let emit: Parameters<NotifySource["onStatus"]>[0] | undefined;
    svc.watch({
      onStatus: (fn) => {
        emit = fn;
        return () => undefined;
      },
    });
    const result = {
      taskId: "t1",
      status: "completed",
      summary: "did it",
      nextAction: "inspect",
      agent: { name: "worker-a1b2" },
      timing: { settledAt: Date.now() },
    } as unknown as AgentResult;
    emit!({ rec: { cycle: 1 }, chain: Promise.resolve() }, result, { settled: true });
    const deadline = Date.now() + 5000;
    while (!existsSync(pidFile) || readFileSync(pidFile, "utf8").trim().split(" ").length < 2) {
      assert.ok(Date.now() < deadline, "the command did not start");
      await new Promise((r) => setTimeout(r, 20));
    }
    const pids = readFileSync(pidFile, "utf8").trim().split(" ").map(Number);
    svc.stop();
    const gone = Date.now() + 4000;
    while (pids.some(running)) {
      assert.ok(Date.now() < gone, `still running after the stop: ${pids.filter(running).join(" ")}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    svc.stop();
    await svc.idle();
    rmSync(home, { recursive: true, force: true });
  }
});
