import { test } from "node:test";
import assert from "node:assert/strict";
import {
  deriveStatus,
  nextActionFor,
  normalizeResultStatus,
  resultStatusWarning,
  type RawState,
} from "../../src/core/result/derive.js";
import type { AgentStatus, HerdrStatus } from "../../src/core/types.js";

const base: RawState = { external: false, runtime: "idle", sessionError: false };

test("flowchart: runtime state alone decides blocked, running and gone", () => {
  const cases: [HerdrStatus | "missing", AgentStatus][] = [
    ["blocked", "blocked"],
    ["working", "running"],
    ["unknown", "running"],
    ["missing", "gone"],
  ];
  for (const [runtime, want] of cases) {
    // a session error or a result.md verdict does not matter until the agent is idle/done
    assert.equal(deriveStatus({ ...base, runtime, sessionError: true, resultStatus: "failed" }), want, runtime);
  }
});

test("flowchart: idle/done with a session error is failed, whatever result.md says", () => {
  for (const runtime of ["idle", "done"] as const) {
    assert.equal(deriveStatus({ ...base, runtime, sessionError: true, resultStatus: "completed" }), "failed");
  }
});

test("flowchart: idle/done without session error follows result.md status", () => {
  for (const runtime of ["idle", "done"] as const) {
    assert.equal(deriveStatus({ ...base, runtime, resultStatus: "failed" }), "failed");
    assert.equal(deriveStatus({ ...base, runtime, resultStatus: "blocked" }), "blocked");
    assert.equal(deriveStatus({ ...base, runtime, resultStatus: "completed" }), "completed");
    assert.equal(deriveStatus({ ...base, runtime }), "completed", "absent status reads as completed");
  }
});

test("result.md status is read case- and space-insensitively; unknown values read as completed with a warning", () => {
  assert.equal(deriveStatus({ ...base, resultStatus: " FAILED " }), "failed");
  assert.equal(normalizeResultStatus("Blocked"), "blocked");
  assert.equal(deriveStatus({ ...base, resultStatus: "partial" }), "completed");
  assert.match(resultStatusWarning("partial") ?? "", /"partial" is not completed\/failed\/blocked/);
  assert.equal(resultStatusWarning("completed"), undefined);
  assert.equal(resultStatusWarning(undefined), undefined);
});

test("external records are observational: idle/done → idle, working → running, blocked → blocked, missing → gone", () => {
  const ext = { ...base, external: true, sessionError: true, resultStatus: "failed" };
  assert.equal(deriveStatus({ ...ext, runtime: "idle" }), "idle");
  assert.equal(deriveStatus({ ...ext, runtime: "done" }), "idle");
  assert.equal(deriveStatus({ ...ext, runtime: "working" }), "running");
  assert.equal(deriveStatus({ ...ext, runtime: "blocked" }), "blocked");
  assert.equal(deriveStatus({ ...ext, runtime: "missing" }), "gone");
});

test("lifecycle overrides win over every runtime state", () => {
  for (const lifecycle of ["starting", "closed", "interrupted"] as const) {
    for (const runtime of ["idle", "working", "blocked", "missing"] as const) {
      assert.equal(deriveStatus({ ...base, runtime, sessionError: true, lifecycle }), lifecycle);
      assert.equal(deriveStatus({ ...base, external: true, runtime, lifecycle }), lifecycle);
    }
  }
});

test("nextActionFor covers every status", () => {
  const want: Record<AgentStatus, string> = {
    completed: "none",
    closed: "none",
    idle: "none",
    starting: "wait",
    working: "wait",
    running: "wait",
    blocked: "answer",
    failed: "inspect",
    gone: "inspect",
    interrupted: "inspect",
  };
  for (const [status, action] of Object.entries(want)) {
    assert.equal(nextActionFor(status as AgentStatus), action, status);
  }
});
