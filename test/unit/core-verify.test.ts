// verify's rebuild (src/core/lifecycle/verify.ts), pure: a journal with a settle record and the harvest's pinned status record,
// result.json as the daemon builds it (resultFromPin), and what a hand edit or a disagreeing journal looks like.
import { test } from "node:test";
import assert from "node:assert/strict";
import { resultFromPin, type HarvestPin } from "../../src/core/lifecycle/harvest-pin.js";
import { parseYaml } from "../../src/core/result/result-md.js";
import {
  checkTask as checkWith,
  describeDifference,
  journalVerdict,
  type VerifyInput,
  type VerifyRecord,
} from "../../src/core/lifecycle/verify.js";

const checkTask = (i: Omit<VerifyInput, "parseYaml">) => checkWith({ ...i, parseYaml });
import { SessionReader } from "../../src/core/session/session-reader.js";
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
const pin = (over: Partial<HarvestPin> = {}): HarvestPin => ({
  agent: { name: "worker-x", kind: "pi", model: "m/x", thinking: "off", runtime: "headless" },
  timing: { createdAt: 1000, promptedAt: 1100, settledAt: 1500 },
  runtime: "idle",
  settled: true,
  fresh: false,
  resultMd: { file: "result.c1.md", sha256: "a".repeat(64) },
  warnings: ["a git warning"],
  ...over,
});
const journal = (p: HarvestPin, reason: object, status: string) =>
  records([
    { type: "prompt_sent", cycle: 1 },
    { type: "settle", cycle: 1, why: (reason as { kind: string }).kind, reason },
    { type: "status", status, cycle: 1, settled: true, sessionOffset: 0, pin: p },
  ]);
const readPinned = (name: string) =>
  name === "result.c1.md" ? { text: RESULT_MD, sha256: "a".repeat(64) } : undefined;
const stored = (p: HarvestPin, reason?: NonNullable<Parameters<typeof resultFromPin>[2]>["reason"]): AgentResult =>
  resultFromPin(record, p, {
    resultMd: { meta: { status: "completed", summary: "Did the thing" }, body: "The body.", warnings: [] },
    ...(reason ? { reason } : {}),
  });

test("a result built from its pin agrees with the rebuild, field by field; nothing is left unchecked", () => {
  const p = pin();
  const r = stored(p, { kind: "agent_end", stopReason: "stop" });
  const v = checkTask({
    events: journal(p, { kind: "agent_end", stopReason: "stop" }, "completed"),
    result: r,
    record,
    readPinned,
  });
  assert.deepEqual(v, { differences: [], unchecked: [] });
  assert.equal(r.summary, "Did the thing");
});

test("a hand-edited summary, text and warning are named with what the task dir says", () => {
  const p = pin();
  const r = stored(p, { kind: "agent_end" });
  const edited = { ...r, summary: "EDITED", result: { ...r.result!, text: "EDITED body" }, warnings: [] };
  const v = checkTask({ events: journal(p, { kind: "agent_end" }, "completed"), result: edited, record, readPinned });
  const lines = v.differences.map(describeDifference);
  assert.ok(lines.includes("summary: result.json says EDITED, the task dir says Did the thing"), lines.join("\n"));
  assert.ok(lines.includes("result.text: result.json says EDITED body, the task dir says The body."), lines.join("\n"));
  assert.ok(
    lines.some((l) => l.startsWith("warnings: ") && l.includes("a git warning")),
    lines.join("\n"),
  );
});

test("the verdict wins: result.json completed against a contract error's settle record", () => {
  const p = pin({ resultMd: undefined });
  // What a made-up recovery wrote: completed, although the journal's settle record says contract_error.
  const wrong = resultFromPin(record, p, {});
  assert.equal(wrong.status, "completed");
  const v = checkTask({ events: journal(p, { kind: "contract_error" }, "failed"), result: wrong, record });
  const lines = v.differences.map(describeDifference);
  assert.ok(
    lines.includes("status: result.json says completed, the journal says failed (CONTRACT_ERROR)"),
    lines.join("\n"),
  );
  assert.ok(lines.some((l) => l.startsWith("error.code: result.json says nothing, the journal says CONTRACT_ERROR")));
});

test("the pinned copy of result.md and diff.patch are checked against their digests", () => {
  const p = pin({ diffSha256: "d".repeat(64) });
  const r = stored(p, { kind: "agent_end" });
  const v = checkTask({
    events: journal(p, { kind: "agent_end" }, "completed"),
    result: r,
    record,
    readPinned: () => ({ text: RESULT_MD, sha256: "b".repeat(64) }),
    patch: { bytes: 10, sha256: "e".repeat(64) },
  });
  assert.deepEqual(
    v.differences.map((d) => d.field),
    ["result.md", "diff.patch"],
  );
});

test("the session is read up to the pinned offset: usage and the model pi ran come from it", () => {
  const lines = [
    { type: "session", version: 3, id: "s", timestamp: "2026-01-01T00:00:00.000Z", cwd: "/repo" },
    {
      type: "message",
      id: "a1",
      timestamp: "2026-01-01T00:00:01.000Z",
      message: {
        role: "assistant",
        content: [{ type: "text", text: "done" }],
        provider: "held",
        model: "m",
        usage: { input: 1, output: 7, cacheRead: 0, cacheWrite: 0, totalTokens: 8 },
        stopReason: "stop",
        timestamp: 1,
      },
    },
  ];
  const text = lines.map((l) => JSON.stringify(l)).join("\n") + "\n";
  const facts = (offset: number) => {
    const reader = new SessionReader();
    reader.push(Buffer.from(text).subarray(0, offset));
    return reader.facts();
  };
  const p = pin({ session: true, resultMd: undefined });
  const events = journal(p, { kind: "agent_end" }, "completed");
  (events[2] as { sessionOffset: number }).sessionOffset = Buffer.byteLength(text);
  const r = resultFromPin(record, p, { session: facts(Buffer.byteLength(text)), reason: { kind: "agent_end" } });
  assert.equal(r.agent.model, "held/m");
  const ok = checkTask({ events, result: r, record, sessionUpTo: facts });
  assert.deepEqual(ok.differences, []);
  const edited = { ...r, usage: { ...r.usage!, outputTokens: 99 }, agent: { ...r.agent, model: "default" } };
  const bad = checkTask({ events, result: edited, record, sessionUpTo: facts }).differences.map(describeDifference);
  assert.ok(bad.includes("agent.model: result.json says default, the session says held/m"), bad.join("\n"));
  assert.ok(bad.includes("usage.outputTokens: result.json says 99, the session says 7"), bad.join("\n"));
});

test("a task dir from before harvests were pinned: the old checks, and what could not be checked is said", () => {
  const events = records([
    { type: "settle", cycle: 1, why: "agent_end", reason: { kind: "agent_end" } },
    { type: "status", status: "completed", cycle: 1, settled: true, sessionOffset: 0 },
  ]);
  const r = stored(pin(), { kind: "agent_end" });
  const v = checkTask({ events, result: { ...r, summary: "anything" }, record });
  assert.deepEqual(v.differences, []);
  assert.match(v.unchecked.join(), /written before harvests were pinned/);
});

test("the journal replayed through the machine: abort of a settled cycle closes it with its verdict kept", () => {
  const p = pin();
  const events = records([
    ...journal(p, { kind: "agent_end" }, "completed"),
    { type: "closed", closePane: false, via: "abort" },
    { type: "status", status: "closed", cycle: 1, sessionOffset: 0 },
  ]);
  const j = journalVerdict(events);
  assert.equal(j.phase.name, "closed");
  assert.equal(j.closedAfterSettle, true);
  const closed = { ...stored(p, { kind: "agent_end" }), status: "closed" as const, nextAction: "none" as const };
  assert.deepEqual(checkTask({ events, result: closed, record, readPinned }).differences, []);
});

test("a cycle paused at a spend cap rebuilds from its settle record: blocked, its cap and its words; an edit is named", () => {
  const reason = { kind: "cap", cap: "cost", limit: 5, spent: 7, step: 5 } as const;
  // The harvest read the runtime idle (the turn was stopped): only the settle record's reason says blocked.
  const p = pin();
  const r = stored(p, reason);
  assert.equal(r.status, "blocked");
  assert.deepEqual(r.cap, { cap: "cost", limit: 5, spent: 7, step: 5 });
  assert.match(r.summary, /cost cap .* reached/);
  const events = journal(p, reason, "blocked");
  assert.deepEqual(checkTask({ events, result: r, record, readPinned }), { differences: [], unchecked: [] });
  // A result that forgot the cap, or called the paused cycle completed, is not what the task dir says.
  const { cap: _cap, ...noCap } = r;
  const asCompleted = { ...(noCap as AgentResult), status: "completed" as const, summary: "Did the thing" };
  const lines = checkTask({ events, result: asCompleted, record, readPinned }).differences.map(describeDifference);
  assert.ok(
    lines.some((l) => l.startsWith("status: result.json says completed, the journal says blocked")),
    lines.join("\n"),
  );
  assert.ok(
    lines.some((l) => l.startsWith("cap.cap: result.json says nothing")),
    lines.join("\n"),
  );
  assert.ok(
    lines.some((l) => l.startsWith("summary: result.json says Did the thing")),
    lines.join("\n"),
  );
});

test("steers in the journal change no verdict; a missed steer's warning is pinned with the harvest", () => {
  const note =
    "a message sent with respond (steer.1.2.md in the task dir) did not reach the child: cycle 1 ended before pi took it; respond again to send it as a follow-up";
  const p = pin({ warnings: ["a git warning", note] });
  const r = stored(p, { kind: "agent_end", stopReason: "stop" });
  const events = records([
    { type: "prompt_sent", cycle: 1 },
    { type: "steered", cycle: 1, n: 1, bytes: 5 },
    { type: "steer_taken", cycle: 1, n: 1 },
    { type: "steered", cycle: 1, n: 2, bytes: 5 },
    { type: "settle", cycle: 1, why: "agent_end", reason: { kind: "agent_end", stopReason: "stop" } },
    { type: "steer_missed", cycle: 1, n: 2 },
    { type: "status", status: "completed", cycle: 1, settled: true, sessionOffset: 0, pin: p },
  ]);
  assert.deepEqual(checkTask({ events, result: r, record, readPinned }), { differences: [], unchecked: [] });
  assert.ok(r.warnings?.includes(note));
  const dropped = { ...r, warnings: r.warnings!.filter((w) => w !== note) };
  const lines = checkTask({ events, result: dropped, record, readPinned }).differences.map(describeDifference);
  assert.ok(
    lines.some((l) => l.startsWith("warnings: ") && l.includes("steer.1.2.md")),
    lines.join("\n"),
  );
});

test("a sibling's warning set on a settled result after its harvest (siblings{from}) is applied by the rebuild", () => {
  const p = pin();
  const r = stored(p, { kind: "agent_end" });
  const warning =
    "conflicts with sibling task tother1234567 (worker-x-4567) in 1 path(s): a.txt; land one of the two, then respond to the other to rebase its work onto it";
  const told = { ...r, warnings: [...(r.warnings ?? []), warning] };
  const events = records([
    ...journal(p, { kind: "agent_end" }, "completed"),
    {
      type: "siblings",
      cycle: 1,
      conflicts: [{ taskId: "tother1234567", paths: ["a.txt"] }],
      from: "tother1234567",
      warning,
    },
  ]);
  assert.deepEqual(checkTask({ events, result: told, record, readPinned }), { differences: [], unchecked: [] });
  // Without the record the warning is not the task dir's; a later record that drops it drops it in the rebuild too.
  const without = checkTask({ events: events.slice(0, -1), result: told, record, readPinned }).differences;
  assert.deepEqual(
    without.map((d) => d.field),
    ["warnings"],
  );
  const dropped = records([...events, { type: "siblings", cycle: 1, conflicts: [], from: "tother1234567" }]);
  assert.deepEqual(checkTask({ events: dropped, result: r, record, readPinned }), { differences: [], unchecked: [] });
});

test("a relayed cycle settled by this daemon's own verdict (REMOTE_INVALID, REMOTE_LOST) verifies clean; its error is checked", () => {
  const remoteResult = (status: "failed" | "gone" | "closed", code: string): AgentResult => ({
    schemaVersion: 1,
    taskId: record.taskId,
    status,
    role: "worker",
    agent: { name: "worker-x", kind: "pi", model: "m/x", thinking: "off", machine: "box", runtime: "headless" },
    herdrStatus: "unknown",
    summary: "refused",
    timing: { createdAt: 1000, settledAt: 1500, elapsedMs: 500 },
    nextAction: status === "closed" ? "none" : "inspect",
    cwd: "/srv/work",
    owner: "cli",
    error: { code, message: `${code}: the words` },
  });
  const relayed = (reason: object, status: string) =>
    records([
      { type: "remote_request", requestId: "r12345678", method: "task.spawn", cycle: 1 },
      { type: "remote_spawned", label: "box", remoteTaskId: "tzzz00000000", requestId: "r12345678" },
      { type: "settle", cycle: 1, why: (reason as { kind: string }).kind, reason, remote: true },
      { type: "status", status, cycle: 1, settled: true, remote: true },
    ]);
  const invalid = { kind: "remote_invalid", field: "usage.assistant", message: "REMOTE_INVALID: the words" };
  const lost = { kind: "remote_lost", message: "REMOTE_LOST: the words" };
  for (const [reason, status, code] of [
    [invalid, "failed", "REMOTE_INVALID"],
    [lost, "gone", "REMOTE_LOST"],
  ] as const) {
    const events = relayed(reason, status);
    assert.deepEqual(journalVerdict(events).reason, reason, "the settle record's reason is read back");
    const clean = checkTask({ events, result: remoteResult(status, code), record });
    assert.deepEqual(clean.differences.map(describeDifference), [], `${code}: verify agrees`);
    // Closed here afterwards: the closed result keeps the verdict's error.
    const closed = checkTask({
      events: records([...events, { type: "closed", closePane: false, remote: true }]),
      result: remoteResult("closed", code),
      record,
    });
    assert.deepEqual(closed.differences.map(describeDifference), [], `${code}: closed, verify agrees`);
    // A result that drops the verdict's error for another one is named.
    const edited = checkTask({ events, result: remoteResult(status, "AGENT_ERROR"), record });
    assert.ok(
      edited.differences.map(describeDifference).some((l) => l.startsWith("error.code: ") && l.includes(code)),
      edited.differences.map(describeDifference).join("\n"),
    );
  }
});
