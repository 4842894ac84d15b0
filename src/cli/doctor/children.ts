// Live child processes per task, counted from /proc: every process a task's launch started carries the task's id and
// this home's socket in its environment (pi renames itself, so its argv says nothing). A closed task with any left is
// memory nobody uses: doctor names it.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { readIndex } from "../common/task-files.js";
import type { CheckResult } from "./types.js";

/** taskId → pids of its live (not zombie) processes, for the tasks of `home`; empty without /proc. */
export function childProcessesByTask(home: string): Map<string, number[]> {
  const out = new Map<string, number[]>();
  const socket = `DSH_HERDR_SOCKET=${join(home, "daemon.sock")}\0`;
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return out;
  }
  for (const name of names) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const env = readFileSync(`/proc/${name}/environ`, "utf8");
      if (!env.includes(socket)) continue;
      const id = /(?:^|\0)DSH_HERDR_TASK_ID=([^\0]+)/.exec(env)?.[1];
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      if (!id || stat.slice(stat.lastIndexOf(")") + 2)[0] === "Z") continue;
      out.set(id, [...(out.get(id) ?? []), Number(name)]);
    } catch {
      /* ended meanwhile, or another user's */
    }
  }
  return out;
}

export function checkChildren(home: string): CheckResult {
  const byTask = childProcessesByTask(home);
  const index = readIndex(home);
  const closed = [...byTask].filter(([id]) => index.get(id)?.status === "closed");
  const total = [...byTask.values()].reduce((n, p) => n + p.length, 0);
  if (closed.length > 0) {
    const pids = closed.flatMap(([, p]) => p);
    return {
      name: "children",
      level: "warn",
      detail: `${pids.length} process(es) of closed task(s) still run: ${closed.map(([id, p]) => `${id} (${p.length})`).join(", ")}`,
      fix: `end them: kill ${pids.join(" ")}`,
    };
  }
  return {
    name: "children",
    level: "ok",
    detail: `${total} child process(es) for ${byTask.size} task(s)${byTask.size ? `: ${[...byTask].map(([id, p]) => `${id} (${p.length})`).join(", ")}` : ""}`,
  };
}
