import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DELIVERY_TTL_MS, type DeliveryPayload } from "../../src/core/crew/crew-delivery.js";
import type { AgentResult } from "../../src/core/types.js";
import { DeliveryService } from "../../src/daemon/delivery/delivery.js";
import type { Connection } from "../../src/daemon/server/server.js";
import type { Live } from "../../src/daemon/supervisor.js";
import { readOutbox } from "../../src/store/outbox.js";
import { until } from "../helpers/wait.js";

const log = { info() {}, warn() {}, error() {}, debug() {} };
let nextConn = 1;
function conn(ownerId: string) {
  const pushes: { method: string; params: any }[] = [];
  const closers: (() => void)[] = [];
  const c = {
    id: nextConn++,
    kind: "owner" as const,
    ownerId,
    closed: false,
    pushes,
    push(method: string, params: unknown) {
      pushes.push({ method, params });
    },
    onClose(fn: () => void) {
      closers.push(fn);
    },
    close() {
      (c as { closed: boolean }).closed = true;
      for (const f of closers) f();
    },
  };
  return c as typeof c & Connection;
}
const payload = (id: string): DeliveryPayload => ({
  deliveryId: id,
  taskId: "tabc123456789",
  cycle: 1,
  model: { subagent_id: "tabc123456789", brief: "b", result: { outcome: "completed", report: "r" } },
  card: { status: "completed", subagent_id: "tabc123456789", brief: "b", report: "r" },
});

async function withHome(fn: (home: string) => Promise<void>) {
  const home = mkdtempSync(join(tmpdir(), "crew-deliv-"));
  try {
    await fn(home);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

test("an attached owner gets a queued delivery pushed at once; acking is idempotent; a re-enqueue of the same id is ignored", () =>
  withHome(async (home) => {
    const svc = new DeliveryService({ home, log });
    const c = conn("owner-1");
    assert.deepEqual(await svc.attach(c), { pending: 0 });
    assert.equal(await svc.enqueue("owner-1", payload("d1")), true);
    assert.equal(c.pushes.length, 1);
    assert.equal(c.pushes[0]!.method, "owner.delivery");
    assert.equal(c.pushes[0]!.params.deliveryId, "d1");
    assert.equal(typeof c.pushes[0]!.params.queuedAt, "number");
    assert.equal(await svc.enqueue("owner-1", payload("d1")), false, "same id: not queued twice");
    assert.equal(c.pushes.length, 1);
    assert.deepEqual(await svc.ack(c, ["d1"]), { acked: 1 });
    assert.deepEqual(await svc.ack(c, ["d1", "nope"]), { acked: 0 });
    assert.deepEqual(
      (await readOutbox(home, "owner-1")).map((r) => r.state),
      ["queued", "sent", "acked"],
    );
  }));

test("an inactive owner's deliveries wait durably and are pushed on attach, oldest first; unacked ones come again", () =>
  withHome(async (home) => {
    await new DeliveryService({ home, log }).enqueue("owner-2", payload("d1"));
    await new DeliveryService({ home, log }).enqueue("owner-2", payload("d2"));
    const svc = new DeliveryService({ home, log }); // a restarted daemon
    const c1 = conn("owner-2");
    assert.deepEqual(await svc.attach(c1), { pending: 2 });
    assert.deepEqual(
      c1.pushes.map((p) => p.params.deliveryId),
      ["d1", "d2"],
    );
    await svc.ack(c1, ["d1"]);
    c1.close();
    assert.equal(svc.isActive("owner-2"), false);
    const c2 = conn("owner-2");
    assert.deepEqual(await svc.attach(c2), { pending: 1 });
    assert.deepEqual(
      c2.pushes.map((p) => p.params.deliveryId),
      ["d2"],
      "the unacked one is redelivered with its id",
    );
  }));

test("deliveries older than 24 h are dropped when the owner returns", () =>
  withHome(async (home) => {
    let now = 1_000_000;
    const svc = new DeliveryService({ home, log, now: () => now });
    await svc.enqueue("owner-3", payload("old"));
    now += DELIVERY_TTL_MS + 1;
    await svc.enqueue("owner-3", payload("new"));
    const c = conn("owner-3");
    assert.deepEqual(await svc.attach(c), { pending: 1 });
    assert.deepEqual(
      c.pushes.map((p) => p.params.deliveryId),
      ["new"],
    );
    assert.ok((await readOutbox(home, "owner-3")).some((r) => r.deliveryId === "old" && r.state === "expired"));
  }));

test("watch turns settled harvests of pi owners into deliveries; live snapshots and the CLI owner get none", () =>
  withHome(async (home) => {
    let listener: ((live: Live, r: AgentResult, info: { settled: boolean }) => void) | undefined;
    const svc = new DeliveryService({ home, log, reportOf: (l) => (l as unknown as { report?: any }).report });
    svc.watch({ onStatus: (fn) => ((listener = fn), () => undefined) });
    const c = conn("owner-4");
    await svc.attach(c);
    const res = (status: AgentResult["status"]) =>
      ({ schemaVersion: 1, taskId: "tabc123456789", status, brief: "b", summary: "s" }) as AgentResult;
    const live = (owner: string) =>
      ({ rec: { owner, cycle: 3 }, report: { outcome: "completed", report: "exact report" } }) as unknown as Live;
    listener!(live("owner-4"), res("completed"), { settled: false });
    listener!(live("cli"), res("completed"), { settled: true });
    listener!(live("owner-4"), res("completed"), { settled: true });
    // The enqueue runs in the background (a durable write first): wait for it and for its sent record. The snapshot
    // and the CLI owner's settle were refused at once (nothing queued), so no second push can follow.
    await until("the push", () => c.pushes.length > 0, 10_000, 5);
    await until(
      "the sent record",
      async () => (await readOutbox(home, "owner-4")).some((r) => r.state === "sent"),
      10_000,
      5,
    );
    assert.equal(c.pushes.length, 1);
    assert.equal((await readOutbox(home, "owner-4")).length, 2, "one delivery: queued, then sent");
    assert.equal(c.pushes[0]!.params.deliveryId, "tabc123456789-c3-completed");
    assert.deepEqual(c.pushes[0]!.params.model.result, { outcome: "completed", report: "exact report" });
  }));

test("moveQueued hands unacked deliveries to the forked session", () =>
  withHome(async (home) => {
    const svc = new DeliveryService({ home, log });
    await svc.enqueue("old-owner", payload("d1"));
    assert.equal(await svc.moveQueued("old-owner", "new-owner"), 1);
    const c = conn("new-owner");
    assert.deepEqual(await svc.attach(c), { pending: 1 });
    const o = conn("old-owner");
    assert.deepEqual(await svc.attach(o), { pending: 0 });
  }));

test("group commit: 60 deliveries settling at once share a few outbox writes, each pushed once after it is on disk, in order", () =>
  withHome(async (home) => {
    const svc = new DeliveryService({ home, log });
    const c = conn("owner-g");
    await svc.attach(c);
    const ids = Array.from({ length: 60 }, (_, i) => `g${String(i).padStart(2, "0")}`);
    const onDiskAtPush: boolean[] = [];
    const push = c.push.bind(c);
    c.push = (method: string, params: any) => {
      // Synchronous read at push time: the queued record must already be in the file.
      onDiskAtPush.push(
        readFileSync(join(home, "owners", "owner-g", "outbox.jsonl"), "utf8").includes(
          `"deliveryId":"${params.deliveryId}","state":"queued"`,
        ),
      );
      push(method, params);
    };
    const queued = await Promise.all(ids.map((id) => svc.enqueue("owner-g", payload(id))));
    assert.ok(queued.every(Boolean));
    assert.deepEqual(
      c.pushes.map((p) => p.params.deliveryId),
      ids,
      "each pushed once, in enqueue order",
    );
    assert.ok(onDiskAtPush.every(Boolean), "a delivery is pushed only after its queued record is written");
    // 60 queued + 60 sent records; one at a time this was 120 appends (60 of them fsynced).
    assert.equal(svc.stats.records, 120);
    assert.ok(svc.stats.writes <= 10, `${svc.stats.writes} outbox writes for 60 deliveries`);
    const recs = await readOutbox(home, "owner-g");
    assert.deepEqual(
      recs.filter((r) => r.state === "queued").map((r) => r.deliveryId),
      ids,
    );
    assert.deepEqual(await svc.ack(c, ids), { acked: 60 });
    // A fresh service (a restarted daemon) reads the same state back: nothing pending, no id queued twice.
    const again = new DeliveryService({ home, log });
    assert.deepEqual(await again.attach(conn("owner-g")), { pending: 0 });
    assert.equal(await again.enqueue("owner-g", payload("g00")), false);
  }));

test("moveQueued also moves a delivery still being written, and each moved delivery reaches the new owner once", () =>
  withHome(async (home) => {
    const svc = new DeliveryService({ home, log });
    await svc.enqueue("old-owner", payload("m1"));
    const writing = svc.enqueue("old-owner", payload("m2")); // not awaited: its write is in flight
    assert.equal(await svc.moveQueued("old-owner", "new-owner"), 2);
    assert.equal(await writing, true);
    const c = conn("new-owner");
    assert.deepEqual(await svc.attach(c), { pending: 2 });
    assert.deepEqual(c.pushes.map((p) => p.params.deliveryId).sort(), ["m1", "m2"]);
    assert.deepEqual(await svc.attach(conn("old-owner")), { pending: 0 }, "nothing left with the old owner");
    assert.equal(await svc.moveQueued("old-owner", "new-owner"), 0, "moving again moves nothing");
  }));

test("an owner that leaves is dropped from memory; when it returns its state is read back whole (pending, no id twice)", () =>
  withHome(async (home) => {
    const svc = new DeliveryService({ home, log });
    const c1 = conn("owner-away");
    await svc.attach(c1);
    assert.equal(await svc.enqueue("owner-away", payload("a1")), true);
    assert.equal(await svc.enqueue("owner-away", payload("a2")), true);
    assert.deepEqual(await svc.ack(c1, ["a1"]), { acked: 1 });
    c1.close();
    assert.equal((svc as unknown as { boxes: Map<string, unknown> }).boxes.has("owner-away"), false, "evicted");
    assert.equal(await svc.enqueue("owner-away", payload("a1")), false, "an acked id is still known");
    assert.equal(await svc.enqueue("owner-away", payload("a2")), false, "a pending id is still known");
    const c2 = conn("owner-away");
    assert.deepEqual(await svc.attach(c2), { pending: 1 });
    assert.deepEqual(
      c2.pushes.map((p) => p.params.deliveryId),
      ["a2"],
    );
    assert.equal(c2.pushes[0]!.params.model.result.report, "r", "the payload came back from disk");
    assert.equal(c2.pushes[0]!.params.card.report, undefined, "the push carries the report once (in model)");
  }));

test("a delivery keeps its settle time: moved to a forked session it is not younger, and the 24 h bound counts from the settle", () =>
  withHome(async (home) => {
    let now = 5_000_000;
    const settledAt = now;
    let listener: ((live: Live, r: AgentResult, info: { settled: boolean; recovered?: true }) => void) | undefined;
    const svc = new DeliveryService({ home, log, now: () => now });
    svc.watch({ onStatus: (fn) => ((listener = fn), () => undefined) });
    const res = (taskId: string) =>
      ({
        schemaVersion: 1,
        taskId,
        status: "completed",
        brief: "b",
        summary: "s",
        timing: { createdAt: settledAt - 1000, settledAt },
      }) as AgentResult;
    const live = { rec: { owner: "old-owner", cycle: 1 } } as unknown as Live;
    // Heard an hour after it settled (a recovery after a restart): the record carries the settle time.
    now += 60 * 60 * 1000;
    listener!(live, res("tabc123456789"), { settled: true, recovered: true });
    listener!(live, res("tabd123456789"), { settled: true });
    const queuedTs = async (owner: string) => {
      const q = await until(
        `two deliveries queued for ${owner}`,
        async () => {
          const rows = (await readOutbox(home, owner)).filter((r) => r.state === "queued");
          return rows.length === 2 ? rows : undefined;
        },
        10_000,
        10,
      );
      return q.map((r) => r.ts);
    };
    assert.deepEqual(await queuedTs("old-owner"), [settledAt, settledAt], "queued with the settle's time");
    now = settledAt + DELIVERY_TTL_MS - 1000;
    assert.equal(await svc.moveQueued("old-owner", "new-owner"), 2);
    assert.deepEqual(await queuedTs("new-owner"), [settledAt, settledAt], "a move keeps the original time");
    const early = conn("new-owner");
    await svc.attach(early);
    assert.deepEqual(
      early.pushes.map((p) => p.params.queuedAt),
      [settledAt, settledAt],
      "the extension is told the settle time",
    );
    early.close();
    now = settledAt + DELIVERY_TTL_MS + 1000; // past 24 h since the settle, though only 2 s since the move
    const late = conn("new-owner");
    assert.deepEqual(await svc.attach(late), { pending: 0 });
    assert.deepEqual(late.pushes, [], "expired 24 h after the settle");
  }));
