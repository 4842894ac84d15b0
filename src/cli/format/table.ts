// The task table of `list` and `watch`: id, agent, role, status, age, runtime, cwd.
import { formatUsd } from "../../core/budget.js";
import type { AgentResult } from "../../core/types.js";
import { painter, statusStyle } from "./color.js";
import { neutraliseResult } from "./safe.js";
import { columns, formatAge, shortenHome, textWidth, truncate } from "./text.js";

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

/**
 * The status as the table shows it: a completed task whose work was landed reads `landed` (display only: the
 * AgentResult's status stays `completed`); another status with a landing reads `failed·landed`.
 */
export function statusCell(t: TaskRow): string {
  if (t.landing?.landedAs === undefined) return t.status;
  return t.status === "completed" ? "landed" : `${t.status}·landed`;
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
    t.external ? `${t.status} (external)` : `${statusCell(t)}${checkMark(t)}`,
    formatAge(t.timing.createdAt, now),
    t.agent.runtime ?? "-",
    truncate((t.brief ?? "").replace(/\s+/g, " ").trim(), BRIEF_MAX) || "-",
    shortenHome(cwdOf(t), home),
  ];
  if (wide) cells.splice(6, 0, ...spendCells(t));
  return cells;
}

/** The brief's fair share of a narrow terminal, in columns (less when every brief is shorter). */
const BRIEF_FAIR = 20;
/** Columns left out, in this order, while the brief would get less than its fair share (CWD, last, is cut first). */
const DROPPABLE = ["RUNTIME", "ROLE", "AGE"] as const;

/**
 * The rows without the columns a narrow terminal cannot afford: the brief says what a task is, so it keeps a fair
 * share; RUNTIME, then ROLE (the agent's name starts with it), then AGE give way to it.
 */
function fitted(rows: string[][], width: number): string[][] {
  let out = rows;
  const need = (r: string[][]) => {
    const b = r[0]!.indexOf("BRIEF");
    const widths = r[0]!.map((_, c) => Math.max(...r.map((row) => textWidth(row[c] ?? ""))));
    const before = widths.slice(0, b).reduce((a, w) => a + w + 2, 0);
    const fair = Math.min(BRIEF_FAIR, Math.max(...r.slice(1).map((row) => textWidth(row[b] ?? ""))));
    return width - before >= fair;
  };
  for (const name of DROPPABLE) {
    if (out.length < 2 || need(out)) break;
    const c = out[0]!.indexOf(name);
    out = out.map((row) => row.filter((_, i) => i !== c));
  }
  return out;
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
  const rows = fitted(
    [[...(wide ? WIDE_HEADER : TABLE_HEADER)], ...tasks.map((t) => rowCells(t, now, home, wide))],
    width,
  );
  const statusCol = rows[0]!.indexOf("STATUS");
  const paint = painter(color);
  return columns(rows, {
    width,
    style: (r, c, cell) => {
      if (r === 0) return paint("bold", cell);
      // A failed check paints the status red: it is what the person must see first.
      const st = c === statusCol ? (cell.includes("✗check") ? "red" : statusStyle(cell)) : undefined;
      return st ? paint(st, cell) : cell;
    },
  });
}

/**
 * What a blocked task waits for, as one line under the table: its summary holds the child's question (the first line
 * of its crew_report's needs) or the spend cap's words. Undefined for a task that is not blocked.
 */
export function questionLine(row: TaskRow, width: number): string | undefined {
  if (row.status !== "blocked") return undefined;
  const t = neutraliseResult(row);
  return truncate(`${t.taskId} needs: ${t.summary.replace(/\s+/g, " ").trim()}`, width);
}
