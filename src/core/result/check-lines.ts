// A check as every card shows it (the CLI's show / spawn --wait / watch, pi's TUI card): ✓ or ✗, its command and its
// duration, and for a failing one how it ended. Pure.
import type { CheckReceipt } from "../types.js";

/** A check as a card shows it: its command, whether it passed, how long it took, and how a failing one ended. */
export interface CardCheck {
  command: string;
  ok: boolean;
  durationMs: number;
  /** A failing check's ending: `exit 2`, `timed out`, `output over the cap`, `ended by SIGKILL`. */
  why?: string;
}

export function cardCheckOf(r: CheckReceipt): CardCheck {
  const ok = r.exitCode === 0 && r.cutOff === undefined;
  const why =
    r.cutOff === "timeout"
      ? "timed out"
      : r.cutOff === "output"
        ? "output over the cap"
        : r.exitCode === null
          ? `ended by ${r.signal ?? "a signal"}`
          : `exit ${r.exitCode}`;
  return { command: r.command, ok, durationMs: r.durationMs, ...(ok ? {} : { why }) };
}

/** 850ms, 1.2s, 1m05s: a check's duration, short. */
export function checkDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "-";
  if (ms < 1_000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)}s`;
  const s = Math.round(ms / 1_000);
  return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
}

/** `✓ npm test · 1.2s`, `✗ npm run lint · 0.3s · exit 2`. */
export function checkLine(c: CardCheck): string {
  return `${c.ok ? "✓" : "✗"} ${c.command} · ${checkDuration(c.durationMs)}${c.ok ? "" : ` · ${c.why ?? "failed"}`}`;
}

/** The line a card opens with when a check failed: `checks failed: npm run lint (exit 2)`; undefined when none did. */
export function failedChecksLine(checks: readonly CardCheck[] | undefined): string | undefined {
  const failed = (checks ?? []).filter((c) => !c.ok);
  if (failed.length === 0) return undefined;
  return `check${failed.length > 1 ? "s" : ""} failed: ${failed.map((c) => `${c.command} (${c.why ?? "failed"})`).join(", ")}`;
}
