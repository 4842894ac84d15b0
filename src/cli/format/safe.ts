// Text from a child or a remote (a summary, a report, a brief, an agent name, an error) on its way to a terminal or a
// pipe: every control character is shown escaped (ESC as `\x1b`), so no OSC (title, clipboard write), CSI (clear
// the screen, move the cursor) or C1 sequence a child wrote reaches the user's terminal. The CLI's own colours and
// cursor moves are added after this, around already neutralised text. `--json` output is never passed through here:
// JSON.stringify escapes control characters itself and the values stay exact.
import type { AgentResult } from "../../core/types.js";

/** C0 (but tab and newline), DEL and C1. */
const CONTROLS_BUT_LAYOUT = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;
/** C0, DEL and C1, tab and newline included. */
const CONTROLS = /[\u0000-\u001f\u007f-\u009f]/g;

const NAMED: Record<string, string> = { "\n": "\\n", "\t": "\\t", "\r": "\\r" };
const shown = (c: string): string => NAMED[c] ?? `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`;

/** Multi-line text (a report, a final message, an error): newlines and tabs kept, every other control escaped. */
export function safeText(s: string): string {
  return s.replace(CONTROLS_BUT_LAYOUT, shown);
}

/** One-line text (a name, a summary, a table cell): every control escaped, newlines and tabs too. */
export function safeLine(s: string): string {
  return s.replace(CONTROLS, shown);
}

/** Fields of an AgentResult whose text is multi-line by nature (reports, messages, warnings, a diff stat). */
const MULTI_LINE = new Set(["text", "finalMessage", "message", "warnings", "stat"]);

function neutralise(v: unknown, multiLine: boolean): unknown {
  if (typeof v === "string") return multiLine ? safeText(v) : safeLine(v);
  if (Array.isArray(v)) return v.map((x) => neutralise(x, multiLine));
  if (v !== null && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[safeLine(k)] = neutralise(x, MULTI_LINE.has(k));
    return out;
  }
  return v;
}

/** A copy of `r` (or of a task row) with every string neutralised for a terminal: for the card, the table, watch. */
export function neutraliseResult<T extends AgentResult>(r: T): T {
  return neutralise(r, false) as T;
}
