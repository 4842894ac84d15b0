// Status derivation: the contract's flowchart (docs/result-contract.md), plus the external rule and lifecycle overrides.
import type { AgentStatus, HerdrStatus, NextAction } from "../types.js";

export type Lifecycle = "starting" | "closed" | "interrupted";

/**
 * The fused raw state at the top of the flowchart (design §4). `runtime` is Herdr's agent state on the herdr
 * runtime; on tmux/headless it is "working" while the child's cycle runs, "idle" once it settled, and "missing"
 * when the pane or process is gone.
 */
export interface RawState {
  /** A pane the daemon did not spawn: observed, never judged. */
  external: boolean;
  runtime: HerdrStatus | "missing";
  /** The cycle ended in a final pi error (stopReason "error" with no retry to come). */
  sessionError: boolean;
  /** result.md frontmatter `status`, as written. */
  resultStatus?: string;
  /** Set by the supervisor outside harvest; wins over everything else. */
  lifecycle?: Lifecycle;
}

/** The result.md statuses the flowchart knows; anything else reads as completed (with a warning). */
export const RESULT_STATUSES = ["completed", "failed", "blocked"] as const;
export type ResultStatus = (typeof RESULT_STATUSES)[number];

export function normalizeResultStatus(s: string | undefined): ResultStatus | undefined {
  if (s === undefined) return undefined;
  const v = s.trim().toLowerCase();
  return (RESULT_STATUSES as readonly string[]).includes(v) ? (v as ResultStatus) : undefined;
}

/** A warning for a result.md status the flowchart does not know, or undefined when it is fine or absent. */
export function resultStatusWarning(s: string | undefined): string | undefined {
  if (s === undefined || s.trim() === "" || normalizeResultStatus(s) !== undefined) return undefined;
  return `result.md status ${JSON.stringify(s.slice(0, 40))} is not completed/failed/blocked; read as completed`;
}

export function deriveStatus(raw: RawState): AgentStatus {
  if (raw.lifecycle !== undefined) return raw.lifecycle;
  const rt = raw.runtime;
  if (rt === "missing") return "gone";
  if (rt === "blocked") return "blocked";
  if (rt === "working" || rt === "unknown") return "running";
  // idle / done
  if (raw.external) return "idle";
  if (raw.sessionError) return "failed";
  const rs = normalizeResultStatus(raw.resultStatus);
  if (rs === "failed") return "failed";
  if (rs === "blocked") return "blocked";
  return "completed";
}

export function nextActionFor(status: AgentStatus): NextAction {
  switch (status) {
    case "completed":
    case "closed":
    case "idle":
      return "none";
    case "starting":
    case "working":
    case "running":
      return "wait";
    case "blocked":
      return "answer";
    case "failed":
    case "gone":
    case "interrupted":
      return "inspect";
  }
}

/** Statuses after which the task waits for nobody: a harvest is final for this cycle. */
export function isSettledStatus(status: AgentStatus): boolean {
  return nextActionFor(status) !== "wait";
}

/**
 * What a task record's status follows from, in each place it changes: the machine's verdict, through the flowchart.
 * The record's status is written by recordStatus only (test/unit/shape.test.ts).
 */
export type StatusVerdict =
  /** A result was built for the task (a harvest through deriveStatus, a relayed machine's checked result, a close). */
  | { kind: "result"; status: AgentStatus }
  /** Recovery starts a task that never launched again: the lifecycle says starting. */
  | { kind: "start_again" }
  /** Recovery found a follow-up journaled after the last record: its cycle is under way, not harvested yet. */
  | { kind: "follow_up_journaled" }
  /** A relayed task's machine runs a new cycle (a follow-up it took, or one journaled before a restart). */
  | { kind: "running_there" };

/** The status a verdict gives the task's record. */
export function statusFor(v: StatusVerdict): AgentStatus {
  switch (v.kind) {
    case "result":
      return v.status;
    case "start_again":
      return deriveStatus({ external: false, runtime: "working", sessionError: false, lifecycle: "starting" });
    case "follow_up_journaled":
      // Working: the follow-up may not have reached the child yet; the next harvest says running.
      return "working";
    case "running_there":
      // The other machine's daemon runs the cycle: its runtime is working there.
      return deriveStatus({ external: false, runtime: "working", sessionError: false });
  }
}

/** The one writer of a task record's status: the status its verdict gives (statusFor). Returns it. */
export function recordStatus(rec: { status: AgentStatus }, v: StatusVerdict): AgentStatus {
  rec.status = statusFor(v);
  return rec.status;
}
