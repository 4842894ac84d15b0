// A full or read-only home at spawn and mid-task, through a real daemon process: the home is a tiny tmpfs (512 KiB) that the
// test fills (then makes read-only under the daemon). task.spawn must fail with HOME_UNWRITABLE naming the cause, leave no
// half-written task directory, and the daemon keeps serving; once space is back a spawn runs to completion.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { closeSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import type { DshError } from "../../src/core/errors.js";
import type { AgentResult } from "../../src/core/types.js";
import { connect } from "../../src/client/index.js";
import { killUnder, processesUnder } from "../helpers/procs.js";
import { cliClient, makeRepo, startDaemonProc, startShared, until, type Shared } from "./proc-harness.js";

const SCRIPT: Script = {
  conversations: [
    // First: "MARK-DISK" below would match this prompt too.
    {
      name: "disk-slow",
      match: "MARK-DISK-SLOW",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "x.txt", content: "x\n" } }], delayMs: 4000 },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "mid ok" } }] },
        { text: "done" },
      ],
    },
    {
      name: "disk",
      match: "MARK-DISK",
      steps: [
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "disk ok" } }] },
        { text: "done" },
      ],
    },
  ],
};

let shared: Shared;
const mounts: string[] = [];
before(async () => {
  shared = await startShared(SCRIPT, "dsh-disk-");
});
after(async () => {
  for (const m of mounts) {
    killUnder(m);
    execFileSync("umount", ["-l", m], { stdio: "pipe" });
  }
  await shared?.close();
});

/** A fresh 0700 tmpfs home of `size`; a string naming why when it cannot be mounted (the test then skips). */
function tmpfsHome(name: string, size: string): { home: string } | string {
  const home = join(shared.dir, name);
  mkdirSync(home, { mode: 0o700 });
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size},mode=0700`, "tmpfs", home], { stdio: "pipe" });
  } catch (e) {
    return `mount -t tmpfs failed (${String((e as Error).message).split("\n")[0]}); needs root or CAP_SYS_ADMIN`;
  }
  mounts.push(home);
  return { home };
}

/** Grow `path` until ENOSPC: pages first, then single bytes (so the file's last page is full too). */
function fill(path: string, flags = "w"): void {
  const fd = openSync(path, flags);
  try {
    for (const chunk of [Buffer.alloc(4096, 120), Buffer.from("\n")]) {
      try {
        for (;;) writeSync(fd, chunk);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "ENOSPC") throw e;
      }
    }
  } finally {
    closeSync(fd);
  }
}

test("task.spawn on a full, then read-only home: HOME_UNWRITABLE, no half-written task, the daemon keeps serving", async (t) => {
  const m = tmpfsHome("dsh-home", "512k");
  if (typeof m === "string") {
    t.skip(m);
    return;
  }
  const { home } = m;
  const repo = makeRepo(shared.dir);
  const d = await startDaemonProc(home, shared.childEnv);
  const cli = await cliClient(home);
  const tasks = () => readdirSync(join(home, "tasks")).sort();
  try {
    const before = tasks();
    const filler = join(home, "filler");
    fill(filler);
    const spawn = () => cli.request("task.spawn", { model: shared.modelName, cwd: repo, prompt: "MARK-DISK go" });
    await assert.rejects(
      spawn(),
      (e: DshError) => e.code === "HOME_UNWRITABLE" && /disk is full/.test(e.message) && e.message.includes(home),
    );
    assert.deepEqual(tasks(), before, "no task directory left behind");
    const st = await cli.request("daemon.status", {});
    assert.equal(st.pid, d.pid, "the daemon still answers");
    assert.equal((await cli.request("task.list", {})).tasks.length, 0);

    // Space back, but the filesystem read-only.
    rmSync(filler);
    // The daemon holds daemon.log open for writing, so the tmpfs cannot be remounted read-only: a read-only bind
    // mount over tasks/ makes the part a spawn writes read-only instead.
    const tasksDir = join(home, "tasks");
    execFileSync("mount", ["--bind", tasksDir, tasksDir], { stdio: "pipe" });
    try {
      execFileSync("mount", ["-o", "remount,bind,ro", tasksDir], { stdio: "pipe" });
      await assert.rejects(spawn(), (e: DshError) => e.code === "HOME_UNWRITABLE" && /read-only/.test(e.message));
      assert.deepEqual(tasks(), before, "no task directory left behind (read-only)");
    } finally {
      execFileSync("umount", [tasksDir], { stdio: "pipe" });
    }

    // Writable again: the same daemon spawns and the task runs to its end.
    const { taskId } = await spawn();
    const w = await cli.request("task.wait", { taskIds: [taskId], timeoutMs: 90_000 }, { timeoutMs: 95_000 });
    assert.equal(w.results[0]?.status, "completed", JSON.stringify(w.results[0]));
    await cli.request("task.close", { taskId, closePane: true });
    await until("the child gone after close", () => (processesUnder(home).length === 0 ? true : undefined), 30_000);

    // Full again: a log line must not take the daemon down (pino's sync destination throws ENOSPC to the caller).
    fill(filler);
    fill(join(home, "daemon.log"), "a"); // no slack left in the log's last page either
    await assert.rejects(spawn(), (e: DshError) => e.code === "HOME_UNWRITABLE");
    d.proc.kill("SIGTERM");
    assert.equal(await d.exited, "0", `a graceful stop on a full disk: ${d.stderr()}`);
    rmSync(filler);
  } finally {
    cli.close();
    d.proc.kill("SIGTERM");
    await d.exited;
  }
});

test("the home fills while a task runs: the daemon survives, the task settles (not stuck) and closes once space is back", async (t) => {
  const m = tmpfsHome("dsh-home-mid", "1m");
  if (typeof m === "string") {
    t.skip(m);
    return;
  }
  const { home } = m;
  const repo = makeRepo(shared.dir, "repo-mid");
  const d = await startDaemonProc(home, shared.childEnv);
  const cli = await cliClient(home);
  // A pi-session owner: its delivery of the settled cycle cannot be written while the disk is full.
  const owner = await connect(home, { kind: "owner", ownerId: "sess-disk-full", timeoutMs: 120_000 });
  const pushed: string[] = [];
  owner.onPush("owner.delivery", (p: { taskId?: string; deliveryId: string }) => pushed.push(p.deliveryId));
  await owner.request("owner.attach", {});
  try {
    const { taskId } = await owner.request("task.spawn", {
      model: shared.modelName,
      cwd: repo,
      prompt: "MARK-DISK-SLOW go",
    });
    await until(
      "running",
      async () => ((await cli.request("task.get", { taskId })).status === "running" ? true : undefined),
      60_000,
    );
    const filler = join(home, "filler");
    fill(filler);
    fill(join(home, "daemon.log"), "a");
    fill(join(home, "tasks", taskId, "events.jsonl"), "a");
    const w = await cli.request("task.wait", { taskIds: [taskId], timeoutMs: 60_000 }, { timeoutMs: 65_000 });
    assert.equal(w.timedOut, false, `the task settled on a full disk: ${JSON.stringify(w.results[0])}`);
    assert.equal(d.proc.exitCode, null, `the daemon is alive: ${d.stderr()}`);
    const settled = w.results[0]!;
    // pi cannot write its session and dies: the result says the disk was the cause, not just "gone".
    assert.equal(settled.status, "gone", JSON.stringify(settled));
    assert.match(
      settled.error?.message ?? "",
      /the disk holding .*dsh-home-mid is full \(\d+ KiB free\), so free space first/,
    );
    const stored = () => JSON.parse(readFileSync(join(home, "tasks", taskId, "result.json"), "utf8")) as AgentResult;
    assert.notEqual(stored().status, "gone", "the settled record could not be written on the full disk");
    rmSync(filler);
    // Space back: the settled record is written without any new event (the daemon retries the save).
    assert.equal(pushed.length, 0, "nothing delivered while the outbox cannot be written");
    await until(
      "the settled result.json after space is back",
      () => (stored().status === "gone" ? true : undefined),
      60_000,
    );
    // And the owner hears the settled cycle once space is back (the delivery is retried, not dropped).
    await until(
      "the delivery after space is back",
      () => (pushed.some((id) => id.startsWith(`${taskId}-c1-`)) ? true : undefined),
      60_000,
    );
    // The record's retry and the delivery's retry run on their own timers: the journal line may follow the push.
    await until(
      "the settled status is journaled",
      () =>
        readFileSync(join(home, "tasks", taskId, "events.jsonl"), "utf8").includes('"status":"gone"')
          ? true
          : undefined,
      60_000,
    );
    // Space back: the close is recorded durably.
    const closed = await cli.request("task.close", { taskId, closePane: true });
    assert.equal(closed.status, "closed");
    assert.equal(stored().status, "closed");
    await until("the child gone after close", () => (processesUnder(home).length === 0 ? true : undefined), 30_000);
  } finally {
    cli.close();
    owner.close();
    d.proc.kill("SIGTERM");
    await d.exited;
  }
});
