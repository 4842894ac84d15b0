// The child extension leaves (its connection closes) after the daemon has already read a session that shows the
// cycle settled, without sending agent_end: the session alone then settles the cycle. Before, the close changed
// nothing and the task stayed `running` until the idle timeout (the bench saw it under load: the file's settling
// line was read while the connection's close was still queued). Real daemon, real socket, stub runtime.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type DaemonClient } from "../../src/client/index.js";
import { runDaemon } from "../../src/daemon/daemon.js";
import { fixtureEntries, stamped } from "../../bench/_util.js";
import { stubRuntime } from "../helpers/stub-runtime.js";
import { until } from "../helpers/wait.js";

const OWNER = "0b1ec0ffeec0ffee-childleft";

/** The crew-report recording (fixtures/sessions), re-stamped to now (after the prompt). */
const sessionText = (): string =>
  fixtureEntries("crew-report")
    .map((e) => stamped(e, Date.now()))
    .join("");

/** A real daemon whose stub runtime connects a child extension that takes each prompt; and an attached owner. */
async function startWithChild() {
  const dir = mkdtempSync(join(tmpdir(), "dsh-childleft-"));
  const home = join(dir, "home");
  const at: { child?: DaemonClient; spec?: { taskId: string; token: string } } = {};
  let taskDir = "";
  const d = await runDaemon(home, {
    logLevel: "silent",
    runtimeFactories: {
      headless: () =>
        stubRuntime({
          async launch(spec) {
            taskDir = spec.taskDir;
            let gotChild!: (c: DaemonClient) => void;
            const ready = new Promise<DaemonClient>((r) => (gotChild = r));
            const child = await connect(home, {
              kind: "child",
              taskId: spec.env.DSH_HERDR_TASK_ID!,
              token: spec.env.DSH_HERDR_TASK_TOKEN!,
              pushes: {
                "child.prompt": (p: { cycle: number }) =>
                  void ready.then(async (c) => {
                    await c.request("child.event", { type: "prompt_accepted", cycle: p.cycle });
                    // As the child extension does once pi starts the run.
                    await c.request("child.event", { type: "agent_start", cycle: p.cycle });
                  }),
              },
            });
            at.child = child;
            at.spec = { taskId: spec.env.DSH_HERDR_TASK_ID!, token: spec.env.DSH_HERDR_TASK_TOKEN! };
            gotChild(child);
            return { runtime: "headless", pid: process.pid };
          },
        }),
    },
  });
  const settled: { taskId: string; card: { status: string } }[] = [];
  const owner = await connect(home, {
    kind: "owner",
    ownerId: OWNER,
    pushes: { "owner.delivery": (p: { taskId: string; card: { status: string } }) => void settled.push(p) },
  });
  await owner.request("owner.attach", {});
  const stop = async () => {
    owner.close();
    at.child?.close();
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  return { dir, home, d, owner, settled, at, taskDir: () => taskDir, stop };
}

/** Spawn a headless task and wait until its child took the prompt (the task reads running). */
async function spawnRunning(owner: DaemonClient, dir: string): Promise<string> {
  const { taskId } = await owner.request("task.spawn", {
    cwd: dir,
    prompt: "p",
    model: "m/x",
    runtime: "headless",
  });
  await until(
    "the prompt accepted",
    async () => ((await owner.request("task.get", { taskId })).status === "running" ? true : undefined),
    20_000,
  );
  return taskId;
}

test("a child that leaves after its session settled the cycle (no agent_end) settles it from the session", async () => {
  const { dir, owner, settled, at, taskDir: dirOf, stop } = await startWithChild();
  try {
    const taskId = await spawnRunning(owner, dir);
    const taskDir = dirOf();
    const session = join(taskDir, "session.jsonl");
    writeFileSync(session, sessionText());
    const size = statSync(session).size;
    // The daemon has read every line (its record carries the offset) while the extension is still connected.
    await until(
      "the session read to its end",
      () => {
        const rec = JSON.parse(readFileSync(join(taskDir, "task.json"), "utf8")) as { sessionOffset?: number };
        return rec.sessionOffset === size ? true : undefined;
      },
      20_000,
    );
    // With the extension connected the daemon waits for its agent_end (it knows the retry settings).
    assert.equal((await owner.request("task.get", { taskId })).status, "running");
    assert.equal(settled.length, 0);

    at.child!.close();
    await until("the settled delivery", () => (settled.length > 0 ? true : undefined), 20_000);
    assert.equal(settled[0]!.taskId, taskId);
    assert.equal(settled[0]!.card.status, "completed");
    assert.equal((await owner.request("task.get", { taskId })).status, "completed");
  } finally {
    await stop();
  }
});

// A child that takes its prompt and leaves while the task goes on (the session alone tells the rest, as with a
// child whose extension is gone): the daemon used to keep the closed connection, its socket and buffers for the
// task's life, through the record of which connection the prompt went to. 1,000 such tasks held ~2.6 MB of heap.
test("a child that leaves after taking its prompt: the running task holds no reference to its closed connection", async () => {
  const { dir, d, owner, at, stop } = await startWithChild();
  try {
    const taskId = await spawnRunning(owner, dir);
    const runner = d.supervisor.tasks.get(taskId)!;
    const conn = runner.child;
    assert.ok(conn, "the child's connection is known while it is open");
    assert.equal(runner.promptPushed?.child, conn, "the prompt went to it");
    at.child!.close();
    await until("the close seen", () => (runner.child === undefined ? true : undefined), 20_000);
    const held = Object.entries(runner).filter(([, v]) => v === conn || (v as { child?: unknown })?.child === conn);
    assert.deepEqual(
      held.map(([k]) => k),
      [],
      "no field of the runner names the closed connection",
    );
    assert.equal((await owner.request("task.get", { taskId })).status, "running");
  } finally {
    await stop();
  }
});

test("a child connection that a newer one replaced: its close lets it go too", async () => {
  const { dir, home, d, owner, at, stop } = await startWithChild();
  let second: DaemonClient | undefined;
  try {
    const taskId = await spawnRunning(owner, dir);
    const runner = d.supervisor.tasks.get(taskId)!;
    const first = runner.child;
    assert.equal(runner.promptPushed?.child, first, "the prompt went to the first connection");
    // The extension connects again (a reload of pi's extensions) before the first connection's close is seen.
    second = await connect(home, { kind: "child", taskId: at.spec!.taskId, token: at.spec!.token });
    await until("the newer connection taken", () => (runner.child !== first ? true : undefined), 20_000);
    at.child!.close();
    await until(
      "the closed first connection let go",
      () => (runner.promptPushed === undefined ? true : undefined),
      5_000,
    );
    assert.notEqual(runner.child, undefined, "the newer connection stays the task's child");
  } finally {
    second?.close();
    await stop();
  }
});
