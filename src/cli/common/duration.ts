// Durations as a person types them: `90s`, `5m`, `1h`, `1h30m`, `250ms`, or plain milliseconds from 1000 up. A bare
// number below 1000 is refused: `--timeout 5` meant seconds or minutes far more often than 5 ms.
import { DshError } from "../../core/errors.js";

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy;

/** Parse a duration into milliseconds; throws BAD_PARAMS (a usage error) naming accepted forms. */
export function parseDuration(text: string, flag = "duration"): number {
  const s = text.trim().toLowerCase();
  if (/^\d+$/.test(s)) {
    const n = Number(s);
    if (n >= 1000) return n;
    throw new DshError(
      "BAD_PARAMS",
      `${flag}: "${text}" has no unit, and a bare number is milliseconds; write ${n}s, ${n}m or ${n}ms.`,
      { usage: true },
    );
  }
  let total = 0;
  let end = 0;
  PART.lastIndex = 0;
  for (let m = PART.exec(s); m !== null; m = PART.exec(s)) {
    total += Number(m[1]) * (UNIT_MS[m[2] ?? ""] ?? 0);
    end = PART.lastIndex;
  }
  if (s.length === 0 || end !== s.length) {
    throw new DshError(
      "BAD_PARAMS",
      `${flag}: "${text}" is not a duration. Use forms like 90s, 5m, 1h, 1h30m or 500ms.`,
      { usage: true },
    );
  }
  return Math.round(total);
}

/** Short human form of a duration: 850ms, 12s, 4m05s, 2h03m. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "-";
  if (ms < 1_000) return `${Math.round(ms)}ms`;
  const sec = Math.floor(ms / 1_000);
  if (sec < 60) return `${sec}s`;
  const min = Math.floor(sec / 60);
  if (min < 60) return `${min}m${String(sec % 60).padStart(2, "0")}s`;
  const h = Math.floor(min / 60);
  if (h < 48) return `${h}h${String(min % 60).padStart(2, "0")}m`;
  return `${Math.floor(h / 24)}d`;
}
