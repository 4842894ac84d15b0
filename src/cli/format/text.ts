// Small text helpers shared by the card, the table and watch.
import { homedir } from "node:os";

/** Replace the home directory prefix with ~ so paths fit on one line. */
export function shortenHome(p: string, home = homedir()): string {
  if (home.length > 1 && (p === home || p.startsWith(home + "/"))) return "~" + p.slice(home.length);
  return p;
}

/** Cut to `width` columns with an ellipsis. */
export function truncate(s: string, width: number): string {
  if (width <= 0) return "";
  if (s.length <= width) return s;
  return width === 1 ? "…" : s.slice(0, width - 1) + "…";
}

/** Render rows as left-aligned columns separated by two spaces; the last column is not padded. */
export function columns(rows: readonly (readonly string[])[]): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows.map((row) =>
    row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join("  ").trimEnd(),
  );
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
