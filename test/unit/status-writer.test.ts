// One writer of a task record's status: recordStatus (src/core/result/derive.ts), from the verdict of the place it changes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { repoRoot } from "../helpers/pi.js";
import { nextActionFor, recordStatus, statusFor, type StatusVerdict } from "../../src/core/result/derive.js";
import type { AgentStatus } from "../../src/core/types.js";
import { runningAgain } from "../../src/daemon/relay/relay-commands.js";

const src = join(repoRoot, "src");
function files(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? files(p) : p.endsWith(".ts") ? [p] : [];
  });
}

test("exactly one module assigns a task record's status: src/core/result/derive.ts (recordStatus)", () => {
  const writers = files(src)
    .filter((f) => /\b(rec|record)\.status\s*=(?!=)/.test(readFileSync(f, "utf8")))
    .map((f) => relative(src, f));
  assert.deepEqual(writers, ["core/result/derive.ts"]);
});

test("statusFor: each verdict gives the status the flowchart does", () => {
  const all: AgentStatus[] = [
    "starting",
    "working",
    "running",
    "idle",
    "completed",
    "failed",
    "blocked",
    "gone",
    "interrupted",
    "closed",
  ];
  const table: [StatusVerdict, AgentStatus][] = [
    ...all.map((s): [StatusVerdict, AgentStatus] => [{ kind: "result", status: s }, s]),
    [{ kind: "start_again" }, "starting"],
    [{ kind: "follow_up_journaled" }, "working"],
    [{ kind: "running_there" }, "running"],
  ];
  for (const [v, want] of table) {
    const rec = { status: "completed" as AgentStatus };
    assert.equal(statusFor(v), want, JSON.stringify(v));
    assert.equal(recordStatus(rec, v), want);
    assert.equal(rec.status, want, "the record holds it");
  }
  // A cycle recovery or the relay starts again is one to wait for, never a settled one.
  for (const kind of ["start_again", "follow_up_journaled", "running_there"] as const)
    assert.equal(nextActionFor(statusFor({ kind })), "wait", kind);
});

test("runningAgain: a relayed task's new cycle reads running with the flowchart's next action, the last error gone", () => {
  const settled = {
    schemaVersion: 1,
    taskId: "tmg3k2a1b2c3",
    status: "failed",
    nextAction: "inspect",
    error: { code: "AGENT_ERROR", message: "it broke" },
  };
  const again = runningAgain(settled as never);
  assert.equal(again.status, "running");
  assert.equal(again.nextAction, nextActionFor("running"));
  assert.equal(again.error, undefined);
});
