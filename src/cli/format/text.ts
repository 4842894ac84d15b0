// Small text helpers shared by the card, the table and watch.
import { createRequire } from "node:module";
import { homedir } from "node:os";

/** Replace the home directory prefix with ~ so paths fit on one line. */
export function shortenHome(p: string, home = homedir()): string {
  if (home.length > 1 && (p === home || p.startsWith(home + "/"))) return "~" + p.slice(home.length);
  return p;
}

/**
 * Characters that each take one column alone and in any sequence: printable ASCII and Latin-1 (no soft hyphen), and
 * the few symbols our own tables and cards print. A string of these is measured by its length.
 */
const ONE_COLUMN_EACH = /^[\x20-\x7e\u00a0-\u00ac\u00ae-\u00ff…·‹›←↑→↓✓✗─│•█–—‘’“”]*$/;

let wideMeasure: ((s: string) => number) | undefined;

/**
 * string-width, loaded the first time a string needs it: building its emoji tables costs about 50 ms of CPU, which
 * `list` and `show` of plain text should not pay (the CLI start-up target is 2x a bare `node -e 0`).
 */
function stringWidth(s: string): number {
  if (ONE_COLUMN_EACH.test(s)) return s.length;
  wideMeasure ??= loadStringWidth();
  return wideMeasure(s);
}

function loadStringWidth(): (s: string) => number {
  try {
    // string-width is an ES module: require() loads one on Node ≥ 20.19 and ≥ 22.12.
    return (createRequire(import.meta.url)("string-width") as { default: (s: string) => number }).default;
  } catch {
    return roughWidth; // an older Node: wide characters approximated
  }
}

/** Columns without string-width's tables: escape codes and combining marks none, East Asian wide and emoji two. */
export function roughWidth(s: string): number {
  let w = 0;
  for (const ch of s.replace(ANSI, "")) {
    const c = ch.codePointAt(0) ?? 0;
    if (c < 0x20 || (c >= 0x7f && c < 0xa0) || c === 0xad || (c >= 0x300 && c < 0x370)) continue;
    if ((c >= 0x200b && c <= 0x200f) || (c >= 0xfe00 && c <= 0xfe0f)) continue;
    w += c > 0xffff || WIDE.some(([a, b]) => c >= a && c <= b) ? 2 : 1;
  }
  return w;
}

const ANSI = /\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/g;
const WIDE: readonly (readonly [number, number])[] = [
  [0x1100, 0x115f],
  [0x231a, 0x231b],
  [0x23e9, 0x23ec],
  [0x25fd, 0x25fe],
  [0x2614, 0x2615],
  [0x2705, 0x2705],
  [0x274c, 0x274c],
  [0x2e80, 0xa4cf],
  [0xac00, 0xd7a3],
  [0xf900, 0xfaff],
  [0xfe30, 0xfe4f],
  [0xff00, 0xff60],
  [0xffe0, 0xffe6],
];

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
