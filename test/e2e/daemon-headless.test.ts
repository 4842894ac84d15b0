import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { SCRIPT, startHarness, type Harness } from "./daemon-harness.js";
import { defineRuntimeScenarios } from "./scenarios.js";
import type { DshError } from "../../src/core/errors.js";

let h: Harness;
before(async () => {
  h = await startHarness(SCRIPT, { runtime: "headless" });
});
after(async () => {
  await h?.close();
});

defineRuntimeScenarios(
  () => h,
  "headless",
  async (hh, taskId) => {
    // SIGKILL the pi process itself (not its wrapper): the runtime sees the exit.
    process.kill(hh.daemon.supervisor.tasks.get(taskId)!.rec.handle!.pid!, "SIGKILL");
  },
);

test("headless: 6 spawns with maxParallelAgents 2 never run more than 2; queued ones report queuedMs; queue limits give CONCURRENCY_LIMIT", async () => {
  const cfg = h.daemon.supervisor.deps.config();
  const saved = { ...cfg };
  Object.assign(cfg, { maxParallelAgents: 2, maxQueuedAgents: 10 });
  let peak = 0;
  const off = h.daemon.supervisor.onStatus(() => (peak = Math.max(peak, h.daemon.supervisor.admission.running)));
  try {
    const spawned = await Promise.all(
      Array.from({ length: 6 }, (_, i) => h.spawn({ prompt: `MARK-QUICK number ${i}`, runtime: "headless" })),
    );
    assert.equal(spawned.filter((s) => s.queued).length, 4);
    const results = await Promise.all(spawned.map((s) => h.wait(s.taskId, 180_000)));
    assert.ok(
      results.every((r) => r.status === "completed"),
      JSON.stringify(results.map((r) => r.status)),
    );
    const queued = results.filter((_, i) => spawned[i]!.queued);
    assert.ok(queued.every((r) => (r.timing.queuedMs ?? 0) > 0));
    // From the evidence: at no moment did more than 2 admitted tasks overlap.
    const spans = results.map((r) => [r.timing.createdAt + (r.timing.queuedMs ?? 0), r.timing.settledAt!] as const);
    const overlap = Math.max(...spans.map(([s]) => spans.filter(([a, b]) => a <= s && s < b).length));
    assert.ok(overlap <= 2, `overlap ${overlap}`);
    assert.ok(peak <= 2 && peak >= 1, `peak ${peak}`);

    Object.assign(cfg, { maxParallelAgents: 1, maxQueuedAgents: 1, queueTimeoutMs: 1500 });
    const holder = await h.spawn({ prompt: "MARK-SLOW hold the slot", runtime: "headless" });
    const waiter = await h.spawn({ prompt: "MARK-QUICK wait in the queue", runtime: "headless" });
    assert.equal(waiter.queued, true);
    await assert.rejects(
      h.spawn({ prompt: "MARK-QUICK no room", runtime: "headless" }),
      (e: DshError) => e.code === "CONCURRENCY_LIMIT" && /maxQueuedAgents/.test(e.message),
    );
    const timedOut = await h.wait(waiter.taskId);
    assert.equal(timedOut.status, "failed");
    assert.equal(timedOut.error?.code, "CONCURRENCY_LIMIT");
    assert.match(timedOut.error!.message, /queueTimeoutMs/);
    await h.cli.request("task.abort", { taskIds: [holder.taskId] });
  } finally {
    off();
    Object.assign(cfg, saved);
  }
});
