import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { CycleGuard, judgeCycle, sessionReport, withReportAsFinalText } from "../../src/core/crew/crew-cycle.js";
import { SessionReader } from "../../src/core/session/session-reader.js";

const root = join(import.meta.dirname, "..", "..", "..");
const call = (id: string, name: string, args: unknown = {}) => ({ type: "toolCall", id, name, arguments: args });
const assistant = (content: unknown[], stopReason = "toolUse") => ({ role: "assistant", content, stopReason });
const result = (id: string, isError = false) => ({
  role: "toolResult",
  toolCallId: id,
  toolName: "x",
  content: [],
  isError,
});
const report = { outcome: "completed", report: "r" };

test("accepted: the last assistant message's batch is exactly one successful crew_report", () => {
  const v = judgeCycle([
    { role: "user" },
    assistant([call("a", "bash")]),
    result("a"),
    assistant([call("b", "crew_report", report)]),
    result("b"),
  ]);
  assert.deepEqual(v, { kind: "accepted", args: report });
});

test("a recorded real pi session with crew_report: the final batch is accepted", () => {
  const lines = readFileSync(join(root, "fixtures", "sessions", "crew-report.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  const messages = lines.filter((e) => e.type === "message").map((e) => e.message);
  // recorded without terminate: a closing text follows the report, so the protocol asks for a finalization
  const v = judgeCycle(messages);
  const lastIsText =
    messages.at(-1).role === "assistant" &&
    !messages.at(-1).content.some((c: { type: string }) => c.type === "toolCall");
  assert.equal(v.kind, lastIsText ? "reportless" : "accepted");
  const upToReport = messages.slice(
    0,
    messages.findIndex(
      (m: { role: string; toolName?: string }) => m.role === "toolResult" && m.toolName === "crew_report",
    ) + 1,
  );
  assert.equal(judgeCycle(upToReport).kind, "accepted");
});

test("reportless: text ending, mixed final batch, two reports, a rejected report, an earlier cycle's report", () => {
  assert.equal(judgeCycle([assistant([{ type: "text", text: "done" }], "stop")]).kind, "reportless");
  assert.match(
    (
      judgeCycle([assistant([call("a", "crew_report", report), call("b", "bash")]), result("a"), result("b")]) as {
        why: string;
      }
    ).why,
    /exactly one crew_report/,
  );
  assert.equal(
    judgeCycle([
      assistant([call("a", "crew_report", report), call("b", "crew_report", report)]),
      result("a"),
      result("b"),
    ]).kind,
    "reportless",
  );
  assert.match(
    (judgeCycle([assistant([call("a", "crew_report", {})]), result("a", true)]) as { why: string }).why,
    /rejected/,
  );
  // a report earlier in the cycle does not satisfy a later reportless ending
  assert.equal(
    judgeCycle([
      assistant([call("a", "crew_report", report)]),
      result("a"),
      assistant([{ type: "text", text: "also" }], "stop"),
    ]).kind,
    "reportless",
  );
  assert.equal(judgeCycle([]).kind, "reportless");
});

test("technical endings (error, aborted) are not reportless", () => {
  assert.deepEqual(judgeCycle([assistant([], "error")].map((m) => ({ ...m, errorMessage: "500" }))), {
    kind: "technical",
    stopReason: "error",
    errorMessage: "500",
  });
  assert.equal(judgeCycle([assistant([], "aborted")]).kind, "technical");
});

test("CycleGuard: one finalization per cycle, then a contract error; a new cycle starts fresh", () => {
  const g = new CycleGuard();
  assert.equal(g.onReportless(), "finalize");
  assert.equal(g.onReportless(), "contract_error");
  g.newCycle();
  assert.equal(g.onReportless(), "finalize");
});

// ---- reading an accepted report back from the session (what the daemon delivers and calls finalMessage) ----

const sessionLines = (...entries: unknown[]) =>
  new TextEncoder().encode(
    entries.map((e, i) => JSON.stringify({ type: "message", id: `e${i}`, message: e })).join("\n") + "\n",
  );
const factsOf = (...entries: unknown[]) => {
  const r = new SessionReader();
  r.push(sessionLines(...entries));
  return r.facts();
};
const withText = (text: string, calls: unknown[]) => assistant([{ type: "text", text }, ...calls]);
const toolResult = (id: string, name: string, isError = false) => ({
  role: "toolResult",
  toolCallId: id,
  toolName: name,
  content: [{ type: "text", text: "{}" }],
  isError,
});

test("sessionReport: a cycle that ended on a successful crew_report yields it; finalText becomes the report", () => {
  const ask = { outcome: "needs_input", report: "Half way.", needs: "Red or blue?" };
  const f = factsOf(
    { role: "user", content: "go" },
    withText("Reporting now.", [call("r1", "crew_report", ask)]),
    toolResult("r1", "crew_report"),
  );
  assert.deepEqual(sessionReport(f), ask);
  assert.equal(f.finalText, "Reporting now.");
  assert.equal(withReportAsFinalText(f).finalText, "Half way.", "the report, not the chatter beside the call");
  assert.equal(f.finalText, "Reporting now.", "the facts themselves are not mutated");
});

test("sessionReport: nothing for a rejected report, a report with company, a text ending or invalid arguments", () => {
  const rejected = factsOf(
    { role: "user", content: "go" },
    assistant([call("r1", "crew_report", { outcome: "done", report: "x" })]),
    toolResult("r1", "crew_report", true),
  );
  assert.equal(sessionReport(rejected), undefined);
  const mixed = factsOf(
    { role: "user", content: "go" },
    assistant([call("r1", "crew_report", report), call("b1", "bash", { command: "ls" })]),
    toolResult("r1", "crew_report"),
    toolResult("b1", "bash"),
  );
  assert.equal(sessionReport(mixed), undefined);
  const text = factsOf({ role: "user", content: "go" }, assistant([{ type: "text", text: "All done." }], "stop"));
  assert.equal(sessionReport(text), undefined);
  assert.equal(withReportAsFinalText(text).finalText, "All done.", "a text ending keeps its text");
  // A session line whose arguments fail the check (hand-edited, or an old pi) is not trusted as a report.
  const bad = factsOf(
    { role: "user", content: "go" },
    assistant([call("r1", "crew_report", { outcome: "completed", report: "  " })]),
    toolResult("r1", "crew_report"),
  );
  assert.equal(sessionReport(bad), undefined);
  assert.equal(sessionReport(undefined), undefined);
});
