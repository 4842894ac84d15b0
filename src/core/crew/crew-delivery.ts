// Owner-bound deliveries (pi-crew Result Protocol "Owner Delivery"): the model-bound JSON, the TUI card data,
// the delivery id that makes injection idempotent, and the 24 h expiry of queued deliveries.
import { formatUsd } from "../budget.js";
import { cardCheckOf, type CardCheck } from "../result/check-lines.js";
import { SIBLING_PREFIX } from "../result/sibling-warning.js";
import type { AgentResult, AgentStatus, CapName, CapReached } from "../types.js";

export type CrewStatus = "running" | "completed" | "needs_input" | "error" | "aborted" | "closed";

/** The validated crew_report of one cycle, exactly as the child sent it. */
export interface CrewReport {
  outcome: "completed" | "needs_input";
  report: string;
  needs?: string;
}

/**
 * This project's extension of the pi-crew delivery, declared once: each field only when there is something to say.
 * `checks`/`verified`: the daemon's check receipts of the cycle. `work`: where an isolated task's work is (its branch)
 * and whether it is landed. `warnings`: only those the owner can act on (ownerWarnings), never our bookkeeping.
 */
export interface DeliveryExtras {
  checks?: ModelCheck[];
  verified?: boolean;
  work?: WorkPlace;
  warnings?: string[];
}

/** The names of DeliveryExtras, for the schema and the docs to be checked against. */
export const DELIVERY_EXTRAS = [
  "checks",
  "verified",
  "work",
  "warnings",
] as const satisfies readonly (keyof DeliveryExtras)[];

/** Where an isolated task's work is: its branch, and whether `land` put it on the branch it started from. */
export interface WorkPlace {
  branch: string;
  landed: boolean;
  /** The branch it landed on, once landed. */
  landedOn?: string;
  /** A task relayed to another machine: the branch is there (landed there, not in this checkout). */
  machine?: string;
}

/**
 * Model context: the child's validated report exactly as it made it, or an error-shaped delivery (`status:"error"`,
 * or `status:"blocked"` for a cycle the daemon paused at a spend cap, which a person lifts). Aborts never reach the model.
 */
export type ModelDelivery =
  | ({ subagent_id: string; brief: string; result: CrewReport } & DeliveryExtras)
  | ({ subagent_id: string; brief: string; status: "error" | "blocked"; error: string } & DeliveryExtras);

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

function modelChecks(result: AgentResult): Pick<DeliveryExtras, "checks" | "verified"> {
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
  /** `blocked`: paused at a spend cap, waiting for a person. */
  status: "completed" | "needs_input" | "blocked" | "error" | "aborted";
  subagent_id: string;
  brief: string;
  report?: string;
  needs?: string;
  error?: string;
  reason?: string;
  /** Each check the daemon ran on the cycle, as the card lists it. */
  checks?: CardCheck[];
  /** Where an isolated task's work is. */
  work?: WorkPlace;
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
export function deliveryIdFor(taskId: string, cycle: number, status: CrewStatus | "blocked"): string {
  return `${taskId}-c${cycle}-${status}`;
}

/** The task and cycle a delivery id names (`<taskId>-c<cycle>`): a cycle has exactly one outcome. */
export function deliveryCycleOf(deliveryId: string): string {
  const i = deliveryId.lastIndexOf("-");
  return i > 0 ? deliveryId.slice(0, i) : deliveryId;
}

/**
 * The validated crew_report of a task relayed to another machine, read back from the result.md that machine's child
 * extension wrote for it (`resultMdFor`: status completed or blocked; a needs_input's question after `## Needs`).
 * Only for relayed tasks: there the other daemon validated the report (its child never settles completed or blocked
 * without one), and this daemon has no session to read it from. Undefined when the result holds no such file.
 */
export function relayedReport(result: AgentResult): CrewReport | undefined {
  const status = result.result?.meta.status;
  const body = result.result?.text.replace(/^---[\s\S]*?\n---\s*\n?/, "").trim();
  if (!body) return undefined;
  if (status === "completed") return { outcome: "completed", report: body };
  if (status !== "blocked") return undefined;
  const at = body.lastIndexOf("\n\n## Needs\n\n");
  if (at < 0) return undefined;
  const report = body.slice(0, at).trim();
  const needs = body.slice(at + "\n\n## Needs\n\n".length).trim();
  return report && needs ? { outcome: "needs_input", report, needs } : undefined;
}

/**
 * Warnings an owner's model can act on: a sibling task whose work conflicts (land one, respond to the other) and a
 * reviewer that edited files. The rest (empty harvest, stale session, not isolated, a diff not harvested...) is our
 * bookkeeping: it stays in the AgentResult for a person.
 */
const OWNER_WARNINGS = [SIBLING_PREFIX, "reviewer changed files"];
export function ownerWarnings(warnings: readonly string[] | undefined): string[] {
  return (warnings ?? []).filter((w) => OWNER_WARNINGS.some((p) => w.startsWith(p)));
}

/** Where an isolated task's work is; undefined for a task that ran in the checkout it was spawned in. */
export function workPlaceOf(result: AgentResult): WorkPlace | undefined {
  if (!result.worktree) return undefined;
  const landedOn = result.landing?.landedAs ? result.landing.baseBranch : undefined;
  return {
    branch: result.worktree.branch,
    landed: landedOn !== undefined,
    ...(landedOn ? { landedOn } : {}),
    ...(result.agent.machine ? { machine: result.agent.machine } : {}),
  };
}

function extrasOf(result: AgentResult): DeliveryExtras {
  const work = workPlaceOf(result);
  const warnings = ownerWarnings(result.warnings);
  return {
    ...modelChecks(result),
    ...(work ? { work } : {}),
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}

function cardChecks(result: AgentResult): CardCheck[] | undefined {
  if (!result.checks?.length) return undefined;
  return result.checks.map(cardCheckOf);
}

const CAP_FLAG: Record<CapName, string> = {
  cost: "--max-cost",
  outputTokens: "--max-output-tokens",
  turns: "--max-turns",
};
const CAP_WORDS: Record<CapName, string> = { cost: "cost", outputTokens: "output-token", turns: "turn" };

/** The command a person runs to let a task paused at `cap` go on with another `step` of it. */
export function capRaiseCommand(taskId: string, cap: Pick<CapReached, "cap" | "step">): string {
  return `dsh-herdr respond ${taskId} ${CAP_FLAG[cap.cap]} ${cap.step} "go on"`;
}

/**
 * A cycle the daemon paused at a spend cap, in words for the owner's model: the cap, the spend, and that a person
 * (not the model the cap limits) raises it, with the exact command.
 */
export function capPauseText(taskId: string, cap: CapReached): string {
  const amount = (n: number) => (cap.cap === "cost" ? formatUsd(n) : String(n));
  return `${CAP_WORDS[cap.cap]} cap ${amount(cap.limit)} reached (${amount(cap.spent)} spent): the daemon paused this subagent, its session and work kept. A spend cap is raised by a person, not by the model it limits: do not crew_respond to it; ask the user to raise it by running \`${capRaiseCommand(taskId, cap)}\` (another ${amount(cap.step)} on top of what was spent), or to close it.`;
}

/**
 * The delivery for a settled cycle, or null when the status owes the owner nothing (running, closed). Never built
 * from a status: the child's validated crew_report exactly as it made it (whatever Herdr said), else an error that
 * carries the failure in pi's own words.
 */
export function deliveryFor(result: AgentResult, cycle: number, report?: CrewReport): DeliveryPayload | null {
  const status = crewStatusOf(result.status);
  const subagent_id = result.taskId;
  const brief = result.brief ?? "";
  const base = (s: CrewStatus | "blocked") => ({
    deliveryId: deliveryIdFor(subagent_id, cycle, s),
    taskId: subagent_id,
    cycle,
  });
  const extras = extrasOf(result);
  const checks = cardChecks(result);
  const cardExtras = { ...(checks ? { checks } : {}), ...(extras.work ? { work: extras.work } : {}) };
  const errorDelivery = (error: string, as: "error" | "blocked" = "error"): DeliveryPayload => ({
    ...base(as),
    model: { subagent_id, brief, status: as, error, ...extras },
    card: { status: as, subagent_id, brief, error, ...cardExtras },
  });
  if (status === "completed" || status === "needs_input" || result.status === "gone") {
    // A spend cap stopped the turn: nothing the child said, and a person's call, not the model's.
    if (result.cap && result.status === "blocked")
      return errorDelivery(`CAP_REACHED: ${capPauseText(subagent_id, result.cap)}`, "blocked");
    if (report) {
      const card: CardData = {
        status: report.outcome,
        subagent_id,
        brief,
        report: report.report,
        ...(report.needs !== undefined ? { needs: report.needs } : {}),
        ...cardExtras,
      };
      return { ...base(report.outcome), model: { subagent_id, brief, result: report, ...extras }, card };
    }
  }
  if (status === "completed" || status === "needs_input") {
    const last = result.finalMessage?.trim();
    return errorDelivery(
      `NO_REPORT: the subagent ended its cycle without a crew_report${last ? `; its last message:\n\n${last}\n\n` : " and without a final message; "}inspect its session${result.sessionPath ? ` (${result.sessionPath})` : ""}, then respond to ask for its report, or spawn again`,
    );
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
    // No reason: the card already says `aborted`, and who asked is the owner (or a person for it).
    return { ...base(status), model: null, card: { status, subagent_id, brief } };
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
