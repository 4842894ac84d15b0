import { test } from "node:test";
import assert from "node:assert/strict";
import {
  REMINDER_INTERVAL,
  StatusContext,
  appendStatus,
  insertMissingStatus,
  type ContextMessage,
} from "../../src/core/crew/crew-status.js";

test("an owner that never had open work gets nothing, ever", () => {
  const s = new StatusContext("o");
  s.setOpen([]);
  for (let i = 0; i < 30; i++) s.modelCall();
  assert.equal(s.atBoundary(), null);
});

test("snapshots: on change only, coalesced between boundaries, one empty list after the last close", () => {
  const s = new StatusContext("o");
  s.setOpen([
    { subagent_id: "t2", status: "running" },
    { subagent_id: "t1", status: "running" },
  ]);
  const first = s.atBoundary()!;
  assert.equal(first.customType, "crew_status");
  assert.equal(
    first.content,
    '{"crew_status":[{"subagent_id":"t1","status":"running"},{"subagent_id":"t2","status":"running"}]}',
  );
  assert.equal(s.atBoundary(), null, "no change, no snapshot");
  // two changes between boundaries → one snapshot of the latest state
  s.setOpen([
    { subagent_id: "t1", status: "completed" },
    { subagent_id: "t2", status: "running" },
  ]);
  s.setOpen([
    { subagent_id: "t1", status: "completed" },
    { subagent_id: "t2", status: "needs_input" },
  ]);
  const second = s.atBoundary()!;
  assert.match(second.content, /"t1","status":"completed".*"t2","status":"needs_input"/);
  assert.notEqual(second.details.statusId, first.details.statusId);
  s.setOpen([]);
  assert.equal(s.atBoundary()!.content, '{"crew_status":[]}');
  assert.equal(s.atBoundary(), null, "the empty list comes once");
});

test("reminders: after ten model calls, only sessions awaiting the owner; a snapshot wins and resets the count", () => {
  const s = new StatusContext("o");
  s.setOpen([
    { subagent_id: "t1", status: "running" },
    { subagent_id: "t2", status: "completed" },
  ]);
  assert.equal(s.atBoundary()!.customType, "crew_status");
  for (let i = 0; i < REMINDER_INTERVAL - 1; i++) s.modelCall();
  assert.equal(s.atBoundary(), null, "nine calls are not enough");
  s.modelCall();
  const r = s.atBoundary()!;
  assert.equal(r.customType, "crew_reminder");
  assert.equal(r.content, '{"crew_reminder":[{"subagent_id":"t2","status":"completed"}]}');
  assert.equal(s.atBoundary(), null, "the reminder reset the counter");
  for (let i = 0; i < REMINDER_INTERVAL; i++) s.modelCall();
  s.setOpen([
    { subagent_id: "t1", status: "needs_input" },
    { subagent_id: "t2", status: "completed" },
  ]);
  assert.equal(s.atBoundary()!.customType, "crew_status", "a changed state wins over a due reminder");
  assert.equal(s.atBoundary(), null, "and resets the count");
});

test("running sessions never cause reminders", () => {
  const s = new StatusContext("o");
  s.setOpen([{ subagent_id: "t1", status: "running" }]);
  s.atBoundary();
  for (let i = 0; i < 50; i++) s.modelCall();
  assert.equal(s.atBoundary(), null);
});

test("after compaction drops the snapshot a fresh one follows while work is open; restore avoids a duplicate", () => {
  const s = new StatusContext("o");
  s.setOpen([{ subagent_id: "t1", status: "running" }]);
  const a = s.atBoundary()!;
  s.snapshotLost();
  assert.equal(s.atBoundary()!.content, a.content);
  const r = new StatusContext("o2");
  r.restore(a.content, true);
  r.setOpen([{ subagent_id: "t1", status: "running" }]);
  assert.equal(r.atBoundary(), null, "the persisted snapshot already says this");
  r.setOpen([]);
  assert.equal(r.atBoundary()!.content, '{"crew_status":[]}');
});

test("insertMissingStatus puts persisted status messages back by timestamp and moves nothing else", () => {
  const u = (t: number): ContextMessage => ({ role: "user", timestamp: t });
  const st = (t: number, id: string): ContextMessage => ({
    role: "custom",
    customType: "crew_status",
    timestamp: t,
    details: { statusId: id },
  });
  const messages = [u(1), u(3), st(5, "s2"), u(7)];
  const persisted = [st(2, "s1"), st(5, "s2"), st(8, "s3")];
  const out = insertMissingStatus(messages, persisted);
  assert.deepEqual(
    out.map((m) => m.timestamp),
    [1, 2, 3, 5, 7, 8],
  );
  assert.deepEqual(
    out.filter((m) => m.role === "user"),
    messages.filter((m) => m.role === "user"),
  );
  assert.equal(insertMissingStatus(out, persisted), out, "nothing missing: the same array");
  assert.equal(insertMissingStatus(out, persisted).length, 6, "never duplicated");
});

test("a status message sent after a request's last message stays right after it, even when the next answer has the same millisecond", () => {
  const s = new StatusContext("o");
  s.setOpen([{ subagent_id: "t1", status: "running" }]);
  const tool: ContextMessage = { role: "toolResult", timestamp: 100 };
  const sent = appendStatus([{ role: "user", timestamp: 50 }, tool], s.atBoundary()!, 100);
  const status = sent.at(-1)!;
  assert.deepEqual((status.details as { after?: unknown }).after, { role: "toolResult", timestamp: 100 });
  // The next request: pi's own list lacks the status message; the answer to the first request has the same time.
  const next: ContextMessage[] = [
    { role: "user", timestamp: 50 },
    tool,
    { role: "assistant", timestamp: 100 },
    { role: "user", timestamp: 200 },
  ];
  const out = insertMissingStatus(next, [status]);
  assert.deepEqual(
    out.map((m) => m.role),
    ["user", "toolResult", "custom", "assistant", "user"],
    "where it was sent, not after the equal-time answer",
  );
  assert.deepEqual(out.slice(0, sent.length), sent, "the prefix the model saw is unchanged");
  assert.equal(insertMissingStatus(out, [status]), out, "never twice");
});
