// A worktree setup its daemon could not end: the daemon died during it (SIGKILL, OOM, a crash), and the setup, in a
// process group of its own, ran on. The next daemon ends what is left of it before it drops the worktree and starts
// the task again: the processes of the journaled group whose environment names this task (the setup's
// DSH_HERDR_TASK_ID), so a pid the system gave to something else since is never touched. Linux /proc only; where
// there is no /proc nothing is found (best-effort, as the docs say).
import { readFileSync, readdirSync } from "node:fs";
import { readProcStat } from "../../runtime/proc.js";
import type { Runner, TaskPorts } from "../task/runner-types.js";

/** Pids of the running (not zombie) processes in group `pgid` whose environment carries DSH_HERDR_TASK_ID=taskId. */
export function setupProcesses(pgid: number, taskId: string): number[] {
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return [];
  }
  const mark = `DSH_HERDR_TASK_ID=${taskId}`;
  const out: number[] = [];
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const st = readProcStat(Number(name));
    if (st === null || st.pgid !== pgid || st.state === "Z" || st.state === "X") continue;
    try {
      if (!readFileSync(`/proc/${name}/environ`, "utf8").split("\0").includes(mark)) continue;
      out.push(Number(name));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return out;
}

/** End (SIGKILL: the worktree it works in is dropped next) what is left of the task's setup; journaled when any. */
export async function endOrphanedSetup(
  live: Pick<Runner, "rec" | "journal"> & { readonly ports: Pick<TaskPorts, "log"> },
  pgid: number,
): Promise<void> {
  const pids = setupProcesses(pgid, live.rec.taskId);
  if (pids.length === 0) return;
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // ended meanwhile
    }
  }
  live.ports.log.warn({ taskId: live.rec.taskId, pgid, pids }, "ended a worktree setup its daemon died during");
  await live.journal({ type: "setup_ended", pgid, pids, why: "left running by a daemon that died during it" });
}
