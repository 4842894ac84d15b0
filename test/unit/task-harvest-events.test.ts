// A harvest builds the result and returns the event its settle means for the machine (harvested, with the settled
// status): it dispatches nothing itself, so what a settled harvest tells the machine is read here from a plain object,
// no runner, no machine, no daemon.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { SettleReason } from "../../src/core/lifecycle/task-cycle.js";
import type { TaskRecord } from "../../src/daemon/task/record.js";
import { harvest, type HarvestPort } from "../../src/daemon/task/settle.js";

function port(dir: string, reason: SettleReason) {
  const rec: TaskRecord = {
    taskId: "tharvest0001",
    owner: "cli",
    status: "running",
    createdAt: 1_000,
    cwd: dir,
    kind: "pi",
    role: "worker",
    model: "m/x",
    thinking: "off",
    isolated: false,
    timeoutMs: 60_000,
    runtime: "headless",
    name: "worker-x",
    token: "t".repeat(48),
    workdir: dir,
    sessionPath: join(dir, "session.jsonl"),
    resultPath: join(dir, "result.md"),
    cycle: 1,
    timing: { createdAt: 1_000 },
  } as TaskRecord;
  const journaled: unknown[] = [];
  const r = {
    rec,
    state: { phase: { name: "settled", cycle: 1, reason }, childConnected: false },
    // The settle record pinned the disk's state: nothing is asked of the disk here.
    settleDisk: { cycle: 1 },
    ports: {
      store: { taskPaths: () => ({ diffPatch: join(dir, "diff.patch"), dir }) },
      config: () => ({ patchCapBytes: 1 << 20 }),
      clock: { now: () => 5_000 },
    },
    journal: async (e: unknown) => void journaled.push(e),
  } as unknown as HarvestPort;
  return { r, rec, journaled };
}

test("a settled harvest returns its harvested event with the settled status, and sets the result it built", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-harvest-ev-"));
  try {
    const { r, rec } = port(dir, { kind: "owner_abort" });
    const h = await harvest(r, { settled: true, reason: { kind: "owner_abort" } });
    assert.ok(h, "a settled harvest is never skipped");
    assert.equal(h.result.status, "interrupted");
    assert.deepEqual(h.harvested, { type: "harvested", cycle: 1, status: "interrupted" });
    assert.equal(h.changed, true);
    assert.equal(h.settling, true);
    assert.ok(h.pinned, "a settled harvest's pin goes into the journal");
    assert.equal(r.result, h.result, "the runner holds the result the owners are about to hear");
    assert.equal(r.settledCycle, 1);
    assert.equal(rec.timing.createdAt, 1_000);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a live harvest returns no harvested event; a settled cycle's result stands against a live one", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-harvest-ev-"));
  try {
    const { r } = port(dir, { kind: "owner_abort" });
    const settled = await harvest(r, { settled: true, reason: { kind: "owner_abort" } });
    assert.equal(await harvest(r, {}), undefined, "no live rebuild of a settled cycle");
    r.state = { phase: { name: "running", cycle: 2 }, childConnected: true } as HarvestPort["state"];
    r.rec.cycle = 2;
    const live = await harvest(r, {});
    assert.ok(live);
    assert.equal(live.harvested, undefined, "only a settle tells the machine");
    assert.equal(live.settling, false);
    assert.notEqual(live.result, settled?.result);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
