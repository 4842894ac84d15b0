// The daemon's timers, driven by a fake clock (no sleeps): the readiness barrier and its one stall retry (the machine's
// attempt counts, the second stall fails the start with pi's words or AGENT_STALLED), an exit before the prompt as a
// stall, the task's timeout, idle parking, and a follow-up typed when the child's extension never comes back. Real
// daemon on a temp home and a real Unix socket; a stub runtime plays the child (or stays silent).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type DaemonClient } from "../../src/client/index.js";
import { runDaemon, type RunningDaemon } from "../../src/daemon/daemon.js";
import type { LaunchSpec, Runtime, RuntimeEvent, RuntimeHandle } from "../../src/runtime/types.js";
import { TaskStore } from "../../src/store/task-store.js";
import { FakeClock } from "../helpers/fake-clock.js";
import { stubRuntime } from "../helpers/stub-runtime.js";
import { until } from "../helpers/wait.js";

const READY_MS = 1000;

interface Rig {
  home: string;
  clock: FakeClock;
  d: RunningDaemon;
  cli: DaemonClient;
  launches: LaunchSpec[];
  closed: number[];
  typed: string[];
  watchers: Map<number, (e: RuntimeEvent) => void>;
  spawn(extra?: Record<string, unknown>): Promise<string>;
  events(taskId: string): Promise<{ type: string; [k: string]: unknown }[]>;
  done(): Promise<void>;
}

/**
 * A daemon on a fake clock with a stub runtime; `child(n, spec)` plays the n-th launched child (or returns nothing: a
 * child that never says hello).
 */
async function rig(
  child: (n: number, spec: LaunchSpec, home: string) => Promise<void> | void,
  over: Partial<Runtime> = {},
  config: Record<string, unknown> = {},
): Promise<Rig> {
  const dir = mkdtempSync(join(tmpdir(), "dsh-timers-"));
  const home = join(dir, "home");
  const clock = new FakeClock();
  const launches: LaunchSpec[] = [];
  const closed: number[] = [];
  const typed: string[] = [];
  const watchers = new Map<number, (e: RuntimeEvent) => void>();
  let pid = 3_000_000;
  const runtime = stubRuntime({
    async launch(spec) {
      launches.push(spec);
      const handle: RuntimeHandle = { runtime: "headless", pid: pid++ };
      await child(launches.length, spec, home);
      return handle;
    },
    close: async (h) => void closed.push(h.pid!),
    sendText: async (_h, text) => void typed.push(text),
    watch: (h, onEvent) => {
      watchers.set(h.pid!, onEvent);
      return () => watchers.delete(h.pid!);
    },
    ...over,
  });
  const d = await runDaemon(home, {
    logLevel: "silent",
    runtimeFactories: { headless: () => runtime },
    config: { readinessTimeoutMs: READY_MS, idleChildMs: 60_000, ...config },
    clock,
  });
  const cli = await connect(home, { kind: "cli" });
  const store = await TaskStore.open(home, { groupCommit: false });
  return {
    home,
    clock,
    d,
    cli,
    launches,
    closed,
    typed,
    watchers,
    spawn: async (extra = {}) =>
      (
        await cli.request("task.spawn", {
          cwd: dir,
          prompt: "p",
          model: "m/x",
          runtime: "headless",
          ...extra,
        })
      ).taskId,
    events: async (taskId) => (await store.readEvents(taskId)) as { type: string; [k: string]: unknown }[],
    done: async () => {
      cli.close();
      await d.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Let the task's effects (journal records, the harvest) finish after the clock moved. */
async function settled(r: Rig, taskId: string): Promise<void> {
  const live = r.d.supervisor.tasks.get(taskId);
  if (!live) return;
  for (let i = 0; i < 3; i++) {
    await live.effectsDone;
    await live.chain;
  }
}

/** A child that says hello and runs each prompt it is pushed: accepted, started, reported, ended. */
function playing(children: DaemonClient[], finish = true) {
  return async (_n: number, spec: LaunchSpec, home: string) => {
    let gotChild!: (c: DaemonClient) => void;
    const ready = new Promise<DaemonClient>((r) => (gotChild = r));
    const run = async (cycle: number) => {
      const c = await ready;
      await c.request("child.event", { type: "prompt_accepted", cycle });
      await c.request("child.event", { type: "agent_start", cycle });
      if (!finish) return;
      await c.request("child.report", { cycle, outcome: "completed", report: `cycle ${cycle} done` });
      await c.request("child.event", { type: "agent_end", cycle, stopReason: "stop", willRetry: false });
    };
    const c = await connect(home, {
      kind: "child",
      taskId: spec.env.DSH_HERDR_TASK_ID!,
      token: spec.env.DSH_HERDR_TASK_TOKEN!,
      // A request cut off by the end of the test (its connection closed) is no failure of the daemon.
      pushes: { "child.prompt": (p: { cycle: number }) => void run(p.cycle).catch(() => undefined) },
    });
    children.push(c);
    gotChild(c);
  };
}

test("readiness: a silent child stalls at readinessTimeoutMs, is ended and launched once more; the second stall fails AGENT_STALLED", async () => {
  const r = await rig(() => undefined);
  try {
    const taskId = await r.spawn();
    const live = r.d.supervisor.tasks.get(taskId)!;
    await until("the first launch's barrier", () => live.armedTimers().includes("readiness"), 10_000, 10);
    assert.deepEqual(live.state.phase, { name: "awaiting_prompt", cycle: 1, attempt: 1 });
    r.clock.advance(READY_MS - 1);
    assert.equal(r.launches.length, 1, "no stall before readinessTimeoutMs");
    r.clock.advance(1);
    await until("the second launch's barrier", () => live.armedTimers().includes("readiness"), 10_000, 10);
    assert.deepEqual(live.state.phase, { name: "awaiting_prompt", cycle: 1, attempt: 2 }, "the attempt counts");
    assert.equal(r.launches.length, 2);
    assert.deepEqual(r.closed, [3_000_000], "the stalled child was ended");
    r.clock.advance(READY_MS);
    await until("the failed start", () => live.state.phase.name === "settled", 10_000, 10);
    await settled(r, taskId);
    const res = await r.cli.request("task.get", { taskId });
    assert.equal(res.status, "failed");
    assert.equal(res.error?.code, "AGENT_STALLED");
    assert.match(
      res.error!.message,
      /no sign of life twice \(no hello and prompt acceptance within readinessTimeoutMs \(1000 ms\)\)/,
    );
    const ev = await r.events(taskId);
    assert.deepEqual(
      ev.filter((e) => e.type === "stalled").map((e) => e.attempt),
      [1, 2],
    );
    assert.deepEqual(
      ev.filter((e) => e.type === "launched").map((e) => e.attempt),
      [1, 2],
    );
    r.clock.advance(10 * READY_MS);
    await settled(r, taskId);
    assert.equal(r.launches.length, 2, "never a third launch");
    assert.deepEqual(live.armedTimers(), [], "a failed start keeps no timer");
  } finally {
    await r.done();
  }
});

test("readiness: pi's own line for a start it refused (an unknown model) names the failure instead of a stall", async () => {
  const r = await rig(() => undefined, {
    readOutput: async () => 'Error: Model "x/nope" not found. Use --list-models to see available models.\n',
  });
  try {
    const taskId = await r.spawn();
    const live = r.d.supervisor.tasks.get(taskId)!;
    for (const attempt of [1, 2]) {
      await until(`attempt ${attempt}'s barrier`, () => live.armedTimers().includes("readiness"), 10_000, 10);
      r.clock.advance(READY_MS);
    }
    await until("the failed start", () => live.state.phase.name === "settled", 10_000, 10);
    await settled(r, taskId);
    const res = await r.cli.request("task.get", { taskId });
    assert.equal(res.error?.code, "MODEL_NOT_FOUND");
    assert.match(res.error!.message, /pi could not start the child: Model "x\/nope" not found/);
  } finally {
    await r.done();
  }
});

test("readiness: a child that exits before it takes its prompt is a stall too; the retry's child runs the cycle", async () => {
  const children: DaemonClient[] = [];
  const play = playing(children, false);
  const r = await rig((n, spec, home) => (n === 2 ? play(n, spec, home) : undefined));
  try {
    const taskId = await r.spawn();
    const live = r.d.supervisor.tasks.get(taskId)!;
    await until("the first launch watched", () => r.watchers.has(3_000_000), 10_000, 10);
    r.watchers.get(3_000_000)!({ type: "exited", exit: { code: 1 } });
    await until("the retry running", () => live.state.phase.name === "running", 10_000, 10);
    await settled(r, taskId);
    const stalled = (await r.events(taskId)).filter((e) => e.type === "stalled");
    assert.equal(stalled.length, 1);
    assert.match(String(stalled[0]!.error), /exited before it took its prompt/);
    assert.ok(!live.armedTimers().includes("readiness"), "the barrier is down once the prompt is taken");
    assert.ok(live.armedTimers().includes("timeout"));
  } finally {
    for (const c of children) c.close();
    await r.done();
  }
});

test("timeout: a cycle still running at timeoutMs is interrupted (TIMEOUT) and its child ended", async () => {
  const children: DaemonClient[] = [];
  const r = await rig(playing(children, false));
  try {
    const taskId = await r.spawn({ timeoutMs: 5000 });
    const live = r.d.supervisor.tasks.get(taskId)!;
    await until(
      "running",
      () => live.state.phase.name === "running" && live.armedTimers().includes("timeout"),
      10_000,
      10,
    );
    r.clock.advance(4999);
    assert.equal(live.state.phase.name, "running");
    r.clock.advance(1);
    assert.equal(live.state.phase.name, "settled");
    await settled(r, taskId);
    const res = await r.cli.request("task.get", { taskId });
    assert.equal(res.status, "interrupted");
    assert.equal(res.error?.code, "TIMEOUT");
    assert.deepEqual(r.closed, [3_000_000], "the child was ended");
    assert.deepEqual(live.armedTimers(), []);
  } finally {
    for (const c of children) c.close();
    await r.done();
  }
});

test("idle: a settled cycle's child is parked at idleChildMs (its verdict kept); respond relaunches pi", async () => {
  const children: DaemonClient[] = [];
  const r = await rig(playing(children), {}, { idleChildMs: 20_000 });
  try {
    const taskId = await r.spawn();
    const live = r.d.supervisor.tasks.get(taskId)!;
    await until("the idle timer", () => live.armedTimers().includes("idle"), 10_000, 10);
    await settled(r, taskId);
    r.clock.advance(19_999);
    assert.ok(!(await r.events(taskId)).some((e) => e.type === "parked"));
    r.clock.advance(1);
    await settled(r, taskId);
    assert.ok(
      (await r.events(taskId)).some((e) => e.type === "parked"),
      "parked",
    );
    assert.deepEqual(r.closed, [3_000_000]);
    assert.equal((await r.cli.request("task.get", { taskId })).status, "completed");
    await r.cli.request("task.respond", { taskId, message: "again" });
    await until(
      "the relaunched cycle settled",
      () => live.state.phase.name === "settled" && live.rec.cycle === 2,
      10_000,
      10,
    );
    assert.equal(r.launches.length, 2, "pi launched again on its session");
  } finally {
    for (const c of children) c.close();
    await r.done();
  }
});

test("follow-up: when the child's extension does not come back within readinessTimeoutMs, the follow-up is typed once", async () => {
  const children: DaemonClient[] = [];
  const r = await rig(playing(children));
  try {
    const taskId = await r.spawn();
    const live = r.d.supervisor.tasks.get(taskId)!;
    await until(
      "settled",
      () => live.state.phase.name === "settled" && live.state.phase.status !== undefined,
      10_000,
      10,
    );
    await settled(r, taskId);
    for (const c of children) c.close(); // the extension is gone (a reload, a crash of the extension)
    await until("the child gone from the daemon", () => live.child === undefined, 10_000, 10);
    await r.cli.request("task.respond", { taskId, message: "TYPE-ME" });
    await until("the follow-up timer", () => live.armedTimers().includes("follow_up"), 10_000, 10);
    r.clock.advance(READY_MS - 1);
    assert.deepEqual(r.typed, []);
    r.clock.advance(1);
    await until("typed", () => r.typed.length > 0, 10_000, 10);
    assert.deepEqual(r.typed, ["TYPE-ME"]);
    assert.equal(live.state.phase.name, "running");
    await settled(r, taskId);
    const sent = (await r.events(taskId)).filter((e) => e.type === "prompt_sent" && e.cycle === 2);
    assert.deepEqual(
      sent.map((e) => e.via),
      ["runtime"],
    );
    r.clock.advance(10 * READY_MS);
    assert.deepEqual(r.typed, ["TYPE-ME"], "typed once");
  } finally {
    await r.done();
  }
});
