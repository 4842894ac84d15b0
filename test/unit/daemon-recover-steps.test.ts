// recoverySteps: what a restarted daemon hands the task's runner for each recovery plan, in order (the events for
// the machine and the acts outside it), with what it puts right itself (an unused worktree, a relaunch's leftover
// child, the prompt read back). Plain objects stand for the task and its ports.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RecoveryPlan } from "../../src/core/lifecycle/recovery-plan.js";
import type { CycleEvent, FoundCycle } from "../../src/core/lifecycle/task-cycle.js";
import type { Runtime } from "../../src/runtime/types.js";
import { recoverySteps, type RecoveringTask } from "../../src/daemon/recover/recover-apply.js";
import { branchFor } from "../../src/daemon/ports/git-port.js";
import { followUpPath, type TaskRecord } from "../../src/daemon/task/record.js";
import type { RecoveryStep, TaskPorts } from "../../src/daemon/task/runner-types.js";
import { TaskRunner } from "../../src/daemon/task/task-runner.js";

type Fake = {
  task: RecoveringTask;
  runtime: Runtime;
  dir: string;
  /** What the fakes were asked, in order. */
  calls: string[];
  cleanup(): void;
};

function fake(rec: Partial<TaskRecord> = {}, slot: () => Promise<unknown> = () => Promise.resolve({})): Fake {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), "dsh-recover-steps-")));
  const calls: string[] = [];
  const record = {
    taskId: "tmg3k2a1b2c3",
    cycle: 1,
    cwd: dir,
    workdir: join(dir, "wt"),
    status: "running",
    timing: { createdAt: 0 },
    ...rec,
  } as TaskRecord;
  const ports = {
    store: {
      readPrompt: async () => "the first prompt",
      taskPaths: () => ({ dir }),
    },
    git: {
      removeUnusedWorktree: async (repo: string, path: string, branch: string) =>
        void calls.push(`remove ${repo} ${path} ${branch}`),
    },
    env: { home: join(dir, "home") },
    slot: {
      acquire: () => {
        calls.push("acquire");
        return slot();
      },
      holds: () => false,
      release: () => undefined,
    },
    log: { warn: () => undefined, info: () => undefined, debug: () => undefined, error: () => undefined },
  } as unknown as RecoveringTask["ports"];
  const task: RecoveringTask = {
    rec: record,
    journal: async (e) => void calls.push(`journal ${e.type}`),
    ports,
  };
  const runtime = {
    close: async () => void calls.push("close child"),
  } as unknown as Runtime;
  return { task, runtime, dir, calls, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A step as the table reads it: an event by its type (and found), an act by its name. */
function shown(steps: RecoveryStep[], runtime: Runtime): string[] {
  return steps.map((s) => {
    if ("feed" in s) {
      const ev = s.feed;
      if (ev.type === "restored") return `restored ${ev.found.found} alive=${ev.childAlive}`;
      return ev.type === "timer_fired" ? `timer_fired ${ev.kind}` : ev.type;
    }
    if ("feedWhen" in s) return "later: slot";
    if (s.do === "watch_runtime") {
      assert.equal(s.runtime, runtime, "the task's own runtime is watched");
      return "watch_runtime";
    }
    if (s.do === "set_prompt") return `set_prompt ${s.prompt.cycle}: ${s.prompt.text}`;
    return s.do;
  });
}

const running: FoundCycle = { found: "prompt_out", cycle: 1 };
const settled: FoundCycle = {
  found: "settled",
  cycle: 1,
  reason: { kind: "settled_before_crash" },
  status: "completed",
};

const table: { plan: RecoveryPlan; alive: boolean; steps: string[] }[] = [
  { plan: { kind: "finish_close", closePane: true }, alive: false, steps: [] },
  {
    plan: { kind: "finish_abort", timeout: false },
    alive: true,
    steps: ["resume", "restored prompt_out alive=true", "abort", "wait_chain"],
  },
  {
    plan: { kind: "finish_abort", timeout: true },
    alive: false,
    steps: ["resume", "restored prompt_out alive=false", "timer_fired timeout", "wait_chain"],
  },
  {
    plan: { kind: "keep_settled", found: settled },
    alive: true,
    steps: ["watch_runtime", "restored settled alive=true", "announce_settled"],
  },
  {
    plan: { kind: "keep_settled", found: settled },
    alive: false,
    steps: ["child_ended", "restored settled alive=false", "announce_settled"],
  },
  {
    plan: { kind: "failed_before_prompt" },
    alive: false,
    steps: ["child_ended", "restored prompt_pending alive=false", "launch_failed", "wait_chain"],
  },
  {
    plan: { kind: "push_prompt", found: { found: "prompt_pending", cycle: 1 } },
    alive: true,
    steps: [
      "set_prompt 1: the first prompt",
      "hold_slot",
      "watch_runtime",
      "restored prompt_pending alive=true",
      "refresh",
    ],
  },
  {
    plan: { kind: "settle", found: running, reason: { kind: "settled_before_crash" }, journaled: false },
    alive: true,
    steps: ["hold_slot", "watch_runtime", "restored prompt_out alive=true", "settle_recovered", "wait_chain"],
  },
  {
    plan: { kind: "settle", found: running, reason: { kind: "settled_before_crash" }, journaled: true },
    alive: false,
    steps: ["hold_slot", "restored prompt_out alive=false", "settle_recovered", "wait_chain"],
  },
  {
    plan: { kind: "gone", found: running },
    alive: false,
    steps: ["hold_slot", "restored prompt_out alive=false", "mark_gone", "wait_chain"],
  },
  {
    plan: { kind: "resume_running", found: running },
    alive: true,
    steps: ["hold_slot", "watch_runtime", "restored prompt_out alive=true", "refresh"],
  },
];

for (const row of table)
  test(`recoverySteps: ${row.plan.kind}${"timeout" in row.plan ? ` timeout=${row.plan.timeout}` : ""} alive=${row.alive}`, async () => {
    const f = fake();
    try {
      const steps = await recoverySteps(f.task, row.plan, f.runtime, row.alive, undefined);
      assert.deepEqual(shown(steps, f.runtime), row.steps);
      assert.deepEqual(f.calls, [], "nothing outside the steps is done for this plan (the slot is held by the runner)");
    } finally {
      f.cleanup();
    }
  });

test("recoverySteps: the events carry the plan's facts (the found cycle, the journaled settle reason, the failure)", async () => {
  const f = fake();
  try {
    const reason = { kind: "settled_before_crash" } as const;
    const settle = await recoverySteps(
      f.task,
      { kind: "settle", found: running, reason, journaled: true },
      f.runtime,
      false,
      undefined,
    );
    const feeds = settle.flatMap((s) => ("feed" in s ? [s.feed] : []));
    assert.deepEqual(feeds, [
      { type: "restored", found: running, childAlive: false },
      { type: "settle_recovered", reason, journaled: true },
    ]);
    const failed = await recoverySteps(f.task, { kind: "failed_before_prompt" }, f.runtime, false, undefined);
    const launchFailed = failed.flatMap((s) => ("feed" in s && s.feed.type === "launch_failed" ? [s.feed] : []));
    assert.equal(launchFailed[0]?.code, "AGENT_STALLED");
  } finally {
    f.cleanup();
  }
});

test("recoverySteps: a pushed follow-up prompt is the follow-up's text (cycle 2), read back from its file", async () => {
  const f = fake({ cycle: 2 });
  try {
    writeFileSync(followUpPath(f.dir, 2), "the follow-up");
    const steps = await recoverySteps(
      f.task,
      { kind: "push_prompt", found: { found: "prompt_pending", cycle: 2 } },
      f.runtime,
      true,
      undefined,
    );
    assert.equal(shown(steps, f.runtime)[0], "set_prompt 2: the follow-up");
  } finally {
    f.cleanup();
  }
});

test("recoverySteps: relaunching a follow-up ends the leftover child first, and asks for the slot only at its step", async () => {
  for (const [slot, expected] of [
    [() => Promise.resolve({}), { type: "slot_granted" }],
    [
      () => Promise.reject(new Error("queue full")),
      { type: "launch_failed", code: "CONCURRENCY_LIMIT", message: "Error: queue full" },
    ],
  ] as const) {
    const f = fake({ cycle: 2, handle: { runtime: "headless", pid: 42 } as TaskRecord["handle"] }, slot);
    try {
      writeFileSync(followUpPath(f.dir, 2), "the follow-up");
      const steps = await recoverySteps(f.task, { kind: "relaunch_follow_up", cycle: 2 }, f.runtime, false, undefined);
      assert.deepEqual(shown(steps, f.runtime), [
        "set_prompt 2: the follow-up",
        "restored follow_up alive=false",
        "refresh",
        "later: slot",
      ]);
      assert.deepEqual(f.calls, ["close child"], "the slot is not asked for before the runner reaches its step");
      const later = steps.at(-1)!;
      assert.ok("feedWhen" in later);
      const ev: CycleEvent = await later.feedWhen();
      assert.deepEqual(ev, expected);
      assert.deepEqual(f.calls, ["close child", "acquire"]);
    } finally {
      f.cleanup();
    }
  }
});

test("recoverySteps: starting again drops the unused worktree, resets the workdir, and starts in the background", async () => {
  const f = fake({ worktree: { path: "/w/repo-t1", branch: "dsh/t1" } as TaskRecord["worktree"] });
  try {
    execFileSync("git", ["init", "-q", f.dir]);
    const steps = await recoverySteps(f.task, { kind: "start_again" }, f.runtime, false, "/w/journaled");
    assert.deepEqual(shown(steps, f.runtime), ["refresh", "start"]);
    assert.deepEqual(f.calls, [`remove ${f.dir} /w/repo-t1 ${branchFor("tmg3k2a1b2c3")}`]);
    assert.equal(f.task.rec.workdir, f.dir);
    assert.equal(f.task.rec.worktree, undefined);
    assert.equal(f.task.rec.status, "starting");
  } finally {
    f.cleanup();
  }
});

test("recoverySteps: starting again with no worktree in task.json drops the one journaled before the launch", async () => {
  const f = fake();
  try {
    execFileSync("git", ["init", "-q", f.dir]);
    await recoverySteps(f.task, { kind: "start_again" }, f.runtime, false, "/w/journaled");
    assert.deepEqual(f.calls, [`remove ${f.dir} /w/journaled ${branchFor("tmg3k2a1b2c3")}`]);
  } finally {
    f.cleanup();
  }
});

test("TaskRunner.restore: the steps in order, each awaited; an event that comes later (a queued slot) is not awaited", async () => {
  const acquired: string[] = [];
  let grant: (ev: CycleEvent) => void = () => undefined;
  const ports = {
    config: () => ({ idleChildMs: 60_000, readinessTimeoutMs: 60_000 }),
    clock: { now: () => 0, setTimer: () => ({}), clearTimer: () => undefined },
    log: { debug: () => undefined, warn: () => undefined, error: () => undefined, info: () => undefined },
    slot: {
      acquire: () => {
        acquired.push("acquire");
        throw new Error("queue full"); // holding the slot again: the cycle runs anyway
      },
    },
    stopped: () => false,
  } as unknown as TaskPorts;
  const runner = new TaskRunner({ taskId: "tmg3k2a1b2c3", cycle: 1, timing: { createdAt: 0 } } as TaskRecord, ports);
  await runner.restore([
    { feed: { type: "steers_restored", steers: [], last: 3 } },
    { do: "set_prompt", prompt: { cycle: 1, text: "the prompt" } },
    { do: "child_ended" },
    { do: "hold_slot" },
    { feedWhen: () => new Promise<CycleEvent>((resolve) => (grant = resolve)) },
  ]);
  assert.equal(runner.state.lastSteer, 3, "the event was fed");
  assert.deepEqual(runner.prompt, { cycle: 1, text: "the prompt" });
  assert.equal(runner.childEnded, true);
  assert.deepEqual(acquired, ["acquire"], "a full queue while holding the slot again does not stop the recovery");
  grant({ type: "steers_restored", steers: [], last: 5 });
  await new Promise((r) => setImmediate(r));
  assert.equal(runner.state.lastSteer, 5, "the later event is fed when it comes");
});
