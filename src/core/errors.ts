// One error type for the whole project: a stable `code` string and a message that names the fix.

export const ERROR_CODES = [
  // from the original plugin
  "HERDR_UNAVAILABLE",
  "HERDR_TOO_OLD",
  "HERDR_PROTOCOL",
  "AGENT_NOT_FOUND",
  "PANE_GONE",
  "AGENT_BLOCKED",
  "AGENT_STALLED",
  "SPAWN_REFUSED",
  "CONCURRENCY_LIMIT",
  "CWD_NOT_ALLOWED",
  "TASK_NOT_FOUND",
  // ours
  "BAD_TASK_ID",
  "BAD_REQUEST",
  "BAD_PARAMS",
  "UNKNOWN_METHOD",
  "FRAME_TOO_LARGE",
  "UNAUTHORIZED",
  "FORBIDDEN",
  "NOT_OWNER",
  "BAD_STATE",
  "CONFIG_INVALID",
  "HOME_UNSAFE",
  "HOME_UNWRITABLE",
  "DAEMON_UNAVAILABLE",
  "DAEMON_RUNNING",
  "RUNTIME_UNAVAILABLE",
  "LAUNCH_FAILED",
  "GIT_FAILED",
  "NOT_A_REPO",
  "RESULT_INVALID",
  "CONTRACT_ERROR",
  "TIMEOUT",
  "INTERNAL",
  "HERDR_REJECTED",
  "HERDR_PROTOCOL_MISMATCH",
  "PI_NOT_FOUND",
  "AGENT_ERROR",
  "AGENT_ABORTED",
  "PROMPT_FAILED",
  "RECORD_LOST",
  "NO_REPORT",
  // other machines (src/remote)
  "MACHINE_UNKNOWN",
  "MACHINE_UNREACHABLE",
  "FORWARD_FAILED",
  "REMOTE_INVALID",
  "REMOTE_LOST",
  "REMOTE_CHANGING",
  "CONNECTION_LIMIT",
  "SLOW_READER",
  "HOME_NOT_YOURS",
  "MODEL_UNKNOWN",
  "MODEL_NOT_FOUND",
  // landing the work (src/git/land.ts, src/checks)
  "CHECKOUT_DIRTY",
  "CHECKOUT_ELSEWHERE",
  "CHECKOUT_IN_THE_WAY",
  "LAND_CANCELLED",
  "LAND_CONFLICT",
  "CHECK_FAILED",
  "SETUP_FAILED",
  "WORKTREE_GONE",
  // spend limits (src/core/budget.ts)
  "BUDGET_EXCEEDED",
  "CAP_REACHED",
  "CAP_NEEDS_PERSON",
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export class DshError extends Error {
  readonly code: ErrorCode;
  readonly details?: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(message, options?.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = "DshError";
    this.code = code;
    if (details !== undefined) this.details = details;
  }

  toJSON(): { code: ErrorCode; message: string } {
    return { code: this.code, message: this.message };
  }

  /**
   * The error as a socket reply carries it: `{code, message, data}`, data being the details, so a client acts on
   * fields (which param, which landing) instead of parsing the message. Details never hold a secret; a key named
   * like one is dropped all the same.
   */
  toWire(): WireError {
    const data =
      this.details === undefined
        ? undefined
        : Object.fromEntries(Object.entries(this.details).filter(([k]) => !SECRET_KEY.test(k)));
    return data && Object.keys(data).length > 0
      ? { code: this.code, message: this.message, data }
      : { code: this.code, message: this.message };
  }
}

/** An error reply on the socket (docs/socket-protocol.md, "Errors"). */
export interface WireError {
  code: ErrorCode;
  message: string;
  data?: Record<string, unknown>;
}

const SECRET_KEY = /secret|token|password|credential/i;

export function isDshError(e: unknown): e is DshError {
  return e instanceof DshError;
}

/** Wrap anything thrown into a DshError without losing a code it already had. */
export function asDshError(e: unknown, fallback: ErrorCode = "INTERNAL"): DshError {
  if (e instanceof DshError) return e;
  const message = e instanceof Error ? e.message : String(e);
  // The original stays reachable for logs and debugging (its stack names where it came from).
  return new DshError(fallback, message, undefined, { cause: e });
}
