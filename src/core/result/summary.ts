// Summary precedence and honest warnings for an AgentResult.
import type { AgentStatus, ResultMeta, Role } from "../types.js";

export const SUMMARY_MAX_CHARS = 200;

const STATUS_SENTENCES: Record<AgentStatus, string> = {
  starting: "The child is starting.",
  working: "The child is working.",
  running: "The child is working.",
  blocked: "The child is blocked and needs an answer.",
  idle: "The agent is idle.",
  completed: "The child finished without a summary.",
  failed: "The child failed; inspect the session.",
  gone: "The child's pane or process is gone.",
  closed: "The task was closed.",
  interrupted: "The task was interrupted.",
};

/** One line of at most SUMMARY_MAX_CHARS (whitespace folded, an ellipsis where it was cut). */
export function capSummary(s: string): string {
  const flat = s.replace(/\s+/g, " ").trim();
  return flat.length <= SUMMARY_MAX_CHARS ? flat : flat.slice(0, SUMMARY_MAX_CHARS - 1).trimEnd() + "…";
}

/** A brief's length: a label in lists, cards and deliveries. */
export const BRIEF_MAX_CHARS = 80;

/** A brief made from a task's text (none was given): its first line, one line of at most BRIEF_MAX_CHARS. */
export function briefFrom(text: string | undefined): string | undefined {
  const line = firstLine(text)?.replace(/\s+/g, " ");
  if (line === undefined) return undefined;
  return line.length <= BRIEF_MAX_CHARS ? line : `${line.slice(0, BRIEF_MAX_CHARS - 1).trimEnd()}…`;
}

/** First line with text; markdown heading marks dropped so "## Done" reads "Done". */
export function firstLine(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  for (const line of text.split("\n")) {
    const t = line.replace(/^\s*#{1,6}\s+/, "").trim();
    if (t !== "" && !/^(-{3,}|`{3,}.*)$/.test(t)) return t;
  }
  return undefined;
}

export interface SummaryInput {
  meta?: ResultMeta;
  finalMessage?: string;
  body?: string;
  status: AgentStatus;
  /** No prompt of this task ever reached a child (a setup or launch that failed): there is no session to inspect. */
  unprompted?: boolean;
}

const FAILED_UNPROMPTED = "The task failed before a child took its prompt; its error says why.";

/** result.md summary → first line of the final message → first body line → a status sentence; one line, capped. */
export function pickSummary(input: SummaryInput): string {
  const fromMeta = input.meta?.summary?.trim();
  const pick = (fromMeta ? fromMeta : undefined) ?? firstLine(input.finalMessage) ?? firstLine(input.body);
  const sentence =
    input.status === "failed" && input.unprompted === true ? FAILED_UNPROMPTED : STATUS_SENTENCES[input.status];
  return capSummary(pick ?? sentence);
}

/** "fresh": changed after promptedAt; "stale": exists but did not; "absent": pi wrote no file (yet). */
export type SessionFreshness = "fresh" | "stale" | "absent";

export interface WarningInput {
  role: Role;
  session: SessionFreshness;
  hasArtifact: boolean;
  hasFinalMessage: boolean;
  /** Changed paths in the diff (tracked + untracked). */
  changedFiles?: string[];
  /** Porcelain lines dirty at spawn: those paths are not blamed on a reviewer. */
  dirtyAtStart?: string[];
  /** Of those, the paths whose content changed since spawn: they are blamed after all. */
  dirtyChanged?: string[];
  /** Harvest is final for this cycle: empty-harvest only makes sense then. */
  settled: boolean;
  /** No prompt reached a child: pi had nothing to write a session for. */
  unprompted?: boolean;
  /** Passed through in order after ours (malformed result.md, invalid session lines, ...). */
  extra?: string[];
}

/** The path of a porcelain line (` M a.ts`, `?? b.ts`, `R  old -> new`). */
export function porcelainPath(line: string): string {
  const p = line.length > 3 ? line.slice(3) : line.trim();
  const arrow = p.indexOf(" -> ");
  return (arrow >= 0 ? p.slice(arrow + 4) : p).replace(/^"|"$/g, "");
}

export function collectWarnings(w: WarningInput): string[] {
  const out: string[] = [];
  if (w.session === "stale")
    out.push("stale session: the session file did not change after the prompt; finalMessage omitted");
  if (w.session === "absent" && w.settled && w.unprompted !== true)
    out.push("no session file: pi wrote no assistant message for this task");
  if (w.settled && !w.hasArtifact && !w.hasFinalMessage)
    out.push("empty harvest: no result.md and no new final message");
  if (w.role === "reviewer") {
    const edited = new Set(w.dirtyChanged ?? []);
    const dirty = new Set((w.dirtyAtStart ?? []).map(porcelainPath).filter((p) => !edited.has(p)));
    // A new file is both in the diff and untracked: each name once.
    const changed = [...new Set(w.changedFiles ?? [])].filter((f) => !dirty.has(f));
    if (changed.length > 0) {
      const shown = changed.slice(0, 5).join(", ") + (changed.length > 5 ? `, +${changed.length - 5} more` : "");
      out.push(`reviewer changed files: ${shown}`);
    }
  }
  for (const e of w.extra ?? []) if (e.trim() !== "" && !out.includes(e)) out.push(e);
  return out;
}
