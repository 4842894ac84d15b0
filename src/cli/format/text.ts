// Small text helpers shared by the card, the table and watch.
import { homedir } from "node:os";
import stringWidth from "string-width";

/** Replace the home directory prefix with ~ so paths fit on one line. */
export function shortenHome(p: string, home = homedir()): string {
  if (home.length > 1 && (p === home || p.startsWith(home + "/"))) return "~" + p.slice(home.length);
  return p;
}

/** Terminal columns a string takes: wide CJK and emoji count two, escape codes none. */
export function textWidth(s: string): number {
  return stringWidth(s);
}

/** Cut to `width` terminal columns with an ellipsis (wide characters are never split). */
export function truncate(s: string, width: number): string {
  if (width <= 0) return "";
  if (stringWidth(s) <= width) return s;
  if (width === 1) return "…";
  let out = "";
  let used = 0;
  for (const ch of s) {
    const w = stringWidth(ch);
    if (used + w > width - 1) break;
    out += ch;
    used += w;
  }
  return out + "…";
}

/**
 * Render rows as left-aligned columns separated by two spaces, measured in terminal columns; the last column is not
 * padded. With `width` each line is cut to it; `style` colours a cell after it is measured and cut.
 */
export function columns(
  rows: readonly (readonly string[])[],
  opts: { width?: number; style?: (row: number, col: number, cell: string) => string } = {},
): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, stringWidth(cell))));
  const max = opts.width ?? Number.POSITIVE_INFINITY;
  return rows.map((row, r) => {
    let line = "";
    let used = 0;
    for (let i = 0; i < row.length; i++) {
      const cell = row[i] ?? "";
      const pad = i === row.length - 1 ? 0 : Math.max(0, (widths[i] ?? 0) - stringWidth(cell));
      const sep = i === 0 ? "" : "  ";
      const room = max - used - sep.length;
      if (room <= 0) break;
      // A cell that does not fit is cut (and ends the line); padding past the width is dropped.
      const shown = stringWidth(cell) <= room ? cell : truncate(cell, room);
      line += sep + (opts.style && shown !== "" ? opts.style(r, i, shown) : shown);
      used += sep.length + stringWidth(shown);
      if (shown !== cell) break;
      const fill = Math.min(pad, max - used);
      line += " ".repeat(fill);
      used += fill;
    }
    return line.trimEnd();
  });
}

/** Age of a timestamp relative to now: 5s, 3m, 2h, 4d. */
export function formatAge(ts: number | undefined, now: number): string {
  if (ts === undefined || !Number.isFinite(ts)) return "-";
  const s = Math.max(0, Math.floor((now - ts) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}
