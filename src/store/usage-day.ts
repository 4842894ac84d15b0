// The calendar day a spend counts on: the machine's local day (what "per day" means to the person who set
// budget.perDay), and when it ends. Used by `dsh-herdr usage` and by the daemon's budget.perDay check.

/** `2026-12-01`: the local calendar day of an epoch ms. */
export function localDay(ms: number): string {
  const d = new Date(ms);
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, "0")}-${String(d.getDate()).padStart(2, "0")}`;
}

/** Epoch ms of the local midnight that starts the day of `ms`. */
export function startOfLocalDay(ms: number): number {
  const d = new Date(ms);
  return new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
}

/** Epoch ms of the next local midnight after `ms`: when that day's budget resets. */
export function nextLocalMidnight(ms: number): number {
  const d = new Date(ms);
  return new Date(d.getFullYear(), d.getMonth(), d.getDate() + 1).getTime();
}

/** `2026-12-02 00:00 (local, +01:00)`: a reset time as a person reads it, with the offset it is in. */
export function formatLocalTime(ms: number): string {
  const d = new Date(ms);
  const off = -d.getTimezoneOffset();
  const sign = off >= 0 ? "+" : "-";
  const hh = String(Math.floor(Math.abs(off) / 60)).padStart(2, "0");
  const mm = String(Math.abs(off) % 60).padStart(2, "0");
  const time = `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
  return `${localDay(ms)} ${time} (local, UTC${sign}${hh}:${mm})`;
}
