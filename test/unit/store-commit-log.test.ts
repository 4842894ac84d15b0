// The commit log (src/store/commit-log.ts) on a real temp home: durable journal records of many tasks share
// fsyncs, and a power cut that loses a task journal's tail (simulated by cutting the file, as the page cache
// would have been lost) is repaired from the log at the next open, in order, without resurrecting anything twice.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync, truncateSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TaskStore, unsynced, type TaskRecordBase } from "../../src/store/task-store.js";
import { appendOutboxMany, outboxPath } from "../../src/store/outbox.js";

function tempHome(): { home: string; done: () => void } {
  const base = mkdtempSync(join(tmpdir(), "dsh-commitlog-"));
  return { home: join(base, "herdr"), done: () => rmSync(base, { recursive: true, force: true }) };
}

const newTask = (store: TaskStore) =>
  store.createTask<TaskRecordBase>(
    (taskId) => ({ taskId, owner: "cli", status: "starting", createdAt: 1 }),
    Date.now(),
    { sync: false },
  );

test("100 tasks journaling at once share a handful of log writes, and every record is in its own journal", async () => {
  const t = tempHome();
  try {
    const store = await TaskStore.open(t.home);
    const recs = await Promise.all(Array.from({ length: 100 }, () => newTask(store)));
    const before = { ...store.commitStats! };
    await Promise.all(recs.map((r) => store.appendEvent(r.taskId, { type: "settle", why: "report", cycle: 1 })));
    const writes = store.commitStats!.writes - before.writes;
    const records = store.commitStats!.records - before.records;
    assert.equal(records, 100);
    // One write per record would be 100: records that wait for a running write share the next one.
    assert.ok(writes < 50, `100 records took ${writes} log writes`);
    for (const r of recs)
      assert.deepEqual(
        (await store.readEvents(r.taskId)).map((e) => e.type),
        ["created", "settle"],
      );
  } finally {
    t.done();
  }
});

test("a journal that lost its durable tail (power cut) gets it back, in order, at the next open; unsynced ones stay lost", async () => {
  const t = tempHome();
  try {
    const store = await TaskStore.open(t.home);
    const a = await newTask(store);
    const b = await newTask(store);
    await store.appendEvent(a.taskId, { type: "launched", attempt: 1, runtime: "tmux" });
    const cut = statSync(store.taskPaths(a.taskId).events).size;
    await store.appendEvent(a.taskId, unsynced({ type: "baseline", head: null, dirty: 0 }));
    await store.appendEvent(a.taskId, { type: "settle", why: "report", cycle: 1 });
    await store.appendEvent(a.taskId, { type: "status", status: "completed", settled: true, cycle: 1 });
    await store.appendEvent(b.taskId, { type: "settle", why: "report", cycle: 1 });
    const bEvents = readFileSync(store.taskPaths(b.taskId).events, "utf8");

    // What a power cut can leave: a's journal without its last records (and half a line), b's journal intact.
    truncateSync(store.taskPaths(a.taskId).events, cut + 10);
    const reopened = await TaskStore.open(t.home);
    const types = (await reopened.readEvents(a.taskId)).map((e) => e.type);
    assert.deepEqual(
      types,
      ["created", "launched", "settle", "status"],
      "the unsynced baseline may be lost; the durable records are back",
    );
    assert.equal(
      readFileSync(reopened.taskPaths(b.taskId).events, "utf8"),
      bEvents,
      "an intact journal is not touched",
    );

    // Opening again replays nothing twice (the log was emptied once the journals were repaired and synced).
    const again = await TaskStore.open(t.home);
    assert.deepEqual(
      (await again.readEvents(a.taskId)).map((e) => e.type),
      types,
    );
  } finally {
    t.done();
  }
});

test("a journal lost whole is rebuilt from the log's records", async () => {
  const t = tempHome();
  try {
    const store = await TaskStore.open(t.home);
    const a = await newTask(store);
    await store.appendEvent(a.taskId, { type: "launched", attempt: 1, runtime: "tmux" });
    await store.appendEvent(a.taskId, { type: "settle", why: "report", cycle: 1 });
    unlinkSync(store.taskPaths(a.taskId).events);
    const reopened = await TaskStore.open(t.home);
    assert.deepEqual(
      (await reopened.readEvents(a.taskId)).map((e) => e.type),
      ["launched", "settle"],
    );
  } finally {
    t.done();
  }
});

test("without group commit nothing goes through the log (records are fsynced in their journal)", async () => {
  const t = tempHome();
  try {
    const store = await TaskStore.open(t.home, { groupCommit: false });
    const a = await newTask(store);
    await store.appendEvent(a.taskId, { type: "settle", why: "report", cycle: 1 });
    assert.equal(store.commitStats, undefined);
    assert.deepEqual(
      (await store.readEvents(a.taskId)).map((e) => e.type),
      ["created", "settle"],
    );
  } finally {
    t.done();
  }
});

test("a relayed settle's two records are one append: both in the journal, one commit-log record, both back after a power cut", async () => {
  const t = tempHome();
  try {
    const store = await TaskStore.open(t.home);
    const a = await newTask(store);
    const journalCut = statSync(store.taskPaths(a.taskId).events).size;
    const before = store.commitStats!.records;
    const { durable } = await store.appendEventsWritten(a.taskId, [
      { type: "settle", why: "remote", cycle: 1, remote: true },
      { type: "status", status: "completed", cycle: 1, settled: true, remote: true },
    ]);
    const written = await store.readEvents(a.taskId);
    assert.deepEqual(
      written.map((e) => e.type),
      ["created", "settle", "status"],
      "both records are in the journal once the append resolves, before it is durable",
    );
    assert.equal(written[1]!.ts, written[2]!.ts, "one append: one time for both");
    await durable;
    assert.equal(store.commitStats!.records - before, 1, "one commit-log record carries both lines");

    truncateSync(store.taskPaths(a.taskId).events, journalCut);
    const reopened = await TaskStore.open(t.home);
    assert.deepEqual(
      (await reopened.readEvents(a.taskId)).slice(1).map((e) => [e.type, e.type === "status" ? e.status : undefined]),
      [
        ["settle", undefined],
        ["status", "completed"],
      ],
    );
  } finally {
    t.done();
  }
});

test("a settle record and the outbox record after it share the log: a power cut that loses both files' tails gets both back", async () => {
  const t = tempHome();
  try {
    const store = await TaskStore.open(t.home);
    const a = await newTask(store);
    const owner = "3f0c8a52-1b7e-4c39-9a55-7d7e0f1a2b3c";
    await appendOutboxMany(t.home, owner, [{ deliveryId: "x-c1-completed", state: "acked", taskId: a.taskId }], {
      durable: store.durable!,
    });
    const journalCut = statSync(store.taskPaths(a.taskId).events).size;
    const outboxCut = statSync(outboxPath(t.home, owner)).size;
    const before = store.commitStats!.writes;
    // The settle is written but its durability is not awaited; the outbox append waits for the log, after it.
    const { durable } = await store.appendEventsWritten(a.taskId, [{ type: "settle", why: "report", cycle: 2 }]);
    await appendOutboxMany(
      t.home,
      owner,
      [{ deliveryId: `${a.taskId}-c2-completed`, state: "queued", taskId: a.taskId }],
      { durable: store.durable! },
    );
    await durable;
    assert.ok(store.commitStats!.writes - before <= 2, "at most two log writes for the pair");

    // A power cut loses what was never fsynced in either file: both tails.
    truncateSync(store.taskPaths(a.taskId).events, journalCut);
    truncateSync(outboxPath(t.home, owner), outboxCut);
    const reopened = await TaskStore.open(t.home);
    assert.deepEqual(
      (await reopened.readEvents(a.taskId)).map((e) => e.type),
      ["created", "settle"],
    );
    const box = readFileSync(outboxPath(t.home, owner), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l).deliveryId);
    assert.deepEqual(box, ["x-c1-completed", `${a.taskId}-c2-completed`]);
  } finally {
    t.done();
  }
});
