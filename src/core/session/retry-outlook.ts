// Will pi retry an error ending? Each pi line says so in its own way, and the answer is read from that line's own
// signals, never from one line's rules applied to the other:
// - pi 1.x decides after agent_end (it never retries quota errors, it retries more transport errors) and says so:
//   a retried attempt is omitted from the model's context with a `context_edit` entry (replacement null) written
//   right after it, and an extension gets `agent_settled` once no retry, compaction or queued continuation follows.
// - pi 0.73.1 tells extensions nothing and writes no marker; its own rule (the `_isRetryableError` pattern and the
//   retry settings) is the only signal, so it is kept here as 0.73's, for 0.73 only.

export type PiLine = "0.73" | "1.x";

/** The line of a pi version string ("0.73.1" → "0.73", "1.6.0" → "1.x"); undefined when it is not a version. */
export function piLineOfVersion(version: string | undefined): PiLine | undefined {
  const m = /^(\d+)\.(\d+)\./.exec(version?.trim() ?? "");
  if (!m) return undefined;
  return Number(m[1]) >= 1 ? "1.x" : "0.73";
}

/**
 * The line a session entry proves, when it proves one: only pi 1.x writes the run's system prompt as a
 * `role:"system"` message, and `context_edit` entries.
 */
export function piLineOfEntry(e: { type: string; message?: unknown }): PiLine | undefined {
  if (e.type === "context_edit") return "1.x";
  if (
    e.type === "message" &&
    typeof e.message === "object" &&
    e.message !== null &&
    (e.message as { role?: unknown }).role === "system"
  )
    return "1.x";
  return undefined;
}

/** pi 0.73.1 `_isRetryableError` (agent-session.js): on 0.73, errors matching this are retried automatically. */
export const PI_073_RETRYABLE_ERROR =
  /overloaded|provider.?returned.?error|rate.?limit|too many requests|429|500|502|503|504|service.?unavailable|server.?error|internal.?error|network.?error|connection.?error|connection.?refused|connection.?lost|websocket.?closed|websocket.?error|other side closed|fetch failed|upstream.?connect|reset before headers|socket hang up|ended without|http2 request did not get a response|timed? out|timeout|terminated|retry delay/i;

export function isRetryableError073(errorMessage: string | undefined): boolean {
  return errorMessage !== undefined && errorMessage !== "" && PI_073_RETRYABLE_ERROR.test(errorMessage);
}

export interface RetrySettings {
  enabled: boolean;
  maxRetries: number;
}

/**
 * What follows an assistant that ended in `error`, as known at that moment:
 * - "retry": pi will retry it (0.73's rule says so);
 * - "final": no retry follows;
 * - "await_settle": pi 1.x decides after this point; wait for its own signal (the extension's `agent_settled`,
 *   or in the session file a `context_edit` that omits this attempt).
 */
export type ErrorOutlook = "retry" | "final" | "await_settle";

export function errorEndingOutlook(
  line: PiLine,
  e: {
    errorMessage: string | undefined;
    settings: RetrySettings /** retryable errors in a row, this one included */;
    retryableInARow: number;
  },
): ErrorOutlook {
  if (line === "1.x") return "await_settle";
  if (!isRetryableError073(e.errorMessage)) return "final";
  return e.settings.enabled && e.retryableInARow <= e.settings.maxRetries ? "retry" : "final";
}

/** pi 1.x's session marker of a retry (or an overflow compaction that re-runs the turn): the attempt is omitted. */
export function isRetryOmission(
  e: { type: string; targetId?: unknown; replacement?: unknown },
  attemptId: string | undefined,
): boolean {
  return e.type === "context_edit" && attemptId !== undefined && e.targetId === attemptId && e.replacement === null;
}
