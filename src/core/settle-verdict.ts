// What a settle reason fixes about a cycle's outcome (its status, its error), before the evidence is read.
import { CONTRACT_ERROR_MESSAGE } from "./crew-cycle.js";
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
            message: `pi aborted the cycle without being asked (a signal, a closed pane or an interrupt in its TUI); inspect ${where}, then respond or spawn again`,
          },
        };
      }
      return {};
    case "settled_before_crash":
      return {};
    case "remote":
      // The other machine judged the cycle: its result (checked on arrival) carries the status and the error.
      return {};
    case "cap":
      // Paused at a spend cap: the task asks its owner (respond raises the cap); no error, never a completion.
      return { status: "blocked" };
  }
}

/** An ending the owner asked for (its abort): the only one that reaches it as a TUI-only card. */
export const ownerRequested = (reason: SettleReason): boolean => reason.kind === "owner_abort";
