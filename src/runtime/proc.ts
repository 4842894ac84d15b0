// Process identity for headless children: a pid alone can be reused after the child dies, so liveness also
// compares the start time recorded at launch (/proc/<pid>/stat field 22, clock ticks since boot).
import { readFileSync } from "node:fs";

export interface ProcStat {
  /** R, S, D, Z, T, ... */
  state: string;
  startTime: number;
  pgid: number;
}

/** /proc/<pid>/stat, or null when the process does not exist or /proc is not available. */
export function readProcStat(pid: number): ProcStat | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return null;
  }
  // The command name (field 2) may contain spaces and parentheses: parse after the last ")".
  const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
  const state = rest[0];
  const pgid = Number(rest[2]);
  const startTime = Number(rest[19]);
  if (state === undefined || !Number.isFinite(startTime)) return null;
  return { state, startTime, pgid };
}

export function procAvailable(): boolean {
  return readProcStat(process.pid) !== null;
}

/** True when `pid` runs and (when known) is the same process that had `startTime` at launch. */
export function isOurProcess(pid: number, startTime: number | undefined): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  const st = readProcStat(pid);
  if (st === null) return !procAvailable(); // no /proc (not Linux): kill(0) is all we have
  if (st.state === "Z" || st.state === "X") return false; // exited, not yet reaped
  return startTime === undefined || st.startTime === startTime;
}
