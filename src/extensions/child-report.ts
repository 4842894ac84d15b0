// crew_report: the child's one way to finish a cycle (pi-crew Result Protocol). The argument check lives in core
// (the daemon reads reports back from sessions with it); here: the tool's schema and the result.md it writes.
import { writeFileSync, renameSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { renderResultMd } from "../core/result/result-md.js";
import { capSummary, firstLine } from "../core/result/summary.js";
import { checkCrewReport, type CrewReport } from "../core/crew/crew-cycle.js";

export { checkCrewReport, type CrewReport };

/** Plain JSON Schema (what TypeBox produces), so the extension needs no typebox import at runtime. */
export const CREW_REPORT_PARAMETERS = {
  type: "object",
  properties: {
    // No enum and no additionalProperties:false: pi would reject those with plain text before the tool runs; the
    // protocol wants a wrong outcome or an unknown field answered as {"error": ...} by checkCrewReport.
    outcome: {
      type: "string",
      description:
        'completed when the task is done; needs_input when you need an answer to continue. Exactly "completed" or "needs_input".',
    },
    report: {
      type: "string",
      description: "Your complete final answer for this cycle (Markdown). No second summary follows.",
    },
    needs: { type: "string", description: "Only for needs_input: the exact question or decision you need." },
  },
  required: ["outcome", "report"],
} as const;

export const CREW_REPORT_DESCRIPTION =
  "Finish this cycle: report your complete final answer to the agent that delegated the task. Call it exactly once, alone in your last tool-call batch. " +
  'Use outcome "completed" when done, or "needs_input" with `needs` when you need an answer to continue.';

/** result.md for an accepted report: status completed|blocked, summary = first line of the report. */
export function resultMdFor(r: CrewReport): string {
  const body = r.outcome === "needs_input" ? `${r.report}\n\n## Needs\n\n${r.needs ?? ""}` : r.report;
  // Capped: a summary is a line, and a long one would push result.md past its read limit (body and status lost).
  const line = firstLine(r.outcome === "needs_input" ? (r.needs ?? r.report) : r.report);
  const summary = line === undefined ? undefined : capSummary(line);
  return renderResultMd(
    { status: r.outcome === "completed" ? "completed" : "blocked", ...(summary ? { summary } : {}) },
    body,
  );
}

/** Atomic write (tmp + rename) so the daemon's watcher never reads half a file. */
export function writeResultMd(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, text, { mode: 0o600 });
  renameSync(tmp, path);
}
