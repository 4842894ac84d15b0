// What a remote result must be before the relay takes it (src/daemon/relay/remote-check.ts), and how a link's client
// reads a reply over the frame limit (src/protocol/frames.ts). The real-ssh cases are in
// test/integration/remote-untrusted.test.ts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { FrameReader, frameHead } from "../../src/protocol/frames.js";
import { checkRemoteResult, checkSize, RemoteViolation } from "../../src/daemon/relay/remote-check.js";

const ID = "tmx7abcdefgh";

function result(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    schemaVersion: 1,
    taskId: ID,
    status: "completed",
    role: "worker",
    agent: { name: "w", kind: "pi", model: "p/m", thinking: "off" },
    herdrStatus: "done",
    summary: "ok",
    timing: { createdAt: 1 },
    nextAction: "none",
    ...extra,
  };
}

function violation(raw: unknown, settled = true): RemoteViolation {
  try {
    checkRemoteResult(raw, { remoteTaskId: ID, settled });
  } catch (e) {
    assert.ok(e instanceof RemoteViolation, String(e));
    return e;
  }
  assert.fail("accepted");
}

test("a valid result is taken; a field this version does not know is dropped", () => {
  const r = checkRemoteResult(result({ futureField: { x: 1 } }), { remoteTaskId: ID, settled: true });
  assert.equal(r.status, "completed");
  assert.equal((r as unknown as Record<string, unknown>).futureField, undefined);
});

test("each violation names its field", () => {
  assert.equal(
    violation(result({ usage: { assistant: "many", toolCalls: 1, outputTokens: 2 } })).field,
    "usage.assistant",
  );
  assert.equal(violation({ ...result(), summary: undefined }).field, "summary");
  assert.equal(violation(result({ status: "bogus" })).field, "status");
  assert.equal(violation(result({ taskId: "tzzzzzzzzzzz" })).field, "taskId");
  const running = violation(result({ status: "running", nextAction: "wait" }));
  assert.equal(running.field, "status");
  assert.match(running.why, /no settled status/);
  // The same running status is fine as a live status.
  checkRemoteResult(result({ status: "running", nextAction: "wait" }), { remoteTaskId: ID, settled: false });
  assert.equal(violation(result({ sessionPath: "relative/s.jsonl" })).field, "sessionPath");
  assert.equal(violation(result({ sessionPath: "/a/../etc/passwd" })).field, "sessionPath");
  assert.equal(violation(result({ cwd: "/x\u001b]0;t\u0007" })).field, "cwd");
  const diff = (patchPath: string) => ({
    diff: {
      baselineHead: null,
      stat: "",
      files: [],
      untracked: [],
      patchPath,
      patchBytes: 1,
      truncated: false,
      dirtyAtStart: [],
    },
  });
  checkRemoteResult(result(diff(`/home/u/.dsh/herdr/tasks/${ID}/diff.patch`)), { remoteTaskId: ID, settled: true });
  const stolen = violation(result(diff("/etc/shadow")));
  assert.equal(stolen.field, "diff.patchPath");
  assert.match(stolen.why, /not that task's own diff\.patch/);
  assert.equal(violation(result({ warnings: ["x".repeat(17 * 1024)] })).field, "warnings[0]");
  assert.equal(violation("not an object").field, "result");
});

test("sizes over the bound are refused by name", () => {
  checkSize("result", 1024, 2048);
  assert.throws(
    () => checkSize("result", 4096, 2048),
    (e: RemoteViolation) => e.field === "result" && /over the bound/.test(e.why),
  );
  assert.throws(() => checkSize("result", -1, 2048), RemoteViolation);
});

test("a reply over the frame limit is refused at once by its id; the frame that starts in the chunk that ends it is read whole", () => {
  // What a link's client relies on (the link adds nothing): the refusal comes at the first byte over the limit,
  // tied to the request by the reply's head, and the next reply, starting in the same pipe chunk, is intact.
  const r = new FrameReader(100);
  const big = `{"id":7,"result":"${"y".repeat(300)}"}\n`;
  const next = `{"id":8,"result":{"page":1}}\n`;
  const events = [
    ...r.push(Buffer.from(big.slice(0, 5))),
    ...r.push(Buffer.from(big.slice(5, 200))),
    ...r.push(Buffer.from(big.slice(200) + next.slice(0, 10))),
    ...r.push(Buffer.from(next.slice(10))),
  ];
  assert.equal(events.length, 2, JSON.stringify(events));
  const [over, frame] = events;
  assert.equal(over!.kind, "oversized");
  assert.deepEqual(frameHead((over as { head: string }).head), { id: 7 });
  assert.equal(frame!.kind, "frame");
  assert.deepEqual(JSON.parse((frame as { text: string }).text), { id: 8, result: { page: 1 } });
});
