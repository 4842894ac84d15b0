import { test } from "node:test";
import assert from "node:assert/strict";
import { isRetryableError, SessionReader, sessionErrorOf } from "../../src/core/session/session-reader.js";

// pi 0.73.1's real session file from an offline run (shared/reference/pi.md §1.4), verbatim.
const PI_RUN = [
  `{"type":"session","version":3,"id":"01a22ae8-a338-719c-ac94-168ce2f5e4fc","timestamp":"2026-11-30T05:23:38.937Z","cwd":"/home/dev/demo/work"}`,
  `{"type":"model_change","id":"db4166c7","parentId":null,"timestamp":"2026-11-30T05:23:38.955Z","provider":"fake","modelId":"fake-model"}`,
  `{"type":"thinking_level_change","id":"1738bdf2","parentId":"db4166c7","timestamp":"2026-11-30T05:23:38.955Z","thinkingLevel":"off"}`,
  `{"type":"message","id":"98006b9d","parentId":"1738bdf2","timestamp":"2026-11-30T05:23:38.965Z","message":{"role":"user","content":[{"type":"text","text":"Create hello.txt please"}],"timestamp":1796016218963}}`,
  `{"type":"message","id":"62f4f9f6","parentId":"98006b9d","timestamp":"2026-11-30T05:23:39.066Z","message":{"role":"assistant","content":[{"type":"thinking","thinking":"I should write the file.","thinkingSignature":"reasoning_content"},{"type":"toolCall","id":"call_fake_1","name":"write","arguments":{"path":"hello.txt","content":"hello from fake model\\n"}}],"api":"openai-completions","provider":"fake","model":"fake-model","usage":{"input":1202,"output":42,"cacheRead":0,"cacheWrite":0,"totalTokens":1244,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"toolUse","timestamp":1796016219000,"responseId":"chatcmpl-fake-2"}}`,
  `{"type":"message","id":"13a07c17","parentId":"62f4f9f6","timestamp":"2026-11-30T05:23:39.078Z","message":{"role":"toolResult","toolCallId":"call_fake_1","toolName":"write","content":[{"type":"text","text":"Successfully wrote 22 bytes to hello.txt"}],"isError":false,"timestamp":1796016219077}}`,
  `{"type":"message","id":"92fb7544","parentId":"13a07c17","timestamp":"2026-11-30T05:23:39.091Z","message":{"role":"assistant","content":[{"type":"text","text":"Done: wrote hello.txt (DONE-MARKER)"}],"api":"openai-completions","provider":"fake","model":"fake-model","usage":{"input":1203,"output":42,"cacheRead":0,"cacheWrite":0,"totalTokens":1245,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1796016219078,"responseId":"chatcmpl-fake-3"}}`,
];
const enc = (s: string) => new TextEncoder().encode(s);
const file = (lines: string[]) => enc(lines.map((l) => l + "\n").join(""));

function assistant(
  stopReason: string,
  opts: { text?: string; errorMessage?: string; output?: number; calls?: string[] } = {},
): string {
  const content: unknown[] = [];
  if (opts.text !== undefined) content.push({ type: "text", text: opts.text });
  for (const id of opts.calls ?? [])
    content.push({ type: "toolCall", id, name: "bash", arguments: { command: "true" } });
  const message: Record<string, unknown> = {
    role: "assistant",
    content,
    usage: { output: opts.output ?? 5 },
    stopReason,
    timestamp: 1,
  };
  if (opts.errorMessage !== undefined) message.errorMessage = opts.errorMessage;
  return JSON.stringify({ type: "message", id: "a", parentId: null, timestamp: "2026-11-30T05:23:40.000Z", message });
}
const user = (text: string) =>
  JSON.stringify({
    type: "message",
    id: "u",
    parentId: null,
    timestamp: "2026-11-30T05:23:41.000Z",
    message: { role: "user", content: text, timestamp: 1 },
  });
const read = (lines: string[], opts = {}) => {
  const r = new SessionReader(opts);
  r.push(file(lines));
  return r;
};

test("pi's real run: facts, usage, final text, tool calls and a settled cycle", () => {
  const r = new SessionReader();
  const entries = r.push(file(PI_RUN));
  assert.equal(entries.length, 7);
  const f = r.facts();
  assert.equal(f.sessionId, "01a22ae8-a338-719c-ac94-168ce2f5e4fc");
  assert.equal(f.entries, 7);
  assert.equal(f.invalidLines, 0);
  assert.equal(f.lastEntryType, "message");
  assert.equal(f.lastMessageRole, "assistant");
  assert.equal(f.lastStopReason, "stop");
  assert.equal(f.finalText, "Done: wrote hello.txt (DONE-MARKER)");
  assert.deepEqual(f.usage, {
    assistant: 2,
    toolCalls: 1,
    outputTokens: 84,
    inputTokens: 2405,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    cost: 0,
  });
  assert.equal(f.cycleSettled, true);
  assert.equal(f.retryMayFollow, false);
  assert.equal(f.lastTimestampMs, Date.parse("2026-11-30T05:23:39.091Z"));
  assert.equal(r.offset, file(PI_RUN).length);
  assert.equal(sessionErrorOf(f), false);
});

test("mid-run: a toolUse leaf lists its tool calls; their results are matched; the cycle is not settled", () => {
  const r = read(PI_RUN.slice(0, 5));
  let f = r.facts();
  assert.equal(f.cycleSettled, false);
  assert.equal(f.lastStopReason, "toolUse");
  assert.deepEqual(f.lastToolCalls, [
    { id: "call_fake_1", name: "write", arguments: { path: "hello.txt", content: "hello from fake model\n" } },
  ]);
  assert.deepEqual(f.lastToolResults, []);
  r.push(file(PI_RUN.slice(5, 6)));
  f = r.facts();
  assert.equal(f.lastMessageRole, "toolResult");
  assert.equal(f.cycleSettled, false);
  assert.deepEqual(f.lastToolResults, [
    { toolCallId: "call_fake_1", toolName: "write", isError: false, text: "Successfully wrote 22 bytes to hello.txt" },
  ]);
});

test("chunked feed split at every byte boundary gives the same entries, with multi-byte UTF-8 intact", () => {
  const lines = [...PI_RUN.slice(0, 6), assistant("stop", { text: "fertig: Grüße 🐑 — naïve\u2028same line" })];
  const bytes = file(lines);
  const whole = new SessionReader();
  const want = whole.push(bytes);
  for (let cut = 0; cut <= bytes.length; cut++) {
    const r = new SessionReader();
    const got = [...r.push(bytes.slice(0, cut)), ...r.push(bytes.slice(cut))];
    assert.deepEqual(got, want, `cut at ${cut}`);
    assert.equal(r.offset, bytes.length);
  }
  assert.equal(whole.facts().finalText, "fertig: Grüße 🐑 — naïve\u2028same line", "U+2028 does not split a line");
  // byte-at-a-time, reusing one buffer (the reader must copy what it keeps)
  const r = new SessionReader();
  const buf = new Uint8Array(1);
  const got = [];
  for (const b of bytes) {
    buf[0] = b;
    got.push(...r.push(buf));
  }
  assert.deepEqual(got, want);
});

test("a line read through one reused Buffer (as verify reads a session) stays whole across reads", () => {
  const bytes = Buffer.from(file(PI_RUN));
  const r = new SessionReader();
  const buf = Buffer.alloc(64); // every read overwrites it: the reader must have copied what it holds
  for (let at = 0; at < bytes.length; at += buf.length) {
    const n = bytes.copy(buf, 0, at, Math.min(bytes.length, at + buf.length));
    r.push(buf.subarray(0, n));
  }
  const f = r.facts();
  assert.equal(f.invalidLines, 0);
  assert.equal(f.usage.assistant, 2);
  assert.equal(f.finalText, "Done: wrote hello.txt (DONE-MARKER)");
});

test("a partial last line is held back: offset counts complete lines only", () => {
  const bytes = file(PI_RUN.slice(0, 2));
  const firstLen = enc(PI_RUN[0]! + "\n").length;
  const r = new SessionReader();
  assert.equal(r.push(bytes.slice(0, firstLen + 10)).length, 1);
  assert.equal(r.offset, firstLen);
  assert.equal(r.facts().entries, 1);
  assert.equal(r.push(bytes.slice(firstLen + 10)).length, 1);
  assert.equal(r.offset, bytes.length);
});

test("invalid lines are skipped and counted; blank lines and CRLF are tolerated; unknown types and fields pass", () => {
  const lines = [
    PI_RUN[0]!,
    "{not json",
    "[1,2]",
    `{"type":5}`,
    "null",
    "",
    "   ",
    `{"type":"future_entry_kind","id":"x","whatever":{"deep":[1]}}`,
    PI_RUN[3]!.replace(`"role":"user"`, `"role":"user","newField":true`) + "\r",
    assistant("stop", { text: "ok" }),
  ];
  const r = read(lines);
  const f = r.facts();
  assert.equal(f.invalidLines, 4);
  assert.equal(f.entries, 4);
  assert.equal(f.finalText, "ok");
  assert.equal(f.cycleSettled, true);
  // an unknown metadata entry after the stop does not unsettle the cycle
  r.push(file([`{"type":"custom","customType":"supervisor-state","data":{}}`, `{"type":"label","targetId":"a"}`]));
  assert.equal(r.facts().cycleSettled, true);
  assert.equal(r.facts().lastEntryType, "label");
});

test("a line over the bound is skipped and counted without being held; reading goes on after it", () => {
  const r = new SessionReader({ maxLineBytes: 1024 });
  const big = `{"type":"message","pad":"${"x".repeat(5000)}"}`;
  const bytes = file([PI_RUN[0]!, big, assistant("stop", { text: "after" })]);
  const got = [];
  for (let i = 0; i < bytes.length; i += 100) got.push(...r.push(bytes.slice(i, i + 100)));
  assert.equal(got.length, 2);
  const f = r.facts();
  assert.equal(f.invalidLines, 1);
  assert.equal(f.finalText, "after");
  assert.equal(r.offset, bytes.length);
  // the bound is held while the line is still open, too
  const r2 = new SessionReader({ maxLineBytes: 1024 });
  r2.push(enc("x".repeat(4096)));
  assert.ok((r2 as unknown as { pending: Uint8Array[] }).pending.length === 0, "nothing of the long line is kept");
});

test("retryable errors are not final while pi's auto-retry has attempts left; the fourth in a row is", () => {
  const err500 = assistant("error", { errorMessage: "500 fake upstream failure" });
  let f = read([...PI_RUN.slice(0, 4), err500]).facts();
  assert.equal(f.retryMayFollow, true);
  assert.equal(f.cycleSettled, false);
  assert.equal(sessionErrorOf(f), false);
  f = read([...PI_RUN.slice(0, 4), err500, err500, err500]).facts();
  assert.equal(f.retryableErrors, 3);
  assert.equal(f.retryMayFollow, true);
  f = read([...PI_RUN.slice(0, 4), err500, err500, err500, err500]).facts();
  assert.equal(f.retryMayFollow, false, "maxRetries 3: the 4th consecutive error is final");
  assert.equal(f.cycleSettled, true);
  assert.equal(sessionErrorOf(f), true);
  f = read([...PI_RUN.slice(0, 4), err500], { maxRetries: 0 }).facts();
  assert.equal(f.cycleSettled, true, "retries disabled → the first error is final");
  // a retry that succeeds settles normally
  f = read([...PI_RUN.slice(0, 4), err500, assistant("stop", { text: "recovered" })]).facts();
  assert.equal(f.cycleSettled, true);
  assert.equal(f.finalText, "recovered");
  assert.equal(f.retryableErrors, 0);
});

test("a non-retryable error is final at once; aborted and length settle the cycle", () => {
  let f = read([PI_RUN[3]!, assistant("error", { errorMessage: "Provider finish_reason: content_filter" })]).facts();
  assert.equal(f.retryMayFollow, false);
  assert.equal(f.cycleSettled, true);
  assert.equal(f.lastErrorMessage, "Provider finish_reason: content_filter");
  assert.equal(sessionErrorOf(f), true);
  f = read([PI_RUN[3]!, assistant("aborted", { text: "tick 0 tick 1 ", errorMessage: "Request was aborted" })]).facts();
  assert.equal(f.cycleSettled, true);
  assert.equal(f.finalText, "tick 0 tick 1 ");
  assert.equal(sessionErrorOf(f), false);
  f = read([PI_RUN[3]!, assistant("aborted", {})]).facts();
  assert.equal(f.finalText, undefined, "pi's synthetic empty aborted entry has no text");
  assert.equal(read([PI_RUN[3]!, assistant("length", { text: "cut" })]).facts().cycleSettled, true);
});

test("isRetryableError follows pi's pattern", () => {
  for (const m of [
    "429 Too Many Requests",
    "503 Service Unavailable",
    "overloaded_error",
    "fetch failed",
    "Request timed out",
    "socket hang up",
    "Connection error.",
  ]) {
    assert.equal(isRetryableError(m), true, m);
  }
  for (const m of ["Provider finish_reason: content_filter", "401 Unauthorized", "", undefined])
    assert.equal(isRetryableError(m), false, String(m));
});

test("cycles: a prompt after a settled cycle starts the next; per-cycle usage and text restart", () => {
  const r = read(PI_RUN);
  assert.equal(r.facts().cycle.index, 1);
  assert.deepEqual(r.facts().cycle.usage, {
    assistant: 2,
    toolCalls: 1,
    outputTokens: 84,
    inputTokens: 2405,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    cost: 0,
  });
  r.push(file([user("now also add a test")]));
  let f = r.facts();
  assert.equal(f.cycleSettled, false);
  assert.equal(f.cycle.index, 2);
  assert.deepEqual(f.cycle.usage, {
    assistant: 0,
    toolCalls: 0,
    outputTokens: 0,
    inputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    cost: 0,
  });
  r.push(
    file([
      assistant("toolUse", { calls: ["c1", "c2"], output: 7 }),
      user("steer: use vitest"),
      assistant("stop", { text: "\n\nAdded the test", output: 3 }),
    ]),
  );
  f = r.facts();
  assert.equal(f.cycle.index, 2, "a steer mid-cycle does not start a new cycle");
  assert.deepEqual(f.cycle.usage, {
    assistant: 2,
    toolCalls: 2,
    outputTokens: 10,
    inputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    cost: 0,
  });
  assert.equal(f.cycle.stopReason, "stop");
  assert.equal(f.cycle.finalText, "\n\nAdded the test");
  assert.deepEqual(f.usage, {
    assistant: 4,
    toolCalls: 3,
    outputTokens: 94,
    inputTokens: 2405,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    cost: 0,
  });
  // a delivery injected as custom_message starts a cycle too
  r.push(file([`{"type":"custom_message","customType":"supervisor-result","content":"RESULT r1","display":true}`]));
  assert.equal(r.facts().cycle.index, 3);
  assert.equal(r.facts().lastMessageRole, "custom");
  // resetCycle marks a cycle explicitly; the prompt that follows does not count twice
  const r2 = read(PI_RUN);
  r2.resetCycle();
  r2.push(file([user("again")]));
  assert.equal(r2.facts().cycle.index, 2);
});

test("facts() is a snapshot: later pushes do not change it", () => {
  const r = read(PI_RUN.slice(0, 5));
  const before = r.facts();
  r.push(file(PI_RUN.slice(5)));
  assert.equal(before.lastStopReason, "toolUse");
  assert.equal(before.usage.assistant, 1);
  assert.equal(before.lastToolCalls.length, 1);
});
