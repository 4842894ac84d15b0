// crew_report: the child's one way to finish a cycle (pi-crew Result Protocol, first form). Validation is
// separate from pi so it can be unit-tested and so issue 6 can add the cycle-level acceptance rules here.
import { writeFileSync, renameSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { renderResultMd } from "../core/result-md.js";
import { firstLine } from "../core/summary.js";

export interface CrewReport {
  outcome: "completed" | "needs_input";
  report: string;
  needs?: string;
}

/** Plain JSON Schema (what TypeBox produces), so the extension needs no typebox import at runtime. */
export const CREW_REPORT_PARAMETERS = {
  type: "object",
  properties: {
    outcome: { type: "string", enum: ["completed", "needs_input"], description: "completed when the task is done; needs_input when you need an answer to continue" },
    report: { type: "string", description: "Your complete final answer for this cycle (Markdown). No second summary follows." },
    needs: { type: "string", description: "Only for needs_input: the exact question or decision you need." },
  },
  required: ["outcome", "report"],
  additionalProperties: false,
} as const;

export const CREW_REPORT_DESCRIPTION =
  "Finish this cycle: report your complete final answer to the agent that delegated the task. Call it exactly once, alone in your last tool-call batch. " +
  'Use outcome "completed" when done, or "needs_input" with `needs` when you need an answer to continue.';

/** Returns the report when valid, else an error message naming the fix (the tool throws it as {"error": ...}). */
export function checkCrewReport(params: unknown): CrewReport | string {
  if (typeof params !== "object" || params === null) return "crew_report needs {outcome, report}";
  const p = params as Record<string, unknown>;
  const unknown = Object.keys(p).filter((k) => !["outcome", "report", "needs"].includes(k));
  if (unknown.length > 0) return `crew_report has unknown field(s) ${unknown.join(", ")}; use only outcome, report and needs`;
  if (p.outcome !== "completed" && p.outcome !== "needs_input") return 'outcome must be "completed" or "needs_input"';
  if (typeof p.report !== "string" || p.report.trim() === "") return "report must be a non-blank string holding your complete final answer";
  if (p.outcome === "needs_input") {
    if (typeof p.needs !== "string" || p.needs.trim() === "") return 'outcome "needs_input" requires a non-blank `needs` saying what you need';
    return { outcome: "needs_input", report: p.report, needs: p.needs };
  }
  if (p.needs !== undefined) return '`needs` is only allowed with outcome "needs_input"; drop it or change the outcome';
  return { outcome: "completed", report: p.report };
}

/** result.md for an accepted report: status completed|blocked, summary = first line of the report. */
export function resultMdFor(r: CrewReport): string {
  const body = r.outcome === "needs_input" ? `${r.report}\n\n## Needs\n\n${r.needs ?? ""}` : r.report;
  const summary = firstLine(r.outcome === "needs_input" ? (r.needs ?? r.report) : r.report);
  return renderResultMd({ status: r.outcome === "completed" ? "completed" : "blocked", ...(summary ? { summary } : {}) }, body);
}

/** Atomic write (tmp + rename) so the daemon's watcher never reads half a file. */
export function writeResultMd(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, text, { mode: 0o600 });
  renameSync(tmp, path);
}
