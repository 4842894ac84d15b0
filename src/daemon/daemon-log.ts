// daemon.log: pino JSON lines, secrets censored, written best effort with a size cap. Split from daemon.ts.
import { closeSync, fstatSync, openSync, renameSync, writeSync } from "node:fs";
import { pino } from "pino";
import type { AgentResult } from "../core/types.js";
import { redactSecrets } from "../core/redact.js";
import type { Logger } from "./server/server.js";

/** Log fields whose values are secrets (child env, task tokens, keys). */
const SECRET_KEYS = ["env", "token", "apiKey", "authorization", "secret"];

/**
 * daemon.log, best effort. pino's sync destination throws a write error (ENOSPC on a full disk) out of log.info into
 * whatever was logging, which crashed the daemon mid-stop or in a rejection handler; a lost log line is the lesser harm.
 */
function logDestination(path: string, maxBytes = logCap()): { write(line: string): void; close(): void } {
  let fd = openSync(path, "a", 0o600);
  let size = sizeOf(fd);
  let open = true;
  let rotatable = true;
  const rotate = () => {
    closeSync(fd);
    try {
      renameSync(path, `${path}.1`);
    } catch {
      rotatable = false; // cannot rename (read-only home): keep appending to the same file
    }
    try {
      fd = openSync(path, "a", 0o600);
      size = sizeOf(fd);
    } catch {
      open = false; // no log from here on; the daemon keeps serving
    }
  };
  return {
    write(line) {
      if (!open) return; // never write to a closed fd: its number may belong to another file by now
      try {
        // Size cap: past maxBytes the log moves to daemon.log.1 (replacing the previous one) and starts afresh,
        // so the log never takes more than twice the cap of the home.
        if (rotatable && size > 0 && size + Buffer.byteLength(line) > maxBytes) rotate();
        if (open) size += writeSync(fd, line);
      } catch {
        // dropped: the disk is full or read-only; the daemon keeps serving
      }
    },
    close() {
      if (open) closeSync(fd);
      open = false;
    },
  };
}

/** daemon.log's size cap: DSH_HERDR_LOG_MAX_BYTES, else 10 MiB. */
function logCap(): number {
  const v = Number(process.env.DSH_HERDR_LOG_MAX_BYTES);
  return Number.isSafeInteger(v) && v >= 4096 ? v : 10 * 1024 * 1024;
}

function sizeOf(fd: number): number {
  try {
    return fstatSync(fd).size;
  } catch {
    return 0;
  }
}

/** The daemon's logger on daemon.log, and its destination (closed at stop). */
export function openDaemonLog(path: string, level: string): { log: Logger; dest: { close(): void } } {
  const dest = logDestination(path);
  const log: Logger = pino(
    {
      level,
      base: { pid: process.pid },
      // Nothing logs env values or tokens today; if a future line does (at any level), they are censored, not written.
      redact: {
        paths: [...SECRET_KEYS, ...SECRET_KEYS.map((k) => `*.${k}`), ...SECRET_KEYS.map((k) => `*.*.${k}`)],
        censor: "[redacted]",
      },
      // And in any text a line carries (an error quoting a command line): NAME=value with a secret-looking name.
      hooks: { streamWrite: (line: string) => redactSecrets(line) },
    },
    dest,
  );
  return { log, dest };
}

/** What logTaskFailures needs of the supervisor: its status listeners and each task's record. */
export interface FailureSource {
  onStatus(
    fn: (
      live: { rec: { taskId: string; name: string; cycle: number } },
      result: AgentResult,
      info: { settled: boolean; recovered?: true },
    ) => void,
  ): () => void;
}

/**
 * One error line per failed task cycle (taskId, agent, cycle, code, message), whatever failed it: a launch, a prompt
 * pi did not run, a stalled or gone child, git. Every failure settles its cycle, and each cycle has exactly one
 * settled harvest (the machine's invariant), so the settled status is the one place that sees each failure once; a
 * cycle re-announced at start-up (recovered) was logged by the daemon that settled it.
 */
export function logTaskFailures(source: FailureSource, log: Logger): () => void {
  return source.onStatus((live, result, info) => {
    if (result.status !== "failed" || !info.settled || info.recovered) return;
    const { taskId, name, cycle } = live.rec;
    log.error(
      {
        taskId,
        agent: name,
        cycle,
        code: result.error?.code ?? "AGENT_ERROR",
        message: result.error?.message ?? result.summary,
      },
      "task failed",
    );
  });
}
