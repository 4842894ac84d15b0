// The readiness barrier when the child is faster than the daemon: a child that says hello and takes its prompt
// while the daemon is still journaling the launch is ready, not stalled (it used to wait readinessTimeoutMs, get
// marked stalled and have a second child launched). Real daemon, real socket; the stub runtime's launch plays the
// child extension before it returns. Time moves only on the daemon's fake clock (no sleeps).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type DaemonClient } from "../../src/client/index.js";
import { runDaemon } from "../../src/daemon/daemon.js";
import type { LaunchSpec, Runtime } from "../../src/runtime/types.js";
import { FakeClock } from "../helpers/fake-clock.js";
import { stubRuntime } from "../helpers/stub-runtime.js";
import { TaskStore } from "../../src/store/task-store.js";
import { until } from "../helpers/wait.js";

function fastChildRuntime(home: string, launches: LaunchSpec[], children: DaemonClient[], finish: boolean): Runtime {
  return stubRuntime({
    async launch(spec) {
      launches.push(spec);
      // The prompt may come in the same chunk as the hello reply: the handler goes to connect, as in the extension.
      let prompted!: (cycle: number) => void;
      const promptCycle = new Promise<number>((resolve) => (prompted = resolve));
      const child = await connect(home, {
        kind: "child",
        taskId: spec.env.DSH_HERDR_TASK_ID!,
        token: spec.env.DSH_HERDR_TASK_TOKEN!,
        pushes: { "child.prompt": (p: { cycle: number }) => prompted(p.cycle) },
      });
      children.push(child);
      const cycle = await promptCycle;
      await child.request("child.event", { type: "prompt_accepted", cycle });
      // As the child extension does once pi starts the run (before that the task is still starting).
      await child.request("child.event", { type: "agent_start", cycle });
      if (finish) {
        // ...and the whole cycle: the report, then the end of pi's agent loop.
        await child.request("child.report", { cycle, outcome: "completed", report: "done fast" });
        await child.request("child.event", { type: "agent_end", cycle, stopReason: "stop", willRetry: false });
      }
      return { runtime: "headless", pid: process.pid };
    },
  });
}

test("a child that takes its prompt before the launch call returns is ready: no stall, one launch", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-ready-"));
  const home = join(dir, "home");
  const launches: LaunchSpec[] = [];
  const children: DaemonClient[] = [];
  const runtime = fastChildRuntime(home, launches, children, false);
  const clock = new FakeClock();
  const d = await runDaemon(home, {
    logLevel: "silent",
    runtimeFactories: { headless: () => runtime },
    config: { readinessTimeoutMs: 500 },
    clock,
  });
  try {
    const cli = await connect(home, { kind: "cli" });
    const { taskId } = await cli.request("task.spawn", {
      cwd: dir,
      prompt: "p",
      model: "m/x",
      runtime: "headless",
    });
    const live = d.supervisor.tasks.get(taskId)!;
    await until(
      "the launch journaled and returned",
      () => live.rec.handle !== undefined && live.state.phase.name === "running",
      10_000,
      10,
    );
    await live.effectsDone;
    assert.ok(!live.armedTimers().includes("readiness"), `no readiness barrier left: ${live.armedTimers()}`);
    clock.advance(1500); // three times readinessTimeoutMs
    await live.effectsDone;
    await live.chain;
    const events = (await (await TaskStore.open(home)).readEvents(taskId)).map((e) => e.type);
    assert.ok(!events.includes("stalled"), events.join());
    assert.equal(launches.length, 1, "one child launched");
    assert.equal((await cli.request("task.get", { taskId })).status, "running");
    cli.close();
  } finally {
    for (const c of children) c.close();
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a child that finishes its whole cycle before the launch call returns: completed, no stall, no timeout later", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-ready-"));
  const home = join(dir, "home");
  const launches: LaunchSpec[] = [];
  const children: DaemonClient[] = [];
  const runtime = fastChildRuntime(home, launches, children, true);
  const clock = new FakeClock();
  const d = await runDaemon(home, {
    logLevel: "silent",
    runtimeFactories: { headless: () => runtime },
    config: { readinessTimeoutMs: 500 },
    clock,
  });
  try {
    const cli = await connect(home, { kind: "cli" });
    const { taskId } = await cli.request("task.spawn", {
      cwd: dir,
      prompt: "p",
      model: "m/x",
      runtime: "headless",
      timeoutMs: 1000,
    });
    const live = d.supervisor.tasks.get(taskId)!;
    await until(
      "the settled cycle",
      () => live.state.phase.name === "settled" && live.rec.handle !== undefined,
      10_000,
      10,
    );
    await live.effectsDone;
    await live.chain;
    assert.deepEqual(
      live.armedTimers().filter((k) => k !== "idle"),
      [],
      "a settled cycle keeps no timeout or readiness timer",
    );
    clock.advance(2000); // past readinessTimeoutMs and the task's timeoutMs
    await live.effectsDone;
    await live.chain;
    const events = (await (await TaskStore.open(home)).readEvents(taskId)).map((e) => e.type);
    assert.ok(!events.includes("stalled") && !events.includes("interrupted"), events.join());
    assert.equal(launches.length, 1, "one child launched");
    const r = await cli.request("task.get", { taskId });
    assert.equal(r.status, "completed", JSON.stringify(r));
    cli.close();
  } finally {
    for (const c of children) c.close();
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a task closed while its launch call runs: the child that call started is ended, not left running", {
  timeout: 30_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-ready-"));
  const home = join(dir, "home");
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const launched: number[] = [];
  const closed: number[] = [];
  let next = 1000;
  const runtime = stubRuntime({
    async launch() {
      const pid = next++;
      launched.push(pid);
      await gate;
      return { runtime: "headless", pid };
    },
    close: async (h) => void closed.push(h.pid!),
  });
  const d = await runDaemon(home, {
    logLevel: "silent",
    runtimeFactories: { headless: () => runtime },
    config: { readinessTimeoutMs: 1500 },
  });
  try {
    const cli = await connect(home, { kind: "cli" });
    const { taskId } = await cli.request("task.spawn", {
      cwd: dir,
      prompt: "p",
      model: "m/x",
      runtime: "headless",
    });
    await until("the launch call", () => launched.length > 0, 10_000, 10);
    assert.equal(launched.length, 1);
    const r = await cli.request("task.close", { taskId }); // the launch call is still running
    assert.equal(r.status, "closed");
    open();
    await until("the late child ended", () => closed.includes(launched[0]!), 5000, 10).catch(() => undefined);
    assert.ok(
      closed.includes(launched[0]!),
      `the late child ${launched[0]} was ended (closed: ${JSON.stringify(closed)})`,
    );
    assert.equal(launched.length, 1, "and not launched again");
    cli.close();
  } finally {
    open();
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
