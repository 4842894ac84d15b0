import { test } from "node:test";
import assert from "node:assert/strict";
import {
  collectWarnings,
  firstLine,
  pickSummary,
  porcelainPath,
  SUMMARY_MAX_CHARS,
  type WarningInput,
} from "../../src/core/result/summary.js";

test("summary precedence: result.md summary → final message → body → status sentence", () => {
  const all = {
    meta: { summary: "from meta" },
    finalMessage: "from final\nmore",
    body: "from body",
    status: "completed" as const,
  };
  assert.equal(pickSummary(all), "from meta");
  assert.equal(pickSummary({ ...all, meta: { summary: "   " } }), "from final", "a blank meta summary is skipped");
  assert.equal(pickSummary({ ...all, meta: {} }), "from final");
  assert.equal(pickSummary({ ...all, meta: undefined, finalMessage: "\n  \n" }), "from body");
  assert.equal(pickSummary({ status: "completed" }), "The child finished without a summary.");
  assert.equal(pickSummary({ status: "failed" }), "The child failed; inspect the session.");
  assert.equal(pickSummary({ status: "blocked", body: "" }), "The child is blocked and needs an answer.");
});

test("summaries are one trimmed line, headings unmarked, capped", () => {
  assert.equal(pickSummary({ status: "completed", finalMessage: "\n\n## Done: all green  \nrest" }), "Done: all green");
  assert.equal(pickSummary({ status: "completed", meta: { summary: "two\n  lines" } }), "two lines");
  assert.equal(firstLine("---\n```ts\nreal line"), "real line");
  const long = pickSummary({ status: "completed", finalMessage: "word ".repeat(100) });
  assert.equal(long.length, SUMMARY_MAX_CHARS);
  assert.ok(long.endsWith("…"));
});

const w = (over: Partial<WarningInput>): string[] =>
  collectWarnings({
    role: "worker",
    session: "fresh",
    hasArtifact: true,
    hasFinalMessage: true,
    settled: true,
    ...over,
  });

test("no warnings for a clean worker harvest", () => {
  assert.deepEqual(w({ changedFiles: ["src/a.ts"] }), []);
});

test("stale session and absent session are reported", () => {
  assert.match(w({ session: "stale" })[0] ?? "", /^stale session/);
  assert.match(w({ session: "absent" })[0] ?? "", /^no session file/);
  assert.deepEqual(w({ session: "absent", settled: false }), [], "no file yet is normal while starting");
});

test("empty harvest: settled with no artifact and no new final message", () => {
  assert.match(w({ hasArtifact: false, hasFinalMessage: false }).join("|"), /empty harvest/);
  assert.deepEqual(w({ hasArtifact: false, hasFinalMessage: true }), []);
  assert.deepEqual(w({ hasArtifact: true, hasFinalMessage: false }), []);
  assert.deepEqual(w({ hasArtifact: false, hasFinalMessage: false, settled: false }), []);
});

test("reviewer changed files, minus paths that were dirty at spawn", () => {
  assert.deepEqual(w({ role: "reviewer", changedFiles: ["src/a.ts", "new.txt"], dirtyAtStart: [" M src/a.ts"] }), [
    "reviewer changed files: new.txt",
  ]);
  assert.deepEqual(w({ role: "reviewer", changedFiles: ["src/a.ts"], dirtyAtStart: [" M src/a.ts"] }), []);
  assert.deepEqual(w({ role: "reviewer", changedFiles: [] }), []);
  const many = w({ role: "reviewer", changedFiles: ["1", "2", "3", "4", "5", "6", "7"] })[0] ?? "";
  assert.match(many, /1, 2, 3, 4, 5, \+2 more$/);
  assert.equal(porcelainPath("R  old.ts -> new.ts"), "new.ts");
  assert.equal(porcelainPath("?? dir/x.ts"), "dir/x.ts");
});

test("extra warnings pass through in order, without blanks or duplicates", () => {
  assert.deepEqual(w({ session: "stale", extra: ["session: 2 invalid line(s) skipped", "", "x", "x"] }), [
    "stale session: the session file did not change after the prompt; finalMessage omitted",
    "session: 2 invalid line(s) skipped",
    "x",
  ]);
});
