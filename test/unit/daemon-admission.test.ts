import { test } from "node:test";
import assert from "node:assert/strict";
import { Admission } from "../../src/daemon/task/admission.js";
import type { DshError } from "../../src/core/errors.js";
import { FakeClock } from "../helpers/fake-clock.js";

const limits =
  (p: number, q: number, t = 60_000) =>
  () => ({ maxParallelAgents: p, maxQueuedAgents: q, queueTimeoutMs: t });

test("50 simultaneous spawns never exceed the cap; queue overflow is CONCURRENCY_LIMIT; FIFO admission", async () => {
  const a = new Admission(limits(3, 10));
  let live = 0;
  let peak = 0;
  const order: string[] = [];
  const refused: DshError[] = [];
  const runs: Promise<void>[] = [];
  for (let i = 0; i < 50; i++) {
    const id = `t${String(i).padStart(11, "0")}`;
    let p: Promise<{ queuedMs: number }>;
    try {
      p = a.acquire(id);
    } catch (e) {
      refused.push(e as DshError);
      continue;
    }
    runs.push(
      p.then(async (slot) => {
        live++;
        peak = Math.max(peak, live);
        assert.ok(a.running <= 3);
        order.push(id);
        if (order.length > 3) assert.ok(slot.queuedMs >= 1);
        await new Promise((r) => setImmediate(r)); // the slot is held across a turn of the event loop
        live--;
        a.release(id);
      }),
    );
  }
  await Promise.all(runs);
  assert.equal(peak, 3);
  assert.equal(order.length, 13);
  assert.deepEqual(order, [...order].sort());
  assert.equal(refused.length, 37);
  assert.ok(refused.every((e) => e.code === "CONCURRENCY_LIMIT" && /maxQueuedAgents 10/.test(e.message)));
  assert.equal(a.running, 0);
  assert.equal(a.queued, 0);
});

test("queue timeout rejects with CONCURRENCY_LIMIT naming queueTimeoutMs; cancel frees a queued place", async () => {
  const clock = new FakeClock();
  const a = new Admission(limits(1, 2, 50), clock);
  await a.acquire("t00000000001");
  const waiting = a.acquire("t00000000002");
  clock.advance(49);
  assert.equal(a.queued, 1, "still queued before queueTimeoutMs");
  clock.advance(1);
  await assert.rejects(
    waiting,
    (e: DshError) => e.code === "CONCURRENCY_LIMIT" && /queueTimeoutMs \(50 ms\)/.test(e.message),
  );
  assert.equal(a.queued, 0);
  const q = a.acquire("t00000000003");
  assert.equal(a.cancel("t00000000003", new Error("aborted")), true);
  await assert.rejects(q, /aborted/);
  a.release("t00000000001");
  a.release("t00000000001"); // idempotent
  assert.equal(a.running, 0);
});
