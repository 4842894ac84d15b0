// Checks on every card a person reads: show / spawn --wait / wait (the AgentResult card), watch's and list's table,
// and pi's TUI card: each check with ✓/✗ and its duration, a failed one said first, and a non-zero exit for wait.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { AgentResult, CheckReceipt } from "../../src/core/types.js";
import { EXIT, exitCodeForResults } from "../../src/cli/common/exit-codes.js";
import { renderCard } from "../../src/cli/format/card.js";
import { renderTable } from "../../src/cli/format/table.js";
import { deliveryFor } from "../../src/core/crew/crew-delivery.js";
import { renderCrewCard } from "../../src/extensions/cards.js";

const receipt = (command: string, exitCode: number | null, durationMs: number, extra: Partial<CheckReceipt> = {}) => ({
  command,
  exitCode,
  durationMs,
  startedAt: 1,
  logPath: `/l/${command}`,
  outputTail: "tail\n",
  ...extra,
});
const result = (over: Partial<AgentResult> = {}): AgentResult => ({
  schemaVersion: 1,
  taskId: "tmg3k2a1b2c3",
  status: "completed",
  role: "worker",
  agent: { name: "w", kind: "pi", model: "m", thinking: "off", runtime: "headless" },
  herdrStatus: "unknown",
  summary: "done",
  timing: { createdAt: 1 },
  nextAction: "none",
  ...over,
});

test("the AgentResult card lists each check with ✓/✗ and its duration; a failed check is its first line", () => {
  const passing = renderCard(result({ checks: [receipt("npm test", 0, 1234)], verified: true })).split("\n");
  assert.ok(passing.includes("checks:"), passing.join("\n"));
  assert.ok(passing.includes("  ✓ npm test · 1.2s"), passing.join("\n"));
  assert.ok(passing[0]!.startsWith("[headless]"), "a pass changes nothing at the top");
  const failing = renderCard(
    result({
      checks: [
        receipt("npm test", 0, 800),
        receipt("npm run lint", 2, 300),
        receipt("slow", null, 60_000, { cutOff: "timeout" }),
      ],
      verified: false,
    }),
  ).split("\n");
  assert.equal(failing[0], "✗ checks failed: npm run lint (exit 2), slow (timed out)");
  assert.ok(failing.includes("  ✓ npm test · 800ms"));
  assert.ok(failing.includes("  ✗ npm run lint · 300ms · exit 2"));
  assert.ok(failing.includes("  ✗ slow · 1m00s · timed out"));
});

test("wait / spawn --wait: a failed check exits 4 (a failed task still 1)", () => {
  assert.equal(EXIT.checkFailed, 4);
  assert.equal(exitCodeForResults([result({ verified: true })]), 0);
  assert.equal(exitCodeForResults([result(), result({ verified: false })]), 4);
  assert.equal(exitCodeForResults([result({ verified: false }), result({ status: "failed" })]), 1);
  assert.equal(exitCodeForResults([result({ status: "blocked" })]), 0);
});

test("the task table (list, watch) marks the status with the checks' verdict", () => {
  const lines = renderTable([result({ verified: false }), result({ taskId: "tmg3k2a1b2c4", verified: true })], 2, 200);
  assert.match(lines[1]!, /completed ✗check/);
  assert.match(lines[2]!, /completed ✓check/);
});

test("pi's TUI card: a failed check first, then each check with ✓/✗ and its duration, and where the work is", () => {
  const d = deliveryFor(
    result({
      brief: "b",
      checks: [receipt("npm test", 1, 2500)],
      verified: false,
      worktree: { path: "/w", branch: "dsh/tmg3k2a1b2c3", repo: "/r", base: "main" },
    }),
    1,
    { outcome: "completed", report: "All done." },
  )!;
  const lines = renderCrewCard({ details: { card: d.card } }, { expanded: true })!.render(120);
  assert.equal(lines[0], "✅ tmg3k2a1b2c3 · b");
  assert.equal(lines[2], "check failed: npm test (exit 1)");
  assert.ok(lines.includes("✗ npm test · 2.5s · exit 1"), lines.join("\n"));
  const work = lines.filter((l) => l.startsWith("Work: "));
  assert.equal(work.length, 1, "one line");
  assert.match(work[0]!, /dsh\/tmg3k2a1b2c3/);
  assert.match(work[0]!, /dsh-herdr land tmg3k2a1b2c3/);
  assert.ok(lines.indexOf(work[0]!) < lines.indexOf("All done."));
});
