// The owner extension's injector keeps one outcome per cycle: a second model-visible delivery of a cycle it already
// injected (another id, e.g. "error" after "completed": a power cut lost the outbox record and the daemon derived the
// cycle again) is acked, not injected; another cycle, and an abort card, are still injected. The pi side is a
// minimal stand-in for the parts the injector calls (session entries, sendMessage); real pi runs this path in
// test/e2e/owner-crew.test.ts, where a power cut cannot be staged.
import { test } from "node:test";
import assert from "node:assert/strict";
import { deliveryCycleOf, deliveryIdFor } from "../../src/core/crew/crew-delivery.js";
import { DeliveryInjector, RESULT_TYPE } from "../../src/extensions/owner-delivery.js";
import type { PushedDelivery } from "../../src/extensions/owner-link.js";
import { until } from "../helpers/wait.js";

test("deliveryCycleOf names the task and cycle of every outcome's id", () => {
  for (const s of ["completed", "needs_input", "error", "aborted"] as const)
    assert.equal(deliveryCycleOf(deliveryIdFor("tmx1abc-x", 3, s)), "tmx1abc-x-c3");
  assert.notEqual(
    deliveryCycleOf(deliveryIdFor("t1", 1, "completed")),
    deliveryCycleOf(deliveryIdFor("t1", 2, "completed")),
  );
});

test("a second outcome of an injected cycle is acked without injecting it; other cycles and aborts still are", async () => {
  const entries: Record<string, unknown>[] = [];
  const sent: { customType: string; details: { deliveryId: string } }[] = [];
  const acks: { deliveryIds: string[]; state: string }[] = [];
  const ctx = {
    isIdle: () => false,
    sessionManager: { getEntries: () => entries, getSessionId: () => "owner-1" },
  };
  const pi = {
    sendMessage(m: { customType: string; details: { deliveryId: string } }) {
      sent.push(m);
      entries.push({ type: "custom_message", customType: m.customType, details: m.details });
    },
  };
  const link = {
    request: async (_method: string, p: { deliveryIds: string[]; state: string }) => void acks.push(p),
  };
  const injector = new DeliveryInjector({
    pi: pi as never,
    link: link as never,
    ctx: () => ctx as never,
  });
  const delivery = (cycle: number, status: "completed" | "error" | "aborted"): PushedDelivery => ({
    deliveryId: deliveryIdFor("t1", cycle, status),
    taskId: "t1",
    cycle,
    queuedAt: Date.now(),
    model:
      status === "aborted"
        ? null
        : status === "error"
          ? { subagent_id: "t1", brief: "b", status, error: "e" }
          : { subagent_id: "t1", brief: "b", result: { outcome: "completed", report: "r" } },
    card: { status, subagent_id: "t1", brief: "b" },
  });
  // Every push ends in one ack (injected or skipped): wait for that many, not for a length of time.
  const acked = (n: number) => until(`${n} acks`, () => acks.length >= n, 10_000, 5);

  injector.push(delivery(1, "completed"), "owner-1");
  injector.push(delivery(1, "error"), "owner-1"); // the same cycle derived again, worded otherwise
  injector.push(delivery(2, "completed"), "owner-1");
  injector.push(delivery(2, "aborted"), "owner-1"); // a TUI card, not an outcome for the model
  await acked(4);

  const results = sent.filter((m) => m.customType === RESULT_TYPE).map((m) => m.details.deliveryId);
  assert.deepEqual(results, [deliveryIdFor("t1", 1, "completed"), deliveryIdFor("t1", 2, "completed")]);
  assert.deepEqual(injector.injected, [
    deliveryIdFor("t1", 1, "completed"),
    deliveryIdFor("t1", 2, "completed"),
    deliveryIdFor("t1", 2, "aborted"),
  ]);
  // Every push is acked, the skipped one included (the daemon stops pushing it).
  assert.deepEqual(
    acks.map((a) => a.deliveryIds[0]).sort(),
    [
      deliveryIdFor("t1", 1, "completed"),
      deliveryIdFor("t1", 1, "error"),
      deliveryIdFor("t1", 2, "aborted"),
      deliveryIdFor("t1", 2, "completed"),
    ].sort(),
  );

  // A later process (a resumed session) knows the cycle from the session's entries alone.
  const later = new DeliveryInjector({
    pi: pi as never,
    link: link as never,
    ctx: () => ctx as never,
  });
  later.push(delivery(1, "error"), "owner-1");
  await acked(5);
  assert.deepEqual(later.injected, []);
});
