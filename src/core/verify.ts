// `dsh-herdr verify`: a task's result.json checked against its evidence, field by field. The journal is the verdict
// (each cycle's settle record and settled status record, the close); the session file, read up to the offset the
// settled status record pinned, gives usage, the model and thinking level pi ran, and the final message; diff.patch
// gives the diff's size. Pure: the caller reads the task dir (src/cli/commands/verify.ts).
import { nextActionFor } from "./derive.js";
import { parseSettleReason, type SettleReason } from "./cycle-phase.js";
import type { SessionFacts } from "./session-reader.js";
import { settleVerdict } from "./settle-verdict.js";
import type { AgentResult } from "./types.js";

export type JournalRecord = { type: string; [k: string]: unknown };

export interface VerifyInput {
  /** events.jsonl, parsed (lines that are not JSON objects left out). */
  events: JournalRecord[];
  /** result.json as stored. */
  result: AgentResult;
  /** The session's facts up to the settled status record's sessionOffset (absent: no session file here). */
  session?: SessionFacts;
  /** diff.patch as on disk (absent: none here). */
  patchBytes?: number;
}

export interface Difference {
  field: string;
  /** What result.json says. */
  stored: unknown;
  /** What the evidence says. */
  expected: unknown;
  /** Which evidence: "the journal", "the session", "diff.patch". */
  source: string;
  /** Why the evidence says so, e.g. the settle reason's code. */
  why?: string;
}

/** What the journal says a task's final state is. */
export interface JournalVerdict {
  cycle: number;
  closed: boolean;
  /** The status the last settled status record of `cycle` gives. */
  settledStatus?: string;
  /** The session offset the last status record pinned (result.json was written with it). */
  sessionOffset?: number;
  /** The last status record's status: a task still running has no verdict to check yet. */
  lastStatus?: string;
  reason?: SettleReason;
  /** A late result.md after the settle: the settled result stands (its text is not re-read). */
  lateEvidence: boolean;
}

export function journalVerdict(events: JournalRecord[]): JournalVerdict {
  const v: JournalVerdict = { cycle: 1, closed: false, lateEvidence: false };
  for (const e of events) {
    const cycle = typeof e.cycle === "number" ? e.cycle : undefined;
    if ((e.type === "respond" || e.type === "settle") && cycle !== undefined && cycle > v.cycle) {
      v.cycle = cycle;
      delete v.settledStatus;
      delete v.sessionOffset;
      delete v.reason;
      v.lateEvidence = false;
    }
    if (e.type === "settle" && cycle === v.cycle) {
      const r = parseSettleReason(e.reason);
      if (r) v.reason = r;
    } else if (e.type === "status" && typeof e.status === "string") {
      v.lastStatus = e.status;
      if (typeof e.sessionOffset === "number") v.sessionOffset = e.sessionOffset;
      if (e.settled === true && cycle === v.cycle) v.settledStatus = e.status;
    } else if (e.type === "late_evidence" && cycle === v.cycle) v.lateEvidence = true;
    else if (e.type === "closed") v.closed = true;
  }
  return v;
}

/** result.json against the evidence; an empty list when they agree. */
export function verifyTask(i: VerifyInput): Difference[] {
  const out: Difference[] = [];
  const r = i.result;
  const j = journalVerdict(i.events);
  const differ = (field: string, stored: unknown, expected: unknown, source: string, why?: string) => {
    if (JSON.stringify(stored) !== JSON.stringify(expected))
      out.push({ field, stored, expected, source, ...(why !== undefined ? { why } : {}) });
  };
  const verdict = j.reason ? settleVerdict(j.reason) : undefined;
  const code = verdict?.error?.code;
  // The status: closed once the journal says so; else the settled status record, which must agree with what the
  // settle reason fixes (a failure, an interruption, a gone child).
  const expected = j.closed ? "closed" : (verdict?.status ?? j.settledStatus);
  if (expected !== undefined) differ("status", r.status, expected, "the journal", code ?? j.reason?.kind);
  if (!j.closed && verdict?.status && j.settledStatus && j.settledStatus !== verdict.status)
    out.push({
      field: "journal",
      stored: j.settledStatus,
      expected: verdict.status,
      source: "the journal",
      why: `its settled status record disagrees with its settle record (${j.reason!.kind})`,
    });
  differ("nextAction", r.nextAction, nextActionFor(r.status), "the status", `status ${r.status}`);
  // The error a settle reason fixes (pi's refusal, a timeout, a contract error, a lost record) is the one carried.
  if (code !== undefined && (verdict?.replacesError || r.error === undefined))
    differ("error.code", r.error?.code, code, "the journal", j.reason?.kind);
  if ((r.status === "failed" || r.status === "gone") && r.error === undefined && expected === r.status)
    out.push({ field: "error", stored: undefined, expected: "an error", source: "the status", why: r.status });
  const s = i.session;
  if (s) {
    if (r.usage) {
      differ("usage.outputTokens", r.usage.outputTokens, s.usage.outputTokens, "the session");
      differ("usage.assistant", r.usage.assistant, s.usage.assistant, "the session");
      differ("usage.toolCalls", r.usage.toolCalls, s.usage.toolCalls, "the session");
      // Results written before these fields existed do not carry them: only a field that is there is checked.
      for (const k of ["inputTokens", "cacheReadTokens", "cacheWriteTokens", "cost"] as const)
        if (r.usage[k] !== undefined) differ(`usage.${k}`, r.usage[k], s.usage[k], "the session");
    }
    if (s.model !== undefined) differ("agent.model", r.agent.model, s.model, "the session");
    if (s.thinkingLevel !== undefined) differ("agent.thinking", r.agent.thinking, s.thinkingLevel, "the session");
  }
  if (r.diff && i.patchBytes !== undefined) differ("diff.patchBytes", r.diff.patchBytes, i.patchBytes, "diff.patch");
  return out;
}

/** One line per difference: `status: result.json says completed, the journal says failed (CONTRACT_ERROR)`. */
export function describeDifference(d: Difference): string {
  const show = (v: unknown) => (v === undefined ? "nothing" : typeof v === "string" ? v : JSON.stringify(v));
  if (d.field === "journal")
    return `journal: its settled status record says ${show(d.stored)}, its settle record's verdict says ${show(d.expected)}${d.why ? ` (${d.why})` : ""}`;
  return `${d.field}: result.json says ${show(d.stored)}, ${d.source} says ${show(d.expected)}${d.why ? ` (${d.why})` : ""}`;
}
