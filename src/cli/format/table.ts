// The task table of `list` and `watch`: id, agent, role, status, age, runtime, cwd.
import { formatUsd } from "../../core/budget.js";
import type { AgentResult } from "../../core/types.js";
import { painter, statusStyle } from "./color.js";
import { neutraliseResult } from "./safe.js";
import { columns, formatAge, shortenHome, truncate } from "./text.js";

/** What the table needs from a task: an AgentResult (which carries cwd), and whether it is an external record. */
export type TaskRow = AgentResult & { external?: boolean };

export const TABLE_HEADER = ["ID", "AGENT", "ROLE", "STATUS", "AGE", "RUNTIME", "BRIEF", "CWD"] as const;
/** `list --wide`: the spend columns go after STATUS's neighbours, before BRIEF and CWD (which are cut first). */
export const WIDE_HEADER = [
  "ID",
  "AGENT",
  "ROLE",
  "STATUS",
  "AGE",
  "RUNTIME",
  "COST",
  "TOKENS",
  "BRIEF",
  "CWD",
] as const;

const STATUS_COL = TABLE_HEADER.indexOf("STATUS");

/** Terminal columns a brief may take in the table (briefs can be 200 characters). */
const BRIEF_MAX = 32;

export function cwdOf(t: TaskRow): string {
  return t.worktree?.path ?? t.cwd ?? "-";
}

/** COST and TOKENS (output, and input with the cache) of `list --wide`; `-` for a result without them. */
export function spendCells(t: TaskRow): [string, string] {
  const u = t.usage;
  if (!u) return ["-", "-"];
  const input = (u.inputTokens ?? 0) + (u.cacheReadTokens ?? 0) + (u.cacheWriteTokens ?? 0);
  return [
    u.cost !== undefined ? formatUsd(u.cost) : "-",
    u.inputTokens !== undefined ? `${input} in / ${u.outputTokens} out` : `${u.outputTokens} out`,
  ];
}

/** After the status: ` ✗check` when a check failed or was cut off, ` ✓check` when every one passed. */
function checkMark(t: TaskRow): string {
  return t.verified === false ? " ✗check" : t.verified === true ? " ✓check" : "";
}

export function rowCells(row: TaskRow, now: number, home?: string, wide = false): string[] {
  const t = neutraliseResult(row); // a child's or a remote's strings, escaped (safe.ts)
  const cells = [
    t.taskId,
    t.agent.name,
    t.role,
    t.external ? `${t.status} (external)` : `${t.status}${checkMark(t)}`,
    formatAge(t.timing.createdAt, now),
    t.agent.runtime ?? "-",
    truncate((t.brief ?? "").replace(/\s+/g, " ").trim(), BRIEF_MAX) || "-",
    shortenHome(cwdOf(t), home),
  ];
  if (wide) cells.splice(6, 0, ...spendCells(t));
  return cells;
}

/** Table lines (header first), each cut to `width` columns so a terminal never wraps them. */
export function renderTable(
  tasks: readonly TaskRow[],
  now: number,
  width = 200,
  home?: string,
  color = false,
  wide = false,
): string[] {
  const rows = [[...(wide ? WIDE_HEADER : TABLE_HEADER)], ...tasks.map((t) => rowCells(t, now, home, wide))];
  const paint = painter(color);
  return columns(rows, {
    width,
    style: (r, c, cell) => {
      if (r === 0) return paint("bold", cell);
      // A failed check paints the status red: it is what the person must see first.
      const st = c === STATUS_COL ? (cell.includes("✗check") ? "red" : statusStyle(cell)) : undefined;
      return st ? paint(st, cell) : cell;
    },
  });
}
