// The task store on a real temp home: records, journal, index, outboxes, hostile ids, atomic rewrites.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TaskStore, type TaskRecordBase } from "../../src/store/task-store.js";
import { appendOutbox, pendingDeliveries, readOutbox } from "../../src/store/outbox.js";

interface Rec extends TaskRecordBase {
  payload?: string;
}

function tempHome(): { home: string; done: () => void } {
  const base = mkdtempSync(join(tmpdir(), "dsh-store-"));
  return { home: join(base, "herdr"), done: () => rmSync(base, { recursive: true, force: true }) };
}

test("create, rewrite and read a task; prompt and result round-trip; journal is ordered", async () => {
  const t = tempHome();
  try {
    const store = await TaskStore.open(t.home);
    const rec = await store.createTask<Rec>((taskId) => ({ taskId, owner: "cli", status: "starting", createdAt: 1 }));
    assert.match(rec.taskId, /^t[0-9a-z]{11}$/);
    await store.writeTask<Rec>({ ...rec, status: "working", updatedAt: 2 });
    assert.equal((await store.readTask<Rec>(rec.taskId)).status, "working");
    await store.appendEvent(rec.taskId, { type: "status", status: "working", cycle: 1 });
    assert.deepEqual(
      (await store.readEvents(rec.taskId)).map((e) => e.type),
      ["created", "status"],
    );
    await store.writePrompt(rec.taskId, "do the thing\n");
    assert.equal(await store.readPrompt(rec.taskId), "do the thing\n");
    assert.equal(await store.readResult(rec.taskId), undefined);
    const ids = new Set<string>();
    for (let i = 0; i < 50; i++) ids.add(await store.allocateTaskId(1_760_000_000_000));
    assert.equal(ids.size, 50, "same millisecond: collisions are detected and retried");
  } finally {
    t.done();
  }
});

test("a task's paths are kept for reuse: the same, read-only, and a hostile id is still refused after any number", async () => {
  const t = tempHome();
  try {
    const store = await TaskStore.open(t.home);
    const first = store.taskPaths("tmg3k2a1b2c3");
    assert.equal(first.events, join(t.home, "tasks", "tmg3k2a1b2c3", "events.jsonl"));
    assert.equal(store.taskPaths("tmg3k2a1b2c3"), first, "the second ask reuses the first answer");
    // Shared between callers, so none may change it for the others.
    assert.throws(() => {
      (first as { events: string }).events = "/etc/passwd";
    }, TypeError);
    // More ids than are kept (1,024): each still gets its own paths, the first one too once it was let go.
    for (let i = 0; i < 5000; i++) {
      const id = `tmg3k2a${i.toString(36).padStart(5, "0")}`;
      assert.equal(store.taskPaths(id).dir, join(t.home, "tasks", id));
    }
    assert.equal(store.taskPaths("tmg3k2a1b2c3").events, first.events);
    for (const bad of ["../x", "/etc", "", ".."]) assert.throws(() => store.taskPaths(bad), { code: "BAD_TASK_ID" });
  } finally {
    t.done();
  }
});

test("hostile task ids are refused before touching a path; unknown ids are TASK_NOT_FOUND", async () => {
  const t = tempHome();
  try {
    const store = await TaskStore.open(t.home);
    for (const bad of ["../x", "/etc", "", "t".repeat(300), "tAAAAAAAAAAA", "t0000000000/", "..", 42]) {
      await assert.rejects(
        store.readTask(bad),
        (e: Error & { code?: string }) => e.code === "BAD_TASK_ID" && /dsh-herdr list/.test(e.message),
      );
      await assert.rejects(store.appendEvent(bad, { type: "parked", cycle: 1 }), { code: "BAD_TASK_ID" });
    }
    await assert.rejects(store.readTask("tmg3k2a1b2c3"), { code: "TASK_NOT_FOUND" });
    await assert.rejects(store.writeTask({ taskId: "tmg3k2a1b2c3", owner: "cli", status: "x", createdAt: 0 }), {
      code: "TASK_NOT_FOUND",
    });
    for (const bad of ["../owner", "a/b", ".", "..", "", "x".repeat(129)]) {
      await assert.rejects(appendOutbox(t.home, bad, { deliveryId: "d1", state: "queued" }), { code: "BAD_PARAMS" });
    }
  } finally {
    t.done();
  }
});

test("a torn last journal line is skipped, and the next append starts on a fresh line", async () => {
  const t = tempHome();
  try {
    const store = await TaskStore.open(t.home);
    const { taskId } = await store.createTask<Rec>((taskId) => ({
      taskId,
      owner: "cli",
      status: "starting",
      createdAt: 1,
    }));
    appendFileSync(store.taskPaths(taskId).events, '{"type":"status","stat');
    assert.deepEqual(
      (await store.readEvents(taskId)).map((e) => e.type),
      ["created"],
    );
    const fresh = await TaskStore.open(t.home); // a restarted daemon
    await fresh.appendEvent(taskId, { type: "parked", cycle: 1 });
    assert.deepEqual(
      (await fresh.readEvents(taskId)).map((e) => e.type),
      ["created", "parked"],
    );
  } finally {
    t.done();
  }
});

test("task.json is never partially visible to a reader in another process during concurrent rewrites", async () => {
  const t = tempHome();
  try {
    const store = await TaskStore.open(t.home);
    const { taskId } = await store.createTask<Rec>((taskId) => ({
      taskId,
      owner: "cli",
      status: "v0",
      createdAt: 1,
      payload: "x".repeat(200_000),
    }));
    const file = store.taskPaths(taskId).taskJson;
    const reader = spawn(
      process.execPath,
      [
        "-e",
        `
      const fs = require("fs"); let n = 0, bad = 0;
      const end = Date.now() + 60000;
      const loop = () => { for (let i = 0; i < 50; i++) { try { JSON.parse(fs.readFileSync(${JSON.stringify(file)}, "utf8")); n++; } catch (e) { if (e.code !== "ENOENT") bad++; } }
        if (fs.existsSync(${JSON.stringify(file + ".stop")}) || Date.now() > end) { process.stdout.write(JSON.stringify({ n, bad })); } else setImmediate(loop); };
      loop();`,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let out = "";
    reader.stdout.on("data", (d: Buffer) => (out += d.toString()));
    const writes = [];
    for (let i = 1; i <= 60; i++)
      writes.push(
        store.writeTask<Rec>({
          taskId,
          owner: "cli",
          status: `v${i}`,
          createdAt: 1,
          payload: String(i % 10).repeat(200_000 + i),
        }),
      );
    await Promise.all(writes);
    writeFileSync(file + ".stop", "");
    await new Promise((r) => reader.once("close", r));
    const { n, bad } = JSON.parse(out) as { n: number; bad: number };
    assert.ok(n > 0, "the reader read the file");
    assert.equal(bad, 0, "no read saw a partial file");
    const last = JSON.parse(readFileSync(file, "utf8")) as Rec;
    assert.match(last.status, /^v\d+$/);
  } finally {
    t.done();
  }
});

test("listTasks filters from the index, survives a restart, and repairs a stale index line", async () => {
  const t = tempHome();
  try {
    const store = await TaskStore.open(t.home);
    const made: string[] = [];
    for (let i = 0; i < 30; i++) {
      const r = await store.createTask<Rec>(
        (taskId) => ({
          taskId,
          owner: i % 3 === 0 ? "owner-a" : "cli",
          status: i % 2 === 0 ? "completed" : "working",
          createdAt: 1000 + i,
        }),
        1_760_000_000_000 + i,
      );
      made.push(r.taskId);
    }
    assert.equal(store.listTasks().length, 30);
    assert.equal(store.listTasks({ owner: "owner-a" }).length, 10);
    assert.equal(store.listTasks({ status: ["completed"], owner: "cli" }).length, 10);
    assert.deepEqual(
      store.listTasks({ limit: 2 }).map((s) => s.taskId),
      [made[29], made[28]],
      "newest first",
    );
    // Behind the index's back (a crash between task.json and the index line): the reopened store re-reads it.
    const p = store.taskPaths(made[0]);
    writeFileSync(p.taskJson, JSON.stringify({ taskId: made[0], owner: "cli", status: "closed", createdAt: 1000 }));
    const reopened = await TaskStore.open(t.home);
    assert.equal(reopened.getSummary(made[0])?.status, "closed");
    assert.equal(reopened.listTasks({ status: "closed" }).length, 1);
    rmSync(p.dir, { recursive: true });
    assert.equal((await TaskStore.open(t.home)).listTasks().length, 29);
  } finally {
    t.done();
  }
});

test("owner outbox: append-only states, pending = queued or sent but not acked", async () => {
  const t = tempHome();
  try {
    await TaskStore.open(t.home);
    const owner = "0f8e2a4c-1b2d-4c3e-9f00-123456789abc";
    await appendOutbox(t.home, owner, {
      deliveryId: "d1",
      state: "queued",
      taskId: "tmg3k2a1b2c3",
      payload: { brief: "x" },
    });
    await appendOutbox(t.home, owner, { deliveryId: "d2", state: "queued", payload: { brief: "y" } });
    await appendOutbox(t.home, owner, { deliveryId: "d1", state: "sent" });
    await appendOutbox(t.home, owner, { deliveryId: "d2", state: "sent" });
    await appendOutbox(t.home, owner, { deliveryId: "d2", state: "acked" });
    const recs = await readOutbox(t.home, owner);
    assert.equal(recs.length, 5);
    const pending = pendingDeliveries(recs);
    assert.deepEqual(
      pending.map((p) => [p.deliveryId, p.state]),
      [["d1", "sent"]],
    );
    assert.deepEqual(pending[0]!.payload, { brief: "x" });
  } finally {
    t.done();
  }
});

test("a journal line of no known kind or shape (another daemon version's) is left out and counted; the rest loads", async () => {
  const t = tempHome();
  try {
    const store = await TaskStore.open(t.home);
    const { taskId } = await store.createTask<Rec>((taskId) => ({
      taskId,
      owner: "cli",
      status: "starting",
      createdAt: 1,
    }));
    appendFileSync(store.taskPaths(taskId).events, '{"type":"hologram","cycle":1}\n{"type":"respond"}\n');
    await store.appendEvent(taskId, { type: "respond", cycle: 2 });
    const { records, unknown } = await store.readJournal(taskId);
    assert.deepEqual(
      records.map((e) => e.type),
      ["created", "respond"],
    );
    assert.equal(unknown, 2);
    assert.deepEqual(
      (await store.readEvents(taskId)).map((e) => e.type),
      ["created", "respond"],
    );
  } finally {
    t.done();
  }
});
