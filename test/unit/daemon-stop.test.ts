// A stopped daemon leaves its unfinished launches to the next one: the readiness barrier and the admission queue
// drop their timers at stop, so the stopped daemon neither marks a task stalled nor fails a queued spawn after it
// has stopped (that would write into task dirs behind the next daemon's back), and the next daemon's recovery
// starts the queued task again. Real daemon on a temp home and a real Unix socket, a stub runtime that never
// reports readiness; time moves only on the daemon's fake clock (no sleeps).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "../../src/client/index.js";
import { runDaemon } from "../../src/daemon/daemon.js";
import type { LaunchSpec } from "../../src/runtime/types.js";
import { FakeClock } from "../helpers/fake-clock.js";
import { stubRuntime } from "../helpers/stub-runtime.js";
import { TaskStore } from "../../src/store/task-store.js";
import { until } from "../helpers/wait.js";

const stub = (launches: LaunchSpec[], gate?: Promise<void>) =>
  stubRuntime({ launch: async (spec) => (launches.push(spec), await gate, { runtime: "headless", pid: process.pid }) });

/** Timers that keep this process alive (unref'd ones are not listed). */
const liveTimers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;

test("daemon stop: a launch waiting for readiness and a queued spawn are left to the next daemon, not failed", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-stop-"));
  const home = join(dir, "home");
  const launches: LaunchSpec[] = [];
  const config = { readinessTimeoutMs: 1500, maxParallelAgents: 1, queueTimeoutMs: 1500 };
  const clock = new FakeClock();
  let d = await runDaemon(home, {
    logLevel: "silent",
    runtimeFactories: { headless: () => stub(launches) },
    config,
    clock,
  });
  try {
    const cli = await connect(home, { kind: "cli" });
    const first = await cli.request("task.spawn", {
      cwd: dir,
      prompt: "p1",
      model: "m/x",
      runtime: "headless",
    });
    await until("the first launch", () => launches.length > 0, 10_000, 10);
    const live = d.supervisor.tasks.get(first.taskId)!;
    await until("the readiness barrier", () => live.armedTimers().includes("readiness"), 10_000, 10);
    assert.equal(launches.length, 1, "the first launched");
    const queued = await cli.request("task.spawn", {
      cwd: dir,
      prompt: "p2",
      model: "m/x",
      runtime: "headless",
    });
    cli.close();
    assert.ok(clock.pending().length >= 2, `the readiness and the queue timers run: ${clock.pending()}`);
    await d.stop();
    assert.equal(launches.length, 1, "one slot: the second is queued");
    assert.deepEqual(clock.pending(), [], "no timer outlives the stop");

    clock.advance(2500); // past both the readiness and the queue timeouts
    const store = await TaskStore.open(home);
    const types = async (id: string) => (await store.readEvents(id)).map((e) => e.type);
    const firstEvents = await types(first.taskId);
    assert.ok(firstEvents.includes("launched"), firstEvents.join());
    assert.ok(!firstEvents.includes("stalled"), `a stopped daemon marked the launch stalled: ${firstEvents.join()}`);
    assert.equal(launches.length, 1, "a stopped daemon retried a launch");
    const queuedEvents = await types(queued.taskId);
    assert.ok(
      !queuedEvents.some((t) => /fail|settle|closed|error/.test(t)),
      `a stopped daemon failed the queued spawn: ${queuedEvents.join()}`,
    );

    // The next daemon starts the queued task again (recovery), proof that it was left whole.
    const config2 = { ...config, readinessTimeoutMs: 60_000, queueTimeoutMs: 60_000, maxParallelAgents: 2 };
    d = await runDaemon(home, {
      logLevel: "silent",
      runtimeFactories: { headless: () => stub(launches) },
      config: config2,
    });
    await until("the queued task launched", () => launches.some((l) => l.taskId === queued.taskId), 10_000, 10);
    assert.ok(
      launches.some((l) => l.taskId === queued.taskId),
      "the next daemon launched the queued task",
    );
  } finally {
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("daemon stop in the middle of a launch: the launch is journaled for the next daemon, no timer outlives the stop", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-stop-"));
  const home = join(dir, "home");
  const launches: LaunchSpec[] = [];
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const timersBefore = liveTimers();
  const clock = new FakeClock();
  const d = await runDaemon(home, {
    logLevel: "silent",
    runtimeFactories: { headless: () => stub(launches, gate) },
    config: { readinessTimeoutMs: 300 },
    clock,
  });
  try {
    const cli = await connect(home, { kind: "cli" });
    const t = await cli.request("task.spawn", {
      cwd: dir,
      prompt: "p",
      model: "m/x",
      runtime: "headless",
      timeoutMs: 600_000,
    });
    await until("the launch call", () => launches.length > 0, 10_000, 10);
    assert.equal(launches.length, 1);
    cli.close();
    const stopping = d.stop(); // the runtime's launch call is still in flight
    open();
    await stopping;
    assert.deepEqual(clock.pending(), [], "the launch that returned after stop armed no timer");
    clock.advance(700); // past the readiness timeout: nothing may fire
    const events = (await (await TaskStore.open(home)).readEvents(t.taskId)).map((e) => e.type);
    assert.ok(events.includes("launched"), `the launch that finished after stop is journaled: ${events.join()}`);
    assert.ok(
      !events.includes("stalled") && launches.length === 1,
      `a stopped daemon marked it stalled or retried: ${events.join()}`,
    );
    assert.ok(liveTimers() <= timersBefore, `timers left after stop: ${liveTimers()} (before: ${timersBefore})`);
  } finally {
    open();
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
