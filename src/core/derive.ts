// Status derivation: the contract's flowchart (docs/result-contract.md), plus the external rule and lifecycle overrides.
import type { AgentStatus, HerdrStatus, NextAction } from "./types.js";

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
