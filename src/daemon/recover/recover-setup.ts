// A worktree setup its daemon could not end: the daemon died during it (SIGKILL, OOM, a crash), and the setup, in a
// process group of its own, ran on. The next daemon ends what is left of it before it drops the worktree and starts
// the task again: the processes whose environment carries this task's setup marks (DSH_HERDR_TASK_ID and
// DSH_HERDR_WORKTREE), in the journaled group, or in any group when the daemon died before recording it; a pid the
// system gave to something else since is never touched. Linux /proc only; where there is no /proc nothing is found
// (best-effort, as the docs say).
import { readFileSync, readdirSync } from "node:fs";
import { readProcStat } from "../../runtime/proc.js";
import type { TaskPort } from "../task/runner-types.js";

/**
 * Pids of the running (not zombie) processes whose environment carries DSH_HERDR_TASK_ID=taskId and the setup's own
 * DSH_HERDR_WORKTREE mark, in group `pgid` when the setup's start was journaled, else in any group (the daemon died
 * between the setup's spawn and that record). Only a setup carries both marks: the task's child has no worktree mark.
 */
export function setupProcesses(taskId: string, pgid?: number): { pid: number; pgid: number }[] {
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return [];
  }
  const mark = `DSH_HERDR_TASK_ID=${taskId}`;
  const out: { pid: number; pgid: number }[] = [];
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const st = readProcStat(Number(name));
    if (st === null || st.state === "Z" || st.state === "X") continue;
    if (pgid !== undefined && st.pgid !== pgid) continue;
    try {
      const env = readFileSync(`/proc/${name}/environ`, "utf8").split("\0");
      if (!env.includes(mark) || !env.some((e) => e.startsWith("DSH_HERDR_WORKTREE="))) continue;
      out.push({ pid: Number(name), pgid: st.pgid });
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return out;
}

/**
 * End (SIGKILL: the worktree it works in is dropped next) what is left of the task's setup; journaled when any.
 * `pgid`: the setup's group as journaled; undefined when no record names it (then found by its marks alone).
 */
export async function endOrphanedSetup(
  live: TaskPort<"rec" | "journal", "log">,
  pgid: number | undefined,
): Promise<void> {
  const found = setupProcesses(live.rec.taskId, pgid);
  if (found.length === 0) return;
  const pids = found.map((p) => p.pid);
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // ended meanwhile
    }
  }
  const group = pgid ?? found[0]!.pgid;
  const why =
    pgid === undefined
      ? "left running by a daemon that died as it started it (before recording its group)"
      : "left running by a daemon that died during it";
  live.ports.log.warn({ taskId: live.rec.taskId, pgid: group, pids }, "ended a worktree setup its daemon died during");
  await live.journal({ type: "setup_ended", pgid: group, pids, why });
}
