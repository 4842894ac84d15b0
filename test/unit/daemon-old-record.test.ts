// task.json written before the closed/interrupted override was read from the machine's phase carries it as
// `lifecycle`: such a record still loads, and a restarted daemon leaves it as it was (nothing to recover). Records of
// this version carry no `lifecycle`: the status says closed or interrupted. Real daemon on a temp home.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "../../src/client/index.js";
import { runDaemon } from "../../src/daemon/daemon.js";
import { assemble } from "../../src/daemon/task/harvest.js";
import type { TaskRecord } from "../../src/daemon/task/record.js";
import { TaskStore } from "../../src/store/task-store.js";
import { FakeClock } from "../helpers/fake-clock.js";
import { stubRuntime } from "../helpers/stub-runtime.js";
import { until } from "../helpers/wait.js";

test("an old task.json with lifecycle: interrupted loads and is not recovered; a new one has no lifecycle", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-oldrec-"));
  const home = join(dir, "home");
  const store = await TaskStore.open(home, { groupCommit: false });
  const rec = await store.createTask<TaskRecord>(
    (taskId) => ({
      taskId,
      owner: "cli",
      // The record as an older daemon left it after an abort: its status record said running (a crash before the
      // harvest), its lifecycle flag interrupted. The flag decides: nothing to recover.
      status: "running",
      createdAt: Date.now(),
      cwd: dir,
      kind: "pi",
      role: "worker",
      model: "m/x",
      thinking: "off",
      isolated: false,
      timeoutMs: 60_000,
      runtime: "headless",
      name: `worker-x-${taskId.slice(-4)}`,
      token: "t".repeat(48),
      workdir: dir,
      sessionPath: join(home, "tasks", taskId, "session.jsonl"),
      resultPath: join(home, "tasks", taskId, "result.md"),
      cycle: 1,
      timing: { createdAt: Date.now() },
      lifecycle: "interrupted",
      handle: { runtime: "headless", pid: 999_999 },
    }),
    Date.now(),
  );
  const stored = assemble({ rec, runtime: "idle", sessionChangedAfterPrompt: false, settled: true });
  assert.equal(stored.status, "interrupted", "the old flag is honoured when a result is assembled from the record");
  await store.saveTask(rec, stored, { sync: false });
  await store.close();
  let launched = 0;
  const d = await runDaemon(home, {
    logLevel: "silent",
    runtimeFactories: {
      headless: () => stubRuntime({ launch: async () => (launched++, { runtime: "headless", pid: process.pid }) }),
    },
    clock: new FakeClock(),
  });
  const cli = await connect(home, { kind: "cli" });
  try {
    assert.equal(d.supervisor.tasks.has(rec.taskId), false, "not taken back under supervision");
    const r = await cli.request("task.get", { taskId: rec.taskId });
    assert.equal(r.status, "interrupted");
    assert.equal(launched, 0, "never started again");
    // A task of this version: closed by its status; no lifecycle flag in its task.json.
    const { taskId } = await cli.request("task.spawn", {
      cwd: dir,
      prompt: "p",
      model: "m/x",
      runtime: "headless",
    });
    await until("the launch", () => launched === 1, 10_000, 10);
    const closed = await cli.request("task.close", { taskId });
    assert.equal(closed.status, "closed");
    const task = JSON.parse(readFileSync(join(home, "tasks", taskId, "task.json"), "utf8")) as TaskRecord;
    assert.equal(task.status, "closed");
    assert.equal(task.lifecycle, undefined, "no second flag beside the status");
  } finally {
    cli.close();
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
