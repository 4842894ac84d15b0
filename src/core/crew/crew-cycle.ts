// The child's cycle acceptance (pi-crew Result Protocol "Successful Results"): a cycle is accepted when its last
// assistant message's tool-call batch is exactly one crew_report whose tool result succeeded. A normal ending
// without one gets one finalization follow-up; a second becomes a contract error. error/aborted endings are
// technical and get no reminder. Pure: it reads the messages pi's agent_end carries.
import type { CrewReport } from "./crew-delivery.js";
import type { SessionFacts } from "../session/session-reader.js";

export type { CrewReport };

export type CycleVerdict =
  | { kind: "accepted"; args: unknown }
  | { kind: "technical"; stopReason: "error" | "aborted"; errorMessage?: string }
  | { kind: "reportless"; why: string };

interface Msg {
  role?: string;
  stopReason?: string;
  errorMessage?: string;
  content?: unknown;
  toolCallId?: string;
  toolName?: string;
  isError?: boolean;
}

export const FINALIZE_PROMPT =
  "FINALIZE: this cycle ended without a valid final report. Call the `crew_report` tool now, alone in its own tool-call batch: " +
  '{"outcome":"completed","report":"<your complete final answer>"} or {"outcome":"needs_input","report":"<what you did>","needs":"<the exact question>"}.';

export const CONTRACT_ERROR_MESSAGE =
  "the subagent ended its cycle twice without a valid crew_report (one finalization follow-up was sent); inspect its session, then spawn it again with a clearer task";

/** Judge one cycle from agent_end's messages (the cycle's new messages, in order). */
export function judgeCycle(messages: readonly unknown[]): CycleVerdict {
  const msgs = messages as Msg[];
  let lastIdx = -1;
  for (let i = msgs.length - 1; i >= 0; i--) {
    if (msgs[i]?.role === "assistant") {
      lastIdx = i;
      break;
    }
  }
  const last = msgs[lastIdx];
  if (!last) return { kind: "reportless", why: "no assistant message" };
  if (last.stopReason === "error" || last.stopReason === "aborted") {
    return {
      kind: "technical",
      stopReason: last.stopReason,
      ...(last.errorMessage ? { errorMessage: last.errorMessage } : {}),
    };
  }
  const calls = (Array.isArray(last.content) ? last.content : []).filter(
    (c: { type?: string }) => c?.type === "toolCall",
  ) as { id?: string; name?: string; arguments?: unknown }[];
  if (calls.length === 0) return { kind: "reportless", why: "the last message has no crew_report call" };
  if (calls.length !== 1 || calls[0]!.name !== "crew_report")
    return { kind: "reportless", why: "the final tool-call batch must be exactly one crew_report call" };
  const call = calls[0]!;
  const result = msgs.slice(lastIdx + 1).find((m) => m.role === "toolResult" && m.toolCallId === call.id);
  if (!result) return { kind: "reportless", why: "crew_report has no tool result" };
  if (result.isError) return { kind: "reportless", why: "crew_report was rejected" };
  return { kind: "accepted", args: call.arguments };
}

/** Cycle-local bookkeeping: how many reportless endings this cycle has had. */
export class CycleGuard {
  private reminders = 0;

  /** A new cycle (crew_spawn's prompt or a crew_respond follow-up) starts fresh. */
  newCycle(): void {
    this.reminders = 0;
  }

  /** What to do after a reportless normal ending: one follow-up, then the contract error. */
  onReportless(): "finalize" | "contract_error" {
    this.reminders += 1;
    return this.reminders === 1 ? "finalize" : "contract_error";
  }
}

/** crew_report's arguments: the report when valid, else an error message naming the fix (thrown as {"error": ...}). */
export function checkCrewReport(params: unknown): CrewReport | string {
  if (typeof params !== "object" || params === null || Array.isArray(params))
    return "crew_report needs {outcome, report}";
  const p = params as Record<string, unknown>;
  const unknown = Object.keys(p).filter((k) => !["outcome", "report", "needs"].includes(k));
  if (unknown.length > 0)
    return `crew_report has unknown field(s) ${unknown.join(", ")}; use only outcome, report and needs`;
  if (p.outcome !== "completed" && p.outcome !== "needs_input") return 'outcome must be "completed" or "needs_input"';
  if (typeof p.report !== "string" || p.report.trim() === "")
    return "report must be a non-blank string holding your complete final answer";
  if (p.outcome === "needs_input") {
    if (typeof p.needs !== "string" || p.needs.trim() === "")
      return 'outcome "needs_input" requires a non-blank `needs` saying what you need';
    return { outcome: "needs_input", report: p.report, needs: p.needs };
  }
  if (p.needs !== undefined) return '`needs` is only allowed with outcome "needs_input"; drop it or change the outcome';
  return { outcome: "completed", report: p.report };
}

/**
 * The accepted crew_report a session's current cycle ended on (pi stops after a terminating tool, so the session
 * ends on its successful result), read back from the file: it survives a daemon restart, unlike a socket message.
 */
export function sessionReport(facts: SessionFacts | undefined): CrewReport | undefined {
  if (!facts || facts.terminatedBy !== "crew_report" || facts.lastToolCalls.length !== 1) return undefined;
  const r = checkCrewReport(facts.lastToolCalls[0]!.arguments);
  return typeof r === "string" ? undefined : r;
}

/**
 * A cycle that ended on an accepted crew_report has no assistant text after it (the tool terminates the loop), so
 * its final message is the report: the child's complete final answer. Other cycles keep their last text.
 */
export function withReportAsFinalText(facts: SessionFacts): SessionFacts {
  const r = sessionReport(facts);
  return r ? { ...facts, finalText: r.report } : facts;
}
