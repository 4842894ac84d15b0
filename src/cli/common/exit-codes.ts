// Exit codes (docs/cli.md): 0 ok, 1 failed task or error, 2 usage, 3 timeout, 4 a check failed.
import { isDshError } from "../../core/errors.js";
import type { AgentResult, AgentStatus } from "../../core/types.js";

export const EXIT = { ok: 0, failed: 1, usage: 2, timeout: 3, checkFailed: 4 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/**
 * Errors that are always a mistake in what was typed, wherever they are found (the daemon refuses a model name no
 * alias defines; an id that matches several tasks): exit 2 like any other usage error.
 */
const USAGE_CODES: ReadonlySet<string> = new Set(["MODEL_UNKNOWN", "BAD_TASK_ID"]);

/** The exit code an error maps to. */
export function exitCodeForError(e: unknown): ExitCode {
  if (isDshError(e)) {
    if (e.details?.["usage"] === true || USAGE_CODES.has(e.code)) return EXIT.usage;
    if (e.code === "TIMEOUT") return EXIT.timeout;
  }
  return EXIT.failed;
}

const FAILED: ReadonlySet<AgentStatus> = new Set(["failed", "gone", "interrupted"]);

/** A settled task's status as an exit code: a failed, gone or interrupted task is a failure. */
export function exitCodeForStatus(status: AgentStatus): ExitCode {
  return FAILED.has(status) ? EXIT.failed : EXIT.ok;
}

/**
 * Settled tasks as one exit code (wait, spawn --wait): a failed, gone or interrupted task is a failure (1); else a
 * task whose checks failed or were cut off (`verified: false`) is 4, so a script does not take it for a pass.
 */
export function exitCodeForResults(results: readonly Pick<AgentResult, "status" | "verified">[]): ExitCode {
  const worst = Math.max(EXIT.ok, ...results.map((r) => exitCodeForStatus(r.status))) as ExitCode;
  if (worst !== EXIT.ok) return worst;
  return results.some((r) => r.verified === false) ? EXIT.checkFailed : EXIT.ok;
}
