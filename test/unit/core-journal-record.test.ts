// The journal's one type (src/core/lifecycle/journal-record.ts): every kind has a shape the reader accepts as written, a line
// of no known kind or shape is left out (counted), and a reader that leaves a kind out does not compile.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "../helpers/pi.js";
import {
  JOURNAL_KINDS,
  parseJournal,
  parseJournalRecord,
  type JournalKind,
  type JournalRecord,
  type JournalRecordOf,
} from "../../src/core/lifecycle/journal-record.js";

/** One record of each kind as its writer writes it: a kind added to the union without one here does not compile. */
const WRITTEN: { [K in JournalKind]: JournalRecordOf<K> } = {
  prompt_accepted: { type: "prompt_accepted", cycle: 1 },
  prompt_failed: { type: "prompt_failed", cycle: 1, error: "no API key" },
  settle: { type: "settle", cycle: 1, why: "agent_end", reason: { kind: "agent_end", stopReason: "stop" }, disk: "ok" },
  late_evidence: { type: "late_evidence", cycle: 1, what: "result" },
  parked: { type: "parked", cycle: 1 },
  stalled: { type: "stalled", cycle: 1, attempt: 1, error: "no hello" },
  interrupted: { type: "interrupted", code: "TIMEOUT" },
  closed: { type: "closed", closePane: true, via: "abort" },
  steered: { type: "steered", cycle: 1, n: 1, bytes: 5 },
  steer_taken: { type: "steer_taken", cycle: 1, n: 1 },
  steer_missed: { type: "steer_missed", cycle: 1, n: 2 },
  created: { type: "created", status: "queued" },
  admitted: { type: "admitted", queuedMs: 0 },
  worktree: { type: "worktree", path: "/w/t1", branch: "dsh/t1" },
  baseline: { type: "baseline", head: null, dirty: 1, dirtyAtStart: ["?? a"] },
  setup_started: { type: "setup_started", pgid: 4242 },
  setup: { type: "setup", ok: false, command: "npm ci", exitCode: null, cutOff: "timeout", copied: [".env"] },
  setup_ended: { type: "setup_ended", pgid: 4242, pids: [4243], why: "left running" },
  launched: { type: "launched", attempt: 1, runtime: "tmux", handle: { runtime: "tmux" }, adopted: true },
  prompt_sent: { type: "prompt_sent", cycle: 1, bytes: 10, via: "runtime" },
  finalize_prompt: { type: "finalize_prompt", cycle: 1, why: "no report" },
  contract_error: { type: "contract_error", cycle: 1, why: "no report twice" },
  report: { type: "report", cycle: 1, outcome: "needs_input" },
  runtime_gone: { type: "runtime_gone" },
  runtime_exited: { type: "runtime_exited", exit: { code: 1, signal: null } },
  respond: { type: "respond", cycle: 2, bytes: 3, requestId: "r1", remote: true },
  checks: {
    type: "checks",
    cycle: 1,
    verified: false,
    receipts: [{ command: "npm test", exitCode: 1, durationMs: 5, logPath: "/l" }],
    on: "merged",
  },
  landability: { type: "landability", cycle: 1, baseBranch: "main", baseHead: "abc", clean: false, conflicts: ["a"] },
  siblings: { type: "siblings", cycle: 1, conflicts: [{ taskId: "t2", paths: ["a"] }], from: "t2", warning: "w" },
  status: { type: "status", status: "completed", cycle: 1, settled: true, sessionOffset: 9, remote: true, ts: 5 },
  landed: { type: "landed", cycle: 1, commit: "abc", strategy: "merge", baseBranch: "main", recovered: true },
  recovered: { type: "recovered", plan: "resume_running", alive: true, status: "running", cycle: 1 },
  owner_moved: { type: "owner_moved", from: "cli", to: "owner-a" },
  remote_cycle: { type: "remote_cycle", cycle: 2 },
  remote_spawned: { type: "remote_spawned", label: "box", remoteTaskId: "t9", requestId: "r1" },
  remote_request: { type: "remote_request", requestId: "r2", method: "task.respond", cycle: 2 },
  remote_request_refused: { type: "remote_request_refused", requestId: "r2", code: "BAD_STATE", message: "no" },
};

test("every kind, as its writer writes it, is read back whole (through JSON, as on disk)", () => {
  assert.deepEqual(Object.keys(WRITTEN).sort(), [...JOURNAL_KINDS].sort());
  for (const r of Object.values(WRITTEN)) {
    const line = JSON.parse(JSON.stringify(r)) as unknown;
    assert.deepEqual(parseJournalRecord(line), r, r.type);
  }
});

test("a line of no known kind, or missing what its readers act on, is left out and counted; a wrong optional field is dropped", () => {
  const lines: unknown[] = [
    { type: "settled" }, // no such kind (a typo, a newer daemon's)
    { type: "respond" }, // no cycle: recovery could not place it
    { type: "status", status: 3, cycle: 1 },
    "a string",
    null,
    [1],
    { type: "prompt_sent", cycle: 2, via: "carrier pigeon", bytes: "x" },
    { type: "settle", cycle: 1, why: "gone_fishing", reason: { kind: "gone_fishing" } },
  ];
  const { records, unknown } = parseJournal(lines);
  assert.equal(unknown, 6);
  assert.deepEqual(records, [
    { type: "prompt_sent", cycle: 2 },
    // The cycle still settled (recovery does not run it again); the reason is not one this daemon can carry out.
    { type: "settle", cycle: 1, why: "gone_fishing" },
  ]);
});

test("a reader's switch that leaves a kind out does not compile (the readers end theirs with `satisfies never`)", () => {
  const reader = (e: JournalRecord): string => {
    switch (e.type) {
      case "settle":
      case "status":
        return e.type;
      default:
        // @ts-expect-error: the kinds this switch left out are not `never`
        e satisfies never;
        return "ignored";
    }
  };
  assert.equal(reader(WRITTEN.status), "status");
  // The readers that decide from the journal keep the check (recovery's replay, verify's, the relay's request restore).
  const src = join(repoRoot, "src");
  for (const f of ["daemon/recover/recover-replay.ts", "core/lifecycle/verify.ts"]) {
    const text = readFileSync(join(src, f), "utf8");
    assert.match(text, /e satisfies never/, `${f} switches exhaustively over the journal's kinds`);
    assert.doesNotMatch(text, /typeof e\.(cycle|status|n|code|path|from|pgid)\b/, `${f} reads typed fields`);
  }
});
