// The task table of `list` and `watch`: id, agent, role, status, age, runtime, cwd.
import type { AgentResult } from "../../core/types.js";
import { columns, formatAge, shortenHome, truncate } from "./text.js";

/** What the table needs from a task: an AgentResult (which carries cwd), and whether it is an external record. */
export type TaskRow = AgentResult & { external?: boolean };

export const TABLE_HEADER = ["ID", "AGENT", "ROLE", "STATUS", "AGE", "RUNTIME", "CWD"] as const;

export function cwdOf(t: TaskRow): string {
  return t.worktree?.path ?? t.cwd ?? "-";
}

export function rowCells(t: TaskRow, now: number, home?: string): string[] {
  return [
    t.taskId,
    t.agent.name,
    t.role,
    t.external ? `${t.status} (external)` : t.status,
    formatAge(t.timing.createdAt, now),
    t.agent.runtime ?? "-",
    shortenHome(cwdOf(t), home),
  ];
}

/** Table lines (header first), each cut to `width` columns so a terminal never wraps them. */
export function renderTable(tasks: readonly TaskRow[], now: number, width = 200, home?: string): string[] {
  const rows = [[...TABLE_HEADER], ...tasks.map((t) => rowCells(t, now, home))];
  return columns(rows).map((l) => truncate(l, width));
}
