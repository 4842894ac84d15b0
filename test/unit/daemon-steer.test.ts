// Steering against a child the test drives (real daemon, real socket, stub runtime), for the orders a real pi makes
// rare: pi takes the steer (respond answers steered, nothing else moves); the child's run ended just before the steer
// came (the child answers steer_missed, the cycle settles completed, and the message becomes cycle 2's prompt: the
// respond says so). A daemon crash around a steer is test/reliability/steer-crash.test.ts (real pi).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type DaemonClient } from "../../src/client/index.js";
import { runDaemon, type RunningDaemon } from "../../src/daemon/daemon.js";
import type { RuntimeHandle } from "../../src/runtime/types.js";
import { stubRuntime } from "../helpers/stub-runtime.js";
import { until } from "../helpers/wait.js";

type Steer = { cycle: number; n: number; text: string };

interface FakeChild {
  prompts: { cycle: number; text: string }[];
  steers: Steer[];
  client?: DaemonClient;
  /** What the child does with a pushed steer. */
  onSteer: (c: DaemonClient, s: Steer) => Promise<void>;
}

function journal(home: string, taskId: string): { type: string; [k: string]: unknown }[] {
  return readFileSync(join(home, "tasks", taskId, "events.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
}

async function start(home: string, child: FakeChild): Promise<RunningDaemon> {
  const attach = async (env: Record<string, string>) => {
    const c = await connect(home, {
      kind: "child",
      taskId: env.DSH_HERDR_TASK_ID!,
      token: env.DSH_HERDR_TASK_TOKEN!,
      pushes: {
        "child.prompt": (p: { cycle: number; text: string }) => {
          child.prompts.push(p);
          void (async () => {
            await c.request("child.event", { type: "prompt_accepted", cycle: p.cycle });
            await c.request("child.event", { type: "agent_start", cycle: p.cycle });
          })().catch(() => undefined); // the test may end first
        },
        "child.steer": (s: Steer) => {
          child.steers.push(s);
          void child.onSteer(c, s).catch(() => undefined);
        },
      },
    });
    child.client = c;
  };
  return runDaemon(home, {
    logLevel: "silent",
    runtimeFactories: {
      headless: () =>
        stubRuntime({
          async launch(spec) {
            await attach(spec.env);
            return { runtime: "headless", pid: process.pid } as RuntimeHandle;
          },
        }),
    },
  });
}

async function spawnRunning(cli: DaemonClient, dir: string): Promise<string> {
  const { taskId } = await cli.request("task.spawn", {
    cwd: dir,
    prompt: "p",
    model: "m/x",
    runtime: "headless",
  });
  await until(
    "the cycle running",
    async () => ((await cli.request("task.get", { taskId })).status === "running" ? true : undefined),
    20_000,
  );
  return taskId;
}

/** The child ends its cycle with an accepted report, as the extension does at agent_end. */
async function endCycle(c: DaemonClient, cycle: number, report: string): Promise<void> {
  await c.request("child.report", { cycle, outcome: "completed", report });
  await c.request("child.event", { type: "agent_end", cycle, stopReason: "stop", willRetry: false });
}

test("pi takes the steer: respond answers steered at once; the cycle goes on and settles once", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-steer-"));
  const home = join(dir, "home");
  const child: FakeChild = {
    prompts: [],
    steers: [],
    onSteer: async (c, s) => void (await c.request("child.event", { type: "steer_taken", cycle: s.cycle, n: s.n })),
  };
  const d = await start(home, child);
  const cli = await connect(home, { kind: "cli" });
  try {
    const taskId = await spawnRunning(cli, dir);
    const r = await cli.request("task.respond", { taskId, message: "use blue", steer: true });
    assert.deepEqual(r, { taskId, subagent_id: taskId, cycle: 1, steered: true });
    assert.deepEqual(child.steers, [{ cycle: 1, n: 1, text: "use blue" }]);
    // A second steer is the next number; pi took both.
    const r2 = await cli.request("task.respond", { taskId, message: "and green", steer: true });
    assert.deepEqual(r2, { taskId, subagent_id: taskId, cycle: 1, steered: true });
    assert.deepEqual(
      child.steers.map((s) => s.n),
      [1, 2],
    );
    await endCycle(child.client!, 1, "painted");
    await until(
      "completed",
      async () => ((await cli.request("task.get", { taskId })).status === "completed" ? true : undefined),
      20_000,
    );
    const types = journal(home, taskId).map((e) => e.type);
    assert.deepEqual(
      types.filter((t) => t.startsWith("steer")),
      ["steered", "steer_taken", "steered", "steer_taken"],
    );
    assert.equal(types.filter((t) => t === "settle").length, 1);
    assert.equal(child.prompts.length, 1, "no new cycle");
  } finally {
    cli.close();
    child.client?.close();
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the run ended just before the steer came: the cycle settles as it was, the message starts cycle 2 (respond says late)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-steer-"));
  const home = join(dir, "home");
  const child: FakeChild = {
    prompts: [],
    steers: [],
    // As the extension does when its run has ended: the ending went out first, then the steer is answered missed.
    onSteer: async (c, s) => {
      await endCycle(c, s.cycle, "done before the steer");
      await c.request("child.event", { type: "steer_missed", cycle: s.cycle, n: s.n });
    },
  };
  const d = await start(home, child);
  const cli = await connect(home, { kind: "cli" });
  try {
    const taskId = await spawnRunning(cli, dir);
    const r = await cli.request("task.respond", { taskId, message: "STEER late words", steer: true });
    assert.deepEqual(r, { taskId, subagent_id: taskId, cycle: 2, late: true });
    await until("cycle 2's prompt", () => (child.prompts.length === 2 ? true : undefined), 20_000);
    assert.deepEqual(child.prompts[1], { cycle: 2, text: "STEER late words" });
    const j = journal(home, taskId);
    const types = j.map((e) => e.type);
    assert.ok(types.indexOf("settle") < types.indexOf("steer_missed"), types.join(" "));
    assert.ok(types.indexOf("steer_missed") < types.indexOf("respond"), types.join(" "));
    // Cycle 1's settled result carries no warning: the person who sent the message was told, and it went on.
    const settled1 = j.find((e) => e.type === "status" && e.settled === true && e.cycle === 1);
    assert.ok(settled1, "cycle 1 settled");
    const result = JSON.parse(readFileSync(join(home, "tasks", taskId, "result.json"), "utf8")) as {
      warnings?: string[];
    };
    assert.equal((result.warnings ?? []).filter((w) => /did not reach the child/.test(w)).length, 0);
  } finally {
    cli.close();
    child.client?.close();
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
