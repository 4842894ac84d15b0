// Exit codes (docs/cli.md): 0 ok, 1 failed task or error, 2 usage, 3 timeout.
import { isDshError } from "../core/errors.js";
import type { AgentStatus } from "../core/types.js";

export const EXIT = { ok: 0, failed: 1, usage: 2, timeout: 3 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** The exit code an error maps to. */
export function exitCodeForError(e: unknown): ExitCode {
  if (isDshError(e)) {
    if (e.details?.["usage"] === true) return EXIT.usage;
    if (e.code === "TIMEOUT") return EXIT.timeout;
  }
  return EXIT.failed;
}

const FAILED: ReadonlySet<AgentStatus> = new Set(["failed", "gone", "interrupted"]);

/** A settled task's status as an exit code: a failed, gone or interrupted task is a failure. */
export function exitCodeForStatus(status: AgentStatus): ExitCode {
  return FAILED.has(status) ? EXIT.failed : EXIT.ok;
}
