// A parked child's old pane may report its exit late: after respond relaunched pi, while the new child runs. That
// event belongs to the old handle and must not settle the new cycle as `gone` (CI saw it on tmux with pi 1.x: the
// old pane's watcher polled after the relaunch). Real daemon and socket; the stub runtime delivers the late event;
// the idle timer runs on the daemon's fake clock.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type DaemonClient } from "../../src/client/index.js";
import { runDaemon } from "../../src/daemon/daemon.js";
import type { RuntimeEvent } from "../../src/runtime/types.js";
import { TaskStore } from "../../src/store/task-store.js";
import { FakeClock } from "../helpers/fake-clock.js";
import { stubRuntime } from "../helpers/stub-runtime.js";
import { until } from "../helpers/wait.js";

test("a late exit event from a parked child's old pane does not end the relaunched cycle", {
  timeout: 30_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-relaunch-"));
  const home = join(dir, "home");
  const children: DaemonClient[] = [];
  const flows: Promise<void>[] = [];
  const watchers = new Map<number, (e: RuntimeEvent) => void>();
  let next = 2_000_000;
  let launches = 0;
  const runtime = stubRuntime({
    async launch(spec) {
      const pid = next++;
      const n = ++launches;
      // The prompt may come in the same chunk as the hello reply: the handler goes to connect, as in the extension,
      // and runs once the client is in hand.
      let gotChild!: (c: DaemonClient) => void;
      const ready = new Promise<DaemonClient>((r) => (gotChild = r));
      const onPrompt = (p: { cycle: number }) => {
        const flow = (async () => {
          const child = await ready;
          await child.request("child.event", { type: "prompt_accepted", cycle: p.cycle });
          // The second child runs: now the first child's pane reports that it exited (it was parked). An event the
          // daemon took for the new child would settle the cycle at once (gone): it runs on.
          if (n === 2) {
            watchers.get(2_000_000)?.({ type: "exited", exit: { code: 0 } });
            assert.equal(d.supervisor.tasks.get(spec.taskId)?.state.phase.name, "running");
          }
          await child.request("child.report", { cycle: p.cycle, outcome: "completed", report: `cycle ${p.cycle}` });
          await child.request("child.event", {
            type: "agent_end",
            cycle: p.cycle,
            stopReason: "stop",
            willRetry: false,
          });
        })();
        flows.push(flow);
      };
      const child = await connect(home, {
        kind: "child",
        taskId: spec.env.DSH_HERDR_TASK_ID!,
        token: spec.env.DSH_HERDR_TASK_TOKEN!,
        pushes: { "child.prompt": onPrompt },
      });
      children.push(child);
      gotChild(child);
      return { runtime: "headless", pid };
    },
    // The watcher of each handle stays reachable after unwatch: a runtime may deliver one event late.
    watch: (h, onEvent) => {
      watchers.set(h.pid!, onEvent);
      return () => undefined;
    },
  });
  const clock = new FakeClock();
  const d = await runDaemon(home, {
    logLevel: "silent",
    runtimeFactories: { headless: () => runtime },
    config: { readinessTimeoutMs: 5000, idleChildMs: 300 },
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
    const store = await TaskStore.open(home);
    const w1 = await cli.request("task.wait", {
      taskIds: [taskId],
      timeoutMs: 10_000,
    });
    assert.equal(w1.results[0]!.status, "completed");
    const live = d.supervisor.tasks.get(taskId)!;
    await until("the idle timer", () => live.armedTimers().includes("idle"), 10_000, 10);
    clock.advance(299);
    assert.ok(!(await store.readEvents(taskId)).some((e) => e.type === "parked"), "not parked before idleChildMs");
    clock.advance(1);
    await live.effectsDone;
    assert.ok(
      (await store.readEvents(taskId)).some((e) => e.type === "parked"),
      "the idle child was parked",
    );
    await cli.request("task.respond", { taskId, message: "go on" });
    const w2 = await cli.request("task.wait", {
      taskIds: [taskId],
      timeoutMs: 10_000,
    });
    assert.equal(launches, 2, "respond relaunched the parked child once");
    assert.equal(w2.results[0]!.status, "completed", JSON.stringify(w2.results[0]));
    await Promise.all(flows);
    cli.close();
  } finally {
    for (const c of children) c.close();
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
