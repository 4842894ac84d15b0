// task.list over a real daemon (runDaemon on a temp home, real Unix socket, a stub runtime through
// RunDaemonOptions.runtimeFactories): pages newest first with a cursor, closed tasks answered from the index
// (their result.json is gone and they are still listed), open tasks as rows of their live result, a default page size.
// Also: refreshes of one task coalesce (a burst costs at most two harvests).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "../../src/client/index.js";
import type { AgentResult } from "../../src/core/types.js";
import { runDaemon } from "../../src/daemon/daemon.js";
import { assemble } from "../../src/daemon/task/harvest.js";
import { LIST_DEFAULT_LIMIT } from "../../src/daemon/methods/listing.js";
import type { TaskRecord } from "../../src/daemon/task/record.js";
import type { LaunchSpec } from "../../src/runtime/types.js";
import { FakeClock } from "../helpers/fake-clock.js";
import { stubRuntime } from "../helpers/stub-runtime.js";
import { until } from "../helpers/wait.js";
import { TaskStore } from "../../src/store/task-store.js";

const stub = (launches: LaunchSpec[]) =>
  stubRuntime({ launch: async (spec) => (launches.push(spec), { runtime: "headless", pid: process.pid }) });

/** `count` closed tasks written as the daemon writes them (task.json, result.json, an index line with a row). */
async function addClosed(home: string, count: number, work: string): Promise<string[]> {
  const store = await TaskStore.open(home);
  const ids: string[] = [];
  // Minted in the past, one ms apart, so they are older than anything the daemon spawns next (CI once ran the
  // daemon within the ms spread of ids minted at now + i and the spawned task sorted below them).
  const past = Date.now() - 60_000;
  for (let i = 0; i < count; i++) {
    const rec = await store.createTask<TaskRecord>(
      (taskId) => ({
        taskId,
        owner: i % 2 ? "owner-b" : "owner-a",
        status: "closed",
        createdAt: Date.now(),
        cwd: work,
        kind: "pi",
        role: "worker",
        model: "m/x",
        thinking: "off",
        isolated: false,
        timeoutMs: 60_000,
        runtime: "headless",
        name: `worker-x-${taskId.slice(-4)}`,
        token: "t",
        workdir: work,
        sessionPath: join(home, "tasks", taskId, "session.jsonl"),
        resultPath: join(home, "tasks", taskId, "result.md"),
        cycle: 1,
        timing: { createdAt: Date.now() },
        lifecycle: "closed",
        brief: `brief ${i}`,
      }),
      past + i,
      { sync: false },
    );
    await store.saveTask(rec, assemble({ rec, runtime: "idle", sessionChangedAfterPrompt: false, settled: true }), {
      sync: false,
    });
    ids.push(rec.taskId);
  }
  return ids;
}

test("task.list: pages by cursor, newest first; closed rows come from the index, open tasks as rows of their live results", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-list-"));
  const home = join(dir, "home");
  const launches: LaunchSpec[] = [];
  const ids = await addClosed(home, LIST_DEFAULT_LIMIT + 12, dir);
  // Proof that listing reads no result.json: they are gone.
  for (const id of ids) unlinkSync(join(home, "tasks", id, "result.json"));
  // Live snapshots are paced through the daemon's clock: this test moves it by hand.
  const clock = new FakeClock();
  const d = await runDaemon(home, {
    logLevel: "silent",
    runtimeFactories: { headless: () => stub(launches) },
    config: { readinessTimeoutMs: 60_000 },
    clock,
  });
  const cli = await connect(home, { kind: "cli" });
  try {
    const spawned = await cli.request("task.spawn", {
      cwd: dir,
      prompt: "p",
      model: "m/x",
      runtime: "headless",
    });
    await until("the launch", () => launches.length > 0, 2000, 10);
    assert.equal(launches.length, 1, "the stub runtime from runtimeFactories got the launch");

    type Page = { tasks: (AgentResult & { owner?: string })[]; nextCursor?: string };
    const first = await cli.request("task.list", {});
    assert.equal(first.tasks.length, LIST_DEFAULT_LIMIT, "a default page size");
    assert.equal(first.tasks[0]!.taskId, spawned.taskId, "newest first");
    const liveResult = await cli.request("task.get", { taskId: spawned.taskId });
    assert.equal(first.tasks[0]!.status, liveResult.status, "an open task's row carries its live status");
    assert.deepEqual(first.tasks[0]!.agent, liveResult.agent);
    assert.equal(
      first.tasks[0]!.sessionPath,
      undefined,
      "a row of the live result, not the whole result (task.get has that)",
    );
    assert.ok(first.nextCursor);

    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page: Page = await cli.request("task.list", { limit: 50, ...(cursor ? { cursor } : {}) });
      pages++;
      assert.ok(page.tasks.length <= 50);
      for (const t of page.tasks) seen.push(t.taskId);
      cursor = page.nextCursor;
    } while (cursor);
    assert.equal(pages, Math.ceil((ids.length + 1) / 50));
    assert.deepEqual(seen, [spawned.taskId, ...[...ids].reverse()], "every task once, newest first");

    const closed = await cli.request("task.list", { status: ["closed"], owner: "owner-a", limit: 1000 });
    assert.equal(closed.tasks.length, Math.ceil(ids.length / 2));
    assert.equal(closed.nextCursor, undefined);
    const row = closed.tasks.find((t) => t.taskId === ids[0])!;
    assert.equal(row.brief, "brief 0");
    assert.equal(row.agent.name, `worker-x-${ids[0]!.slice(-4)}`);
    assert.equal(row.status, "closed");
    assert.equal(row.sessionPath, undefined, "a row, not the whole result");

    await assert.rejects(
      cli.request("task.list", { cursor: "../etc" }),
      (e: Error & { code?: string }) => e.code === "BAD_PARAMS" && /nextCursor/.test(e.message),
    );

    // Coalescing: a burst of 50 refreshes of one task costs at most 2 harvests (the running one and one queued),
    // counted by the session facts each harvest reads; and the unchanged status is written to disk once, later.
    const live = d.supervisor.tasks.get(spawned.taskId)!;
    await live.chain;
    clock.advance(1000); // any deferred snapshot of the spawn is written now (the snapshot pace is 250 ms)
    await live.chain;
    const files = live.files!;
    const facts = files.facts.bind(files);
    let reads = 0;
    files.facts = () => (reads++, facts());
    const store = d.supervisor.deps.store;
    const save = store.saveTask.bind(store);
    let saves = 0;
    store.saveTask = async (...a: Parameters<typeof save>) => (saves++, save(...a));
    await live.refresh();
    const perHarvest = reads;
    assert.ok(perHarvest >= 1);
    reads = 0;
    await Promise.all(Array.from({ length: 50 }, () => live.refresh()));
    assert.ok(reads <= 2 * perHarvest, `${reads / perHarvest} harvests for 50 refreshes`);
    assert.equal(saves, 0, "nothing written before the snapshot's time");
    clock.advance(1000);
    await live.chain;
    assert.equal(saves, 1, "51 refreshes with the same status: one deferred write of task.json/result.json");
  } finally {
    cli.close();
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("task index: a repaired line gets its row from result.json; a malformed result.json leaves the task unlisted by row", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-list-"));
  const home = join(dir, "home");
  try {
    const ids = await addClosed(home, 3, dir);
    unlinkSync(join(home, "tasks", "index.jsonl"));
    writeFileSync(join(home, "tasks", ids[1]!, "result.json"), '{"schemaVersion":1}');
    const store = await TaskStore.open(home);
    const rows = store.listTasks({});
    assert.deepEqual(
      rows.map((r) => r.taskId),
      [...ids].reverse(),
    );
    assert.equal(rows.find((r) => r.taskId === ids[0])!.row?.summary !== undefined, true);
    assert.equal(rows.find((r) => r.taskId === ids[1])!.row, undefined);
    assert.deepEqual(
      store.listTasks({ before: ids[2]! }).map((r) => r.taskId),
      [ids[1], ids[0]],
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
