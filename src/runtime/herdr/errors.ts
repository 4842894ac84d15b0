// Herdr's error codes (reference/herdr.md §5) mapped onto our stable codes; the Herdr code stays in details.
import { DshError, type ErrorCode } from "../../core/errors.js";

const MAP: Record<string, ErrorCode> = {
  pane_not_found: "PANE_GONE",
  agent_pane_not_found: "PANE_GONE",
  agent_not_found: "AGENT_NOT_FOUND",
  agent_not_running: "AGENT_NOT_FOUND",
  agent_blocked: "AGENT_BLOCKED",
  agent_prompt_stalled: "AGENT_STALLED",
  timeout: "TIMEOUT",
  server_not_running: "HERDR_UNAVAILABLE",
  server_unavailable: "HERDR_UNAVAILABLE",
};

/** A DshError for an `{error:{code,message}}` envelope Herdr sent back. */
export function herdrRejection(method: string, herdrCode: string, message: string): DshError {
  // Herdr answers a request it cannot parse as a whole with id "" and invalid_request (src/api/server.rs): our request
  // does not match the server's protocol, which no retry fixes.
  if (herdrCode === "invalid_request")
    return new DshError(
      "HERDR_PROTOCOL",
      `Herdr could not read dsh-herdr's ${method} request (${message || herdrCode}): the server's protocol differs from the one dsh-herdr speaks. Fix: check herdr status --json (protocol 20 or newer) and update Herdr or dsh-herdr`,
      { herdrCode, method },
    );
  const code = MAP[herdrCode] ?? "HERDR_REJECTED";
  return new DshError(code, `Herdr refused ${method}: ${herdrCode}: ${message}`, { herdrCode, method });
}

export function herdrCodeOf(e: unknown): string | undefined {
  if (e instanceof DshError && typeof e.details?.herdrCode === "string") return e.details.herdrCode;
  return undefined;
}

/** True when the error means the pane (or the agent in it) no longer exists. */
export function isGone(e: unknown): boolean {
  return e instanceof DshError && (e.code === "PANE_GONE" || e.code === "AGENT_NOT_FOUND");
}
