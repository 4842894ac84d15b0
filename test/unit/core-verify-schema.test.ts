// verify names an edited schemaVersion: a reader of result.json decides how to read it from that field.
import { test } from "node:test";
import assert from "node:assert/strict";
import { resultFromPin, type HarvestPin } from "../../src/core/lifecycle/harvest-pin.js";
import { parseYaml } from "../../src/core/result/result-md.js";
import {
  checkTask as checkWith,
  describeDifference,
  type VerifyInput,
  type VerifyRecord,
} from "../../src/core/lifecycle/verify.js";

const checkTask = (i: Omit<VerifyInput, "parseYaml">) => checkWith({ ...i, parseYaml });
import type { AgentResult } from "../../src/core/types.js";
import { parseJournal } from "../../src/core/lifecycle/journal-record.js";

/** Journal records as the store reads them back (parsed into known kinds). */
const records = (xs: readonly unknown[]) => parseJournal(xs).records;

const record: VerifyRecord = {
  taskId: "tabc123456789",
  role: "worker",
  brief: "b",
  cwd: "/repo",
  owner: "cli",
  sessionPath: "/home/tasks/tabc123456789/session.jsonl",
  resultPath: "/home/tasks/tabc123456789/result.md",
  cycle: 1,
};
const RESULT_MD = "---\nstatus: completed\nsummary: Did the thing\n---\nThe body.\n";
const pin: HarvestPin = {
  agent: { name: "worker-x", kind: "pi", model: "m/x", thinking: "off", runtime: "headless" },
  timing: { createdAt: 1000, promptedAt: 1100, settledAt: 1500 },
  runtime: "idle",
  settled: true,
  fresh: false,
  resultMd: { file: "result.c1.md", sha256: "a".repeat(64) },
};
const events = records([
  { type: "prompt_sent", cycle: 1 },
  { type: "settle", cycle: 1, why: "agent_end", reason: { kind: "agent_end" } },
  { type: "status", status: "completed", cycle: 1, settled: true, sessionOffset: 0, pin },
]);
const readPinned = (name: string) =>
  name === "result.c1.md" ? { text: RESULT_MD, sha256: "a".repeat(64) } : undefined;

test("an edited schemaVersion is named; the untouched one agrees", () => {
  const r = resultFromPin(record, pin, {
    resultMd: { meta: { status: "completed", summary: "Did the thing" }, body: "The body.", warnings: [] },
    reason: { kind: "agent_end" },
  });
  assert.deepEqual(checkTask({ events, result: r, record, readPinned }).differences, []);
  const edited = { ...r, schemaVersion: 2 } as unknown as AgentResult;
  const lines = checkTask({ events, result: edited, record, readPinned }).differences.map(describeDifference);
  assert.ok(lines.includes("schemaVersion: result.json says 2, the task dir says 1"), lines.join("\n"));
});
