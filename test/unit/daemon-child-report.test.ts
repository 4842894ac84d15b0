// crew_report acceptance (first form) as the child extension applies it, and the result.md it writes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { checkCrewReport, resultMdFor } from "../../src/extensions/child-report.js";
import { parseResultMd } from "../../src/core/result/result-md.js";

test("crew_report: valid reports pass; bad ones get a message naming the fix", () => {
  assert.deepEqual(checkCrewReport({ outcome: "completed", report: "done" }), { outcome: "completed", report: "done" });
  assert.deepEqual(checkCrewReport({ outcome: "needs_input", report: "r", needs: "q?" }), {
    outcome: "needs_input",
    report: "r",
    needs: "q?",
  });
  assert.match(checkCrewReport({ outcome: "completed", report: "  " }) as string, /non-blank/);
  assert.match(checkCrewReport({ outcome: "needs_input", report: "r" }) as string, /requires a non-blank `needs`/);
  assert.match(
    checkCrewReport({ outcome: "completed", report: "r", needs: "x" }) as string,
    /only allowed with outcome "needs_input"/,
  );
  assert.match(checkCrewReport({ outcome: "done", report: "r" }) as string, /"completed" or "needs_input"/);
  assert.match(checkCrewReport({ outcome: "completed", report: "r", extra: 1 }) as string, /unknown field\(s\) extra/);
});

test("crew_report: result.md round-trips to status completed|blocked with the summary", () => {
  const done = parseResultMd(resultMdFor({ outcome: "completed", report: "## Added retry\n\nDetails here." }));
  assert.deepEqual(done.meta, { status: "completed", summary: "Added retry" });
  assert.equal(done.body, "## Added retry\n\nDetails here.");
  const blocked = parseResultMd(resultMdFor({ outcome: "needs_input", report: "Half way.", needs: "Red or blue?" }));
  assert.deepEqual(blocked.meta, { status: "blocked", summary: "Red or blue?" });
  assert.match(blocked.body, /Half way\.\n\n## Needs\n\nRed or blue\?/);
});

test("crew_report: a long first line is capped in result.md's summary; the status and the whole body survive", () => {
  const line = "x".repeat(150 * 1024);
  const md = resultMdFor({ outcome: "completed", report: `${line}\n\nrest` });
  const parsed = parseResultMd(md);
  assert.equal(parsed.meta?.status, "completed");
  assert.ok((parsed.meta?.summary ?? "").length <= 200, `summary of ${parsed.meta?.summary?.length} chars`);
  assert.match(parsed.meta?.summary ?? "", /^x+…$/);
  assert.equal(parsed.body, `${line}\n\nrest`, "the body is whole");
  assert.deepEqual(parsed.warnings ?? [], []);
  // A report larger than result.md's read limit loses its tail, never the frontmatter (status included).
  const huge = parseResultMd(resultMdFor({ outcome: "needs_input", report: "y".repeat(300 * 1024), needs: "which?" }));
  assert.deepEqual(huge.meta, { status: "blocked", summary: "which?" });
  const hugeDone = parseResultMd(resultMdFor({ outcome: "completed", report: "z".repeat(300 * 1024) }));
  assert.equal(hugeDone.meta?.status, "completed");
  assert.ok(!(hugeDone.warnings ?? []).some((w) => /frontmatter/.test(w)), JSON.stringify(hugeDone.warnings));
});
