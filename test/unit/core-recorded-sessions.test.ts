// The reader and buildAgentResult on real pi recordings of both lines (fixtures/sessions: pi 0.73.1; its pi1/:
// pi 1.x; see its README). Every scenario runs over both; where the lines differ the test says which.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { validate } from "../helpers/agent-result-schema.js";
import { SessionReader, sessionErrorOf, type SessionReaderOptions } from "../../src/core/session/session-reader.js";
import { buildAgentResult } from "../../src/core/result/agent-result.js";
import { parseResultMd } from "../../src/core/result/result-md.js";

const root = join(import.meta.dirname, "..", "..", "..");

type Line = "0.73" | "1.x";
const LINES: { line: Line; dir: string }[] = [
  { line: "0.73", dir: "" },
  { line: "1.x", dir: "pi1" },
];

function readRecording(name: string, opts?: SessionReaderOptions, chunk = 4096) {
  const bytes = readFileSync(join(root, "fixtures", "sessions", name));
  const r = new SessionReader(opts);
  let entries = 0;
  for (let i = 0; i < bytes.length; i += chunk) entries += r.push(bytes.subarray(i, i + chunk)).length;
  assert.equal(r.offset, bytes.length, `${name}: every line consumed`);
  assert.equal(entries, bytes.toString("utf8").trimEnd().split("\n").length, `${name}: one entry per line`);
  return r.facts();
}

function harvest(name: string, opts?: SessionReaderOptions, resultMd?: string) {
  const session = readRecording(name, opts);
  const result = buildAgentResult({
    taskId: "tmg3k2a1b2c3",
    role: "worker",
    agent: {
      name: "worker-scripted-b2c3",
      kind: "pi",
      model: "scripted/scripted-model",
      thinking: "off",
      runtime: "headless",
      runtimeId: "4242",
    },
    timing: { createdAt: 1796017900000, promptedAt: 1796017900500, settledAt: 1796017960000 },
    raw: { external: false, runtime: session.cycleSettled ? "idle" : "working", sessionError: sessionErrorOf(session) },
    sessionPath: `/tmp/dsh-fixture/${name}`,
    session,
    sessionChangedAfterPrompt: true,
    resultPath: "/tmp/dsh-fixture/result.md",
    ...(resultMd === undefined ? {} : { resultMd: parseResultMd(resultMd) }),
  });
  assert.ok(validate(result), JSON.stringify(validate.errors));
  return { session, result };
}

for (const { line, dir } of LINES) {
  test(`pi ${line}: completed-write: stop, final text, usage → completed with the final message as result text`, () => {
    const { session, result } = harvest(join(dir, "completed-write.jsonl"));
    assert.equal(session.lastStopReason, "stop");
    assert.equal(session.finalText, "Done: wrote hello.txt (DONE-MARKER)");
    assert.deepEqual(session.usage, {
      assistant: 2,
      toolCalls: 1,
      outputTokens: 40,
      inputTokens: 2060,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      cost: 0,
    });
    assert.equal(result.status, "completed");
    assert.equal(result.summary, "Done: wrote hello.txt (DONE-MARKER)");
    assert.equal(result.result?.text, "Done: wrote hello.txt (DONE-MARKER)");
    assert.equal(result.nextAction, "none");
    assert.equal(result.warnings, undefined);
  });

  test(`pi ${line}: multi-tool: a parallel batch counts every toolCall; the last text is final`, () => {
    const { session, result } = harvest(join(dir, "multi-tool.jsonl"));
    assert.deepEqual(session.usage, {
      assistant: 4,
      toolCalls: 5,
      outputTokens: 77,
      inputTokens: 5240,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      cost: 0,
    });
    assert.equal(session.finalText, "All notes are ready: one.txt, two.txt (edited), three.txt.");
    assert.equal(session.cycleSettled, true);
    assert.deepEqual(result.usage, session.usage);
  });

  test(`pi ${line}: http-500-no-retry (retry off): the error is final → failed, inspect, empty-harvest warning`, () => {
    const { session, result } = harvest(join(dir, "http-500-no-retry.jsonl"), { maxRetries: 0 });
    assert.equal(session.lastStopReason, "error");
    // pi's wording: 0.73 "500 scripted upstream failure", 1.x "500: {"message":"scripted upstream failure",...}".
    assert.match(
      session.lastErrorMessage ?? "",
      line === "0.73" ? /^500 scripted upstream failure$/ : /^500: .*"scripted upstream failure"/,
    );
    assert.deepEqual(session.usage, {
      assistant: 1,
      toolCalls: 0,
      outputTokens: 0,
      inputTokens: 0,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      cost: 0,
    });
    assert.equal(result.status, "failed");
    assert.equal(result.nextAction, "inspect");
    assert.ok(result.warnings?.some((w) => w.startsWith("empty harvest")));
  });

  test(`pi ${line}: http-500-with-retry: two chained errors; the retry outlook comes from that line's own signal`, () => {
    const name = join(dir, "http-500-with-retry.jsonl");
    if (line === "0.73") {
      // 0.73 writes no retry marker: its rule (pattern + maxRetries) decides, so the settings matter.
      const recorded = readRecording(name, { maxRetries: 1 });
      assert.equal(recorded.retryableErrors, 2);
      assert.equal(recorded.retryMayFollow, false);
      assert.equal(recorded.cycleSettled, true);
      const byDefault = readRecording(name);
      assert.equal(byDefault.retryMayFollow, true);
      assert.equal(byDefault.cycleSettled, false);
      assert.equal(harvest(name).result.status, "running");
    } else {
      // 1.x omits each retried attempt (a context_edit after it); the last error has none, so it is final
      // whatever maxRetries the reader assumes.
      for (const opts of [{ maxRetries: 1 }, {}]) {
        const f = readRecording(name, opts);
        assert.equal(f.retryableErrors, 1, "one retried attempt");
        assert.equal(f.retryMayFollow, false);
        assert.equal(f.cycleSettled, true);
      }
      assert.equal(harvest(name).result.status, "failed");
      // Cut after the first error's omission: a retry is on its way.
      const lines = readFileSync(join(root, "fixtures", "sessions", name), "utf8")
        .trimEnd()
        .split("\n");
      const cut = lines.findIndex((l) => JSON.parse(l).type === "context_edit");
      assert.ok(cut > 0, "the 1.x recording has the omission marker");
      const r = new SessionReader();
      r.push(Buffer.from(lines.slice(0, cut + 1).join("\n") + "\n"));
      assert.equal(r.facts().retryMayFollow, true);
      assert.equal(r.facts().cycleSettled, false);
      // Cut before it: the error stands as final until pi says otherwise.
      const r2 = new SessionReader();
      r2.push(Buffer.from(lines.slice(0, cut).join("\n") + "\n"));
      assert.equal(r2.facts().cycleSettled, true);
    }
  });

  test(`pi ${line}: abort-mid-tool: errored tool result, then a synthetic empty aborted assistant`, () => {
    const { session } = harvest(join(dir, "abort-mid-tool.jsonl"));
    assert.equal(session.lastStopReason, "aborted");
    assert.equal(session.lastErrorMessage, line === "0.73" ? "Request was aborted." : "This operation was aborted");
    assert.equal(session.finalText, undefined);
    assert.equal(session.cycleSettled, true);
    assert.equal(sessionErrorOf(session), false);
    // The stub spent nothing: it is no turn (a turn cap counts `assistant`).
    assert.deepEqual(session.usage, {
      assistant: 1,
      toolCalls: 1,
      outputTokens: 20,
      inputTokens: 1020,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      cost: 0,
    });
  });

  test(`pi ${line}: follow-up: two cycles in one file; cycle 2 has its own usage and final text`, () => {
    const { session } = harvest(join(dir, "follow-up.jsonl"));
    assert.equal(session.cycle.index, 2);
    assert.equal(session.cycle.finalText, "Second cycle done: notes.md has two lines.");
    assert.deepEqual(session.usage, {
      assistant: 4,
      toolCalls: 2,
      outputTokens: 80,
      inputTokens: 4200,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      cost: 0,
    });
    assert.equal(session.cycle.usage.assistant, 2);
    assert.equal(session.cycle.usage.toolCalls, 1);
  });

  test(`pi ${line}: crew-report: the file ends on crew_report's result (terminate) and that settles the cycle`, () => {
    const md = "---\nstatus: completed\nsummary: all good\n---\n## Report\n\nChecked the repo: all good.\n";
    const { session, result } = harvest(join(dir, "crew-report.jsonl"), undefined, md);
    assert.equal(session.lastStopReason, "toolUse");
    assert.equal(session.lastMessageRole, "toolResult");
    assert.equal(session.terminatedBy, "crew_report");
    assert.equal(session.cycleSettled, true);
    assert.deepEqual(session.lastToolCalls[0]?.arguments, {
      outcome: "completed",
      report: "## Report\n\nChecked the repo: all good.",
    });
    assert.deepEqual(session.usage, {
      assistant: 2,
      toolCalls: 2,
      outputTokens: 40,
      inputTokens: 2060,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      cost: 0,
    });
    assert.equal(result.status, "completed");
    assert.equal(result.summary, "all good");
    assert.equal(result.result?.text, "## Report\n\nChecked the repo: all good.");
    assert.equal(result.finalMessage, undefined, "no assistant text after the tool call");
    // without crew_report as a terminal tool the same file reads as still running
    assert.equal(readRecording(join(dir, "crew-report.jsonl"), { terminalTools: [] }).cycleSettled, false);
  });
}
