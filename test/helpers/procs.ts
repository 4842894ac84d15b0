// Processes still working for a home: any process whose cwd is inside it (headless wrappers sit in the task dir,
// pi children in the worktree), so a test can assert none outlive the close and kill leftovers it started.
import { readdirSync, readlinkSync } from "node:fs";

export function processesUnder(home: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    let cwd: string;
    try {
      cwd = readlinkSync(`/proc/${name}/cwd`);
    } catch {
      continue; // gone meanwhile
    }
    if (cwd === home || cwd.startsWith(home + "/")) out.push(Number(name));
  }
  return out;
}

/** Kill what a failed test left behind (only processes inside its own temp home). */
export function killUnder(home: string): void {
  for (const pid of processesUnder(home)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      /* already gone */
    }
  }
}
