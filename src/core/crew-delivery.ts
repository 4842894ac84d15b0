// Owner-bound deliveries (pi-crew Result Protocol "Owner Delivery"): the model-bound JSON, the TUI card data,
// the delivery id that makes injection idempotent, and the 24 h expiry of queued deliveries.
import type { AgentResult, AgentStatus } from "./types.js";

export type CrewStatus = "running" | "completed" | "needs_input" | "error" | "aborted" | "closed";

/** The validated crew_report of one cycle, exactly as the child sent it. */
export interface CrewReport {
  outcome: "completed" | "needs_input";
  report: string;
  needs?: string;
}

/** Model context for completed/needs_input, or for an error; aborts never reach the model. */
export type ModelDelivery =
  | {
      subagent_id: string;
      brief: string;
      result: CrewReport;
      checks?: ModelCheck[];
      verified?: boolean;
      /** Additive: the result's warnings (a conflicting sibling, an unisolated checkout, a diff not harvested...). */
      warnings?: string[];
    }
  | { subagent_id: string; brief: string; status: "error"; error: string };

/**
 * A check receipt as the owner's model sees it (additive to the pi-crew delivery): what ran and how it ended, and
 * for a failing one the last lines of its output, so the model can `crew_respond` with the failure in hand.
 */
export interface ModelCheck {
  command: string;
  exitCode: number | null;
  cutOff?: "timeout" | "output";
  outputTail?: string;
}

function modelChecks(result: AgentResult): { checks?: ModelCheck[]; verified?: boolean } {
  if (!result.checks?.length) return {};
  const checks = result.checks.map((c): ModelCheck => {
    const failed = c.exitCode !== 0 || c.cutOff !== undefined;
    return {
      command: c.command,
      exitCode: c.exitCode,
      ...(c.cutOff ? { cutOff: c.cutOff } : {}),
      ...(failed ? { outputTail: c.outputTail } : {}),
    };
  });
  return { checks, ...(result.verified !== undefined ? { verified: result.verified } : {}) };
}

/** What a TUI card is rendered from (message details, never model-bound). */
export interface CardData {
  status: "completed" | "needs_input" | "error" | "aborted";
  subagent_id: string;
  brief: string;
  report?: string;
  needs?: string;
  error?: string;
  reason?: string;
}

export interface DeliveryPayload {
  deliveryId: string;
  taskId: string;
  cycle: number;
  /** null for aborts: a TUI-only card. */
  model: ModelDelivery | null;
  card: CardData;
}

export const DELIVERY_TTL_MS = 24 * 60 * 60 * 1000;

/** The design's mapping of AgentResult.status onto the pi-crew lifecycle (design §4). */
export function crewStatusOf(s: AgentStatus): CrewStatus {
  switch (s) {
    case "blocked":
      return "needs_input";
    case "completed":
      return "completed";
    case "failed":
    case "gone":
      return "error";
    case "interrupted":
      return "aborted";
    case "closed":
      return "closed";
    default:
      return "running";
  }
}

/** Open = visible to crew_status and awaiting either the child (running) or the owner (completed, needs_input). */
export const isOpenCrewStatus = (s: CrewStatus): boolean => s === "running" || s === "completed" || s === "needs_input";
export const awaitsOwner = (s: CrewStatus): boolean => s === "completed" || s === "needs_input";

/**
 * One id per task, cycle and outcome: a redelivery after a crash or reconnect carries the same id, so it is never
 * injected twice, while an abort after a completed cycle is still its own delivery.
 */
export function deliveryIdFor(taskId: string, cycle: number, status: CrewStatus): string {
  return `${taskId}-c${cycle}-${status}`;
}

/** The task and cycle a delivery id names (`<taskId>-c<cycle>`): a cycle has exactly one outcome. */
export function deliveryCycleOf(deliveryId: string): string {
  const i = deliveryId.lastIndexOf("-");
  return i > 0 ? deliveryId.slice(0, i) : deliveryId;
}

/**
 * The report of a settled cycle without a crew_report (result.md written by hand, a child without our extension):
 * result.md's body, else the final message, verbatim. Nothing is made up: with neither there is no report.
 */
export function fallbackReport(result: AgentResult): CrewReport | undefined {
  const body = result.result?.text.replace(/^---[\s\S]*?\n---\s*\n?/, "").trim();
  const report = body || result.finalMessage?.trim();
  if (!report) return undefined;
  if (result.status === "blocked")
    return { outcome: "needs_input", report, needs: result.result?.meta.summary?.trim() || report };
  return { outcome: "completed", report };
}

/**
 * A cycle the daemon paused at a spend cap: the owner is asked (needs: the cap and the spend, from the summary), and
 * the report says what happened, with the child's last words when it had any. Nothing is made up: no completion.
 */
function capReport(result: AgentResult): CrewReport {
  const last = result.finalMessage?.trim();
  const report = `The daemon paused this subagent at its ${result.cap!.cap === "cost" ? "cost" : result.cap!.cap === "outputTokens" ? "output-token" : "turn"} cap before it finished; its work so far is in its session and worktree.${last ? `\n\nIts last message:\n\n${last}` : " It had not reported yet."}`;
  return { outcome: "needs_input", report, needs: result.summary };
}

/** The delivery for a settled cycle, or null when the status owes the owner nothing (running, closed). */
export function deliveryFor(result: AgentResult, cycle: number, report?: CrewReport): DeliveryPayload | null {
  const status = crewStatusOf(result.status);
  const subagent_id = result.taskId;
  const brief = result.brief ?? "";
  const base = (s: CrewStatus) => ({ deliveryId: deliveryIdFor(subagent_id, cycle, s), taskId: subagent_id, cycle });
  const errorDelivery = (error: string): DeliveryPayload => ({
    ...base("error"),
    model: { subagent_id, brief, status: "error", error },
    card: { status: "error", subagent_id, brief, error },
  });
  if (status === "completed" || status === "needs_input") {
    const r =
      result.cap && status === "needs_input"
        ? capReport(result)
        : report && report.outcome === status
          ? report
          : fallbackReport(result);
    if (!r) {
      return errorDelivery(
        `NO_REPORT: the subagent ended its cycle without a report (no crew_report, no result.md, no final message); inspect its session${result.sessionPath ? ` (${result.sessionPath})` : ""}, then respond or spawn again`,
      );
    }
    const card: CardData = {
      status,
      subagent_id,
      brief,
      report: r.report,
      ...(r.needs !== undefined ? { needs: r.needs } : {}),
    };
    const warnings = result.warnings?.length ? { warnings: [...result.warnings] } : {};
    return { ...base(status), model: { subagent_id, brief, result: r, ...modelChecks(result), ...warnings }, card };
  }
  if (status === "error") {
    return errorDelivery(
      result.error
        ? `${result.error.code}: ${result.error.message}`
        : result.summary || `the subagent ended as ${result.status}`,
    );
  }
  if (status === "aborted") {
    // Only an abort the owner asked for is TUI-only (it knows); a timeout or another unrequested stop is an error.
    if (result.error) return errorDelivery(`${result.error.code}: ${result.error.message}`);
    return { ...base(status), model: null, card: { status, subagent_id, brief, reason: "aborted" } };
  }
  return null;
}

/**
 * The delivery as pushed: the report once. The card's report and needs are the model's (deliveryFor makes them so),
 * so the push leaves them out of the card and the owner extension reads them back with cardOfPushed.
 */
export function pushedDelivery<T extends DeliveryPayload>(d: T): T {
  const r = d.model && "result" in d.model ? d.model.result : undefined;
  if (!r) return d;
  const { report, needs, ...card } = d.card;
  const keep = {
    ...(report !== undefined && report !== r.report ? { report } : {}),
    ...(needs !== undefined && needs !== r.needs ? { needs } : {}),
  };
  return { ...d, card: { ...card, ...keep } };
}

/** The whole card of a pushed delivery: the report and needs a push left out taken from its model part. */
export function cardOfPushed<T extends DeliveryPayload>(d: T): T {
  const r = d.model && "result" in d.model ? d.model.result : undefined;
  if (!r || d.card.report !== undefined) return d;
  return {
    ...d,
    card: {
      ...d.card,
      report: r.report,
      ...(r.needs !== undefined && d.card.needs === undefined ? { needs: r.needs } : {}),
    },
  };
}

export function isExpired(queuedAt: number, now: number, ttlMs = DELIVERY_TTL_MS): boolean {
  return now - queuedAt > ttlMs;
}
