// Ending a child's process and knowing it ended: a signal sent is not a process gone. The child's process group is
// signalled (pi's own tool processes go with it), SIGTERM first, SIGKILL after a grace; done once /proc says the
// process is gone or a zombie (nobody may reap a detached one: PID 1 here does not).
import { setTimeout as sleep } from "node:timers/promises";
import { procAvailable, readProcStat } from "./proc.js";

/** The process has ended: no /proc entry, or a zombie; without /proc, kill(pid, 0) fails. */
export function processGone(pid: number): boolean {
  const st = readProcStat(pid);
  if (st !== null) return st.state === "Z" || st.state === "X";
  if (procAvailable()) return true;
  try {
    process.kill(pid, 0);
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code !== "EPERM";
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  // The group only when pid leads it (a tmux pane's process does); else the process alone.
  const group = readProcStat(pid)?.pgid === pid;
  try {
    process.kill(group ? -pid : pid, sig);
  } catch {
    /* gone meanwhile */
  }
}

async function goneWithin(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (processGone(pid)) return true;
    if (Date.now() >= deadline) return false;
    await sleep(50);
  }
}

/** Ends `pid` (and its group): true once it is gone, false if it outlived SIGKILL's wait too. */
export async function endProcess(pid: number, graceMs = 3000, killWaitMs = 2000): Promise<boolean> {
  if (!Number.isSafeInteger(pid) || pid <= 1 || processGone(pid)) return true;
  signal(pid, "SIGTERM");
  if (await goneWithin(pid, graceMs)) return true;
  signal(pid, "SIGKILL");
  return goneWithin(pid, killWaitMs);
}
