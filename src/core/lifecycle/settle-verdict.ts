// What a settle reason fixes about a cycle's outcome (its status, its error), before the evidence is read.
import { CONTRACT_ERROR_MESSAGE } from "../crew/crew-cycle.js";
import type { SettleReason } from "./cycle-phase.js";

/** The status a settle reason fixes outright (else the evidence decides), and the error it carries. */
export interface SettleVerdict {
  status?: "failed" | "interrupted" | "gone" | "blocked";
  error?: { code: string; message: string };
  /** The error replaces one the cycle already carries (else an earlier error stands). */
  replacesError?: boolean;
}

/** `where`: the task's session path, for the fix in the message. */
export function settleVerdict(reason: SettleReason, where = "the task's session"): SettleVerdict {
  switch (reason.kind) {
    case "prompt_failed":
      return {
        status: "failed",
        error: {
          code: "PROMPT_FAILED",
          message: `pi did not run the prompt: ${reason.message.replace(/[.\s]+$/, "")}; fix the model or its credentials (dsh-herdr doctor), then spawn again`,
        },
      };
    case "timeout":
      // The timeout is why the cycle ended: its error replaces whatever the child reported before it was stopped.
      return {
        status: "interrupted",
        replacesError: true,
        error: {
          code: "TIMEOUT",
          message: `no result within timeoutMs (${reason.ms} ms); the child was stopped. Inspect ${where}, then spawn again with a larger timeout or a smaller task`,
        },
      };
    case "owner_abort":
      return { status: "interrupted" };
    case "contract_error":
      return { status: "failed", error: { code: "CONTRACT_ERROR", message: CONTRACT_ERROR_MESSAGE } };
    case "start_failed":
      return { status: "failed", error: { code: reason.code, message: reason.message } };
    case "record_lost":
      return { status: "failed", error: { code: "RECORD_LOST", message: reason.message } };
    case "runtime_gone":
      return { status: "gone" };
    case "agent_end":
    case "session_settled":
      // An abort nobody asked for (a signal, a closed pane, Escape in the TUI) is no completion.
      if (reason.stopReason === "aborted") {
        return {
          status: "failed",
          error: {
            code: "AGENT_ABORTED",
            message: `pi aborted the cycle without being asked (a signal, a closed pane or an interrupt in its TUI); inspect ${where}, then spawn again (a failed task takes no response)`,
          },
        };
      }
      return {};
    case "settled_before_crash":
      return {};
    case "remote":
      // The other machine judged the cycle: its result (checked on arrival) carries the status and the error.
      return {};
    case "remote_invalid":
      // This daemon refused the machine's word: nothing of it is taken, the cycle fails here.
      return { status: "failed", replacesError: true, error: { code: "REMOTE_INVALID", message: reason.message } };
    case "remote_lost":
      return { status: "gone", replacesError: true, error: { code: "REMOTE_LOST", message: reason.message } };
    case "cap":
      // Paused at a spend cap: the task asks its owner (respond raises the cap); no error, never a completion.
      return { status: "blocked" };
  }
}

/** An ending the owner asked for (its abort): the only one that reaches it as a TUI-only card. */
export const ownerRequested = (reason: SettleReason): boolean => reason.kind === "owner_abort";

/** What a settle's error is judged from besides its reason: the cycle's evidence as pinned by the settle. */
export interface SettleEvidence {
  /** The cycle ended with an accepted crew_report. */
  hasReport: boolean;
  /** pi's last stop reason (the session's, else the extension's agent_end). */
  stopReason?: string;
  /** pi's error text of that ending (the session's, else the extension's agent_end). */
  errorMessage?: string;
  /** The disk was full when the cycle settled (statfs at settle): said in a PANE_GONE/AGENT_ERROR message. */
  diskNote?: string;
  sessionPath: string;
}

/**
 * The error a settled cycle carries: the one its reason fixes (a refused prompt, a timeout, a contract error, a
 * failed start, a lost record), else why a reportless cycle failed (pi's final error, a child gone mid-cycle), else
 * a generic one for a cycle the verdict failed. A full disk is named in a PANE_GONE or AGENT_ERROR message. Pure:
 * the daemon at settle and `verify` afterwards judge the same pinned evidence the same way.
 */
export function settleError(reason: SettleReason, ev: SettleEvidence): { code: string; message: string } | undefined {
  const verdict = settleVerdict(reason, `the session (${ev.sessionPath})`);
  let error = verdict.error;
  if (!error && verdict.status !== "interrupted" && reason.kind !== "remote") error = failureOf(reason, ev);
  if (!error && verdict.status === "failed")
    error = {
      code: "AGENT_ERROR",
      message: `the cycle failed (${reason.kind}); inspect the session (${ev.sessionPath})`,
    };
  if (error && ev.diskNote && (error.code === "PANE_GONE" || error.code === "AGENT_ERROR"))
    error = { code: error.code, message: `${error.message}; ${ev.diskNote}` };
  return error;
}

/** Why a cycle that settles without a report failed, so the owner's error delivery and the card can say so. */
function failureOf(
  reason: SettleReason,
  ev: SettleEvidence,
): { code: "AGENT_ERROR" | "PANE_GONE"; message: string } | undefined {
  if (ev.hasReport) return undefined;
  const where = `inspect the session (${ev.sessionPath})`;
  if (ev.stopReason === "error") {
    const msg = ev.errorMessage ?? "no error message";
    return {
      code: "AGENT_ERROR",
      message: `the child's model call failed: ${msg}; ${where}, check the model and provider, then spawn again (a failed task takes no response)`,
    };
  }
  if (reason.kind === "runtime_gone") {
    const how = reason.how === "away" ? "gone while the daemon was away" : `runtime ${reason.how}`;
    return {
      code: "PANE_GONE",
      message: `the child's process or pane ended before its cycle finished (${how}); ${where}, then spawn again`,
    };
  }
  return undefined;
}

/** The warning a settled cycle's result carries once result.md changed after the settle (late evidence). */
export const LATE_RESULT_WARNING =
  "result.md changed after the cycle settled; the settled result stands (respond to start a new cycle)";
