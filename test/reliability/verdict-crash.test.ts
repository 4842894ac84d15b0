// The settle record is the verdict (issue 23): a daemon SIGKILLed right after journaling a cycle's settle comes back
// with that cycle's own ending (a contract error, a prompt pi refused, a child that died), never a made-up
// completion; settled children are parked after a restart; a crash while a parked child is relaunched neither loses
// the follow-up nor leaves the relaunched pi running as an orphan. Real daemon processes, real pi, scripted model.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  rmSync,
  truncateSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { verifyTaskDir } from "../../src/cli/commands/verify.js";
import type { DaemonClient } from "../../src/client/index.js";
import { describeDifference } from "../../src/core/lifecycle/verify.js";
import type { AgentResult } from "../../src/core/types.js";
import { readOutbox } from "../../src/store/outbox.js";
import {
  cliClient,
  makeRepo,
  sleep,
  startDaemonProc,
  startShared,
  until,
  type DaemonProc,
  type Shared,
  journal,
} from "./proc-harness.js";

const report = (text: string) => ({
  toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: text } }],
});
const SCRIPT: Script = {
  conversations: [
    // Never reports: one finalization follow-up, then the protocol's terminal contract error.
    { name: "never", match: "MARK-NEVER", afterEnd: "repeat", steps: [{ text: "I did nothing at all." }] },
    { name: "slow", match: "MARK-SLOW", steps: [{ text: "still thinking", delayMs: 120_000 }] },
    { name: "quick", match: "MARK-QUICK", steps: [report("quick one")] },
    { name: "two", match: "MARK-TWO", steps: [report("CYCLE-ONE-REPORT"), report("cycle two done")] },
  ],
};
const OWNER = "sess-verdict-owner";

let shared: Shared;
before(async () => {
  shared = await startShared(SCRIPT, "dsh-verdict-");
});
after(async () => {
  await shared?.close();
});

/**
 * Live pi children of a home, or of one task: found by the environment the daemon gave them (pi renames its process
 * title to "pi" once started, so its argv no longer names the session file); the headless wrapper is left out.
 */
function piChildren(home: string, taskId?: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${name}/stat`, "utf8"))) continue;
      const env = readFileSync(`/proc/${name}/environ`, "utf8").split("\0");
      const cmd = readFileSync(`/proc/${name}/cmdline`, "utf8");
      if (cmd.includes("wrapper.js")) continue;
      if (!env.some((v) => v.startsWith("DSH_HERDR_SOCKET=") && v.includes(home))) continue;
      if (taskId && !env.includes(`DSH_HERDR_TASK_ID=${taskId}`)) continue;
      pids.push(Number(name));
    } catch {
      /* ended meanwhile, or not ours to read */
    }
  }
  return pids;
}

interface Run {
  home: string;
  repo: string;
  d: DaemonProc;
  cli: DaemonClient;
}

async function startRun(name: string, crashAt?: string, config: object = {}): Promise<Run> {
  const dir = join(shared.dir, name);
  const repo = makeRepo(dir);
  const home = join(dir, "home");
  const d = await startDaemonProc(home, shared.childEnv, {
    env: crashAt ? { DSH_HERDR_CRASH_AT: crashAt } : {},
    config,
  });
  return { home, repo, d, cli: await cliClient(home) };
}

/** Wait for the planted kill point, then start the daemon again on the same home (no kill point). */
async function restart(run: Run, config: object = {}): Promise<void> {
  const how = await run.d.exited;
  assert.equal(how, "SIGKILL", `the daemon died by ${how}: ${run.d.stderr()}`);
  run.cli.close();
  run.d = await startDaemonProc(run.home, shared.childEnv, { config });
  run.cli = await cliClient(run.home);
}

async function stop(run: Run): Promise<void> {
  run.cli.close();
  if (run.d.proc.exitCode === null && run.d.proc.signalCode === null) {
    run.d.proc.kill("SIGTERM");
    await run.d.exited;
  }
  for (const pid of piChildren(run.home)) process.kill(pid, "SIGKILL");
  // Each task dir, crash and all, rebuilds its result.json (`dsh-herdr verify`): nothing differs, nothing unchecked.
  const tasks = join(run.home, "tasks");
  const ids = existsSync(tasks) ? readdirSync(tasks).filter((n) => /^t[0-9a-z]{11}$/.test(n)) : [];
  const disagree = ids.flatMap((id) => {
    const v = verifyTaskDir(join(tasks, id), id);
    return [
      ...v.differences.map((d) => `${id} ${describeDifference(d)}`),
      ...(v.unchecked ?? []).map((u) => `${id} not checked: ${u}`),
    ];
  });
  assert.deepEqual(disagree, [], "verify agrees with every task dir");
}

async function waitSettled(run: Run, taskId: string): Promise<AgentResult> {
  const w = await run.cli.request("task.wait", { taskIds: [taskId], timeoutMs: 90_000 }, { timeoutMs: 95_000 });
  assert.equal(w.timedOut, false, JSON.stringify(w.results[0]));
  return w.results[0]!;
}

async function spawnThrough(run: Run, params: Record<string, unknown>): Promise<string> {
  // The kill point may fire before the reply: the task exists on disk either way (its dir is made first).
  const reply = run.cli
    .request("task.spawn", { model: shared.modelName, cwd: run.repo, owner: OWNER, ...params })
    .then((r) => r.taskId)
    .catch(() => undefined);
  const died = run.d.exited.then(() => undefined);
  const id = await Promise.race([reply, died]);
  if (id) return id;
  return until("the task dir", () => {
    const tasks = join(run.home, "tasks");
    return existsSync(tasks) ? readdirOne(tasks) : undefined;
  });
}
const readdirOne = (dir: string): string | undefined => readdirSync(dir).find((n) => /^t[0-9a-z]{11}$/.test(n));

async function ownerDeliveries(home: string, taskId: string) {
  return (await readOutbox(home, OWNER)).filter((r) => r.taskId === taskId && r.state === "queued");
}

test("a crash right after a contract error's settle record: the task comes back failed CONTRACT_ERROR, and the owner's model is told", async () => {
  const run = await startRun("contract", "settle");
  try {
    const taskId = await spawnThrough(run, { prompt: "MARK-NEVER report nothing" });
    await restart(run);
    const r = await waitSettled(run, taskId);
    assert.equal(r.status, "failed", JSON.stringify(r));
    assert.equal(r.error?.code, "CONTRACT_ERROR", JSON.stringify(r.error));
    assert.equal(r.nextAction, "inspect");
    const d = await until("the owner's error delivery", async () => (await ownerDeliveries(run.home, taskId))[0]);
    const model = (d.payload as { model: { status?: string; error?: string; result?: unknown } }).model;
    assert.equal(model.status, "error");
    assert.match(String(model.error), /^CONTRACT_ERROR: /);
    assert.equal(model.result, undefined, "never a fabricated result");
    // One settle record for the cycle: recovery carried the journaled verdict out, it did not judge again.
    assert.equal(journal(run.home, taskId).filter((e) => e.type === "settle" && e.cycle === 1).length, 1);
  } finally {
    await stop(run);
  }
});

test("a crash right after the settle of a prompt pi refused (no API key): failed PROMPT_FAILED with pi's words after the restart", async () => {
  const run = await startRun("nokey", "settle");
  try {
    const taskId = await spawnThrough(run, { prompt: "MARK-QUICK no key", model: "anthropic/claude-haiku-4-5" });
    await restart(run);
    const r = await waitSettled(run, taskId);
    assert.equal(r.status, "failed", JSON.stringify(r));
    assert.equal(r.error?.code, "PROMPT_FAILED", JSON.stringify(r.error));
    assert.match(r.error!.message, /No API key found for anthropic/);
    const d = await until("the owner's error delivery", async () => (await ownerDeliveries(run.home, taskId))[0]);
    const model = (d.payload as { model: { status?: string; error?: string } }).model;
    assert.equal(model.status, "error");
    assert.match(String(model.error), /^PROMPT_FAILED: pi did not run the prompt: No API key found for anthropic/);
  } finally {
    await stop(run);
  }
});

test("a crash right after the settle of a child that died mid-cycle: gone with PANE_GONE after the restart", async () => {
  const run = await startRun("gone", "settle");
  try {
    const taskId = await spawnThrough(run, { prompt: "MARK-SLOW then killed" });
    await until(
      "the child's model request",
      () => shared.model.requests().some((q) => JSON.stringify(q.body).includes("MARK-SLOW then killed")) || undefined,
      60_000,
    );
    const [pid] = await until("the pi child", () => {
      const p = piChildren(run.home, taskId);
      return p.length ? p : undefined;
    });
    process.kill(pid!, "SIGKILL");
    await restart(run);
    const r = await waitSettled(run, taskId);
    assert.equal(r.status, "gone", JSON.stringify(r));
    assert.equal(r.error?.code, "PANE_GONE", JSON.stringify(r.error));
    const d = await until("the owner's error delivery", async () => (await ownerDeliveries(run.home, taskId))[0]);
    assert.equal((d.payload as { model: { status?: string } }).model.status, "error");
  } finally {
    await stop(run);
  }
});

test("a crash right after the settle of a child that died on a full disk: gone, its PANE_GONE naming the disk after the restart, also with the space back", async (t) => {
  const dir = join(shared.dir, "fulldisk");
  const repo = makeRepo(dir);
  const home = join(dir, "home");
  mkdirSync(home, { mode: 0o700 });
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", home], { stdio: "pipe" });
  } catch (e) {
    t.skip(`mount -t tmpfs failed (${String((e as Error).message).split("\n")[0]}); needs root`);
    return;
  }
  const run: Run = {
    home,
    repo,
    d: await startDaemonProc(home, shared.childEnv, { env: { DSH_HERDR_CRASH_AT: "settle" } }),
    cli: await cliClient(home),
  };
  const filler = join(home, "filler");
  try {
    const taskId = await spawnThrough(run, { prompt: "MARK-SLOW then the disk fills" });
    await until(
      "the child's model request",
      () =>
        shared.model.requests().some((q) => JSON.stringify(q.body).includes("MARK-SLOW then the disk fills")) ||
        undefined,
      60_000,
    );
    const [pid] = await until("the pi child", () => {
      const p = piChildren(home, taskId);
      return p.length ? p : undefined;
    });
    // The disk fills (a few KiB left: the settle record still fits), then the child dies.
    fillAllBut(filler, 24 * 1024);
    process.kill(pid!, "SIGKILL");
    const how = await run.d.exited;
    assert.equal(how, "SIGKILL", `the daemon died by ${how}: ${run.d.stderr()}`);
    // Space is back before the restart: the verdict still names the disk the child died on.
    rmSync(filler);
    run.cli.close();
    run.d = await startDaemonProc(home, shared.childEnv);
    run.cli = await cliClient(home);
    const r = await waitSettled(run, taskId);
    assert.equal(r.status, "gone", JSON.stringify(r));
    assert.equal(r.error?.code, "PANE_GONE", JSON.stringify(r.error));
    assert.match(r.error!.message, /the disk holding .* is full \(\d+ KiB free\), so free space first/);
    assert.ok(
      (r.warnings ?? []).some((w) => /is full/.test(w)),
      JSON.stringify(r.warnings),
    );
    // The settle record pinned the disk's state: the verdict, not what the disk says after the restart.
    assert.match(
      JSON.stringify(journal(home, taskId).find((e) => e.type === "settle")),
      /"disk":"the disk holding [^"]* is full/,
    );
  } finally {
    rmSync(filler, { force: true });
    await stop(run);
    execFileSync("umount", ["-l", home], { stdio: "pipe" });
  }
});

/** Fill the disk holding `path` until ENOSPC, then give back `spare` bytes. */
function fillAllBut(path: string, spare: number): void {
  const fd = openSync(path, "w");
  let size = 0;
  try {
    const chunk = Buffer.alloc(4096, 120);
    try {
      for (;;) size += writeSync(fd, chunk);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOSPC") throw e;
    }
  } finally {
    closeSync(fd);
  }
  truncateSync(path, Math.max(0, size - spare));
}

test("settled children are parked after a daemon restart (idleChildMs counts again)", async () => {
  const config = { idleChildMs: 4000 };
  const run = await startRun("park", undefined, config);
  try {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await spawnThrough(run, { prompt: `MARK-QUICK park ${i}` }));
    for (const id of ids) assert.equal((await waitSettled(run, id)).status, "completed");
    // SIGKILL before the idle timers fire: the children outlive the daemon and reconnect to the next one.
    process.kill(run.d.pid, "SIGKILL");
    await restart(run, config);
    for (const id of ids) {
      await until(`task ${id}'s child parked after the restart`, () => piChildren(run.home, id).length === 0, 60_000);
      assert.ok(
        journal(run.home, id).some((e) => e.type === "parked"),
        "the park is journaled",
      );
      const r = await run.cli.request("task.get", { taskId: id });
      assert.equal(r.status, "completed", "a parked task keeps its verdict");
    }
  } finally {
    await stop(run);
  }
});

for (const point of ["launched#2", "launch_returned#2"]) {
  test(`a crash at ${point} (the relaunch of a parked child): the follow-up runs once after the restart, no orphan pi`, async () => {
    const config = { idleChildMs: 1500 };
    const run = await startRun(`relaunch-${point.replace("#", "-")}`, point, config);
    try {
      const taskId = await spawnThrough(run, { prompt: `MARK-TWO relaunch ${point}` });
      assert.equal((await waitSettled(run, taskId)).status, "completed");
      await until("the parked record", () => journal(run.home, taskId).some((e) => e.type === "parked") || undefined);
      await until("the parked child to end", () => piChildren(run.home, taskId).length === 0);
      // The respond is durable before the relaunch; the kill point fires during it.
      await run.cli.request("task.respond", { taskId, message: "FOLLOW-UP carry on" }).catch(() => undefined);
      await restart(run, config);
      const r = await waitSettled(run, taskId);
      assert.equal(r.status, "completed", JSON.stringify(r));
      assert.equal(r.result?.text ?? r.finalMessage, "cycle two done");
      // The follow-up reached the session exactly once.
      const session = readFileSync(join(run.home, "tasks", taskId, "session.jsonl"), "utf8");
      assert.equal(session.split("FOLLOW-UP carry on").length - 1, 1, "the follow-up in the session once");
      // Exactly one pi child for the task now (the cycle-2 one); none once the task is closed.
      await sleep(500);
      assert.ok(piChildren(run.home, taskId).length <= 1, `pi children: ${piChildren(run.home, taskId)}`);
      await run.cli.request("task.close", { taskId, closePane: true });
      await until("no pi child left for the task", () => piChildren(run.home, taskId).length === 0, 30_000);
    } finally {
      await stop(run);
    }
  });
}
