// Owner Status Context (pi-crew Result Protocol): when to append a compact crew_status snapshot or a
// crew_reminder, and how to put back persisted ones a model request lacks. Pure: the extension feeds it the open
// sessions, the model calls and the safe boundaries, and appends what it returns.
import { awaitsOwner, type CrewStatus } from "./crew-delivery.js";

export interface OpenSession {
  subagent_id: string;
  status: CrewStatus;
}

export type StatusMessageType = "crew_status" | "crew_reminder";

export interface StatusMessage {
  customType: StatusMessageType;
  /** Model-bound JSON. */
  content: string;
  /** Never model-bound: the id that makes re-insertion idempotent. */
  details: { statusId: string };
}

/** Model calls since the last snapshot or reminder before a reminder is due (an initial policy, not an optimum). */
export const REMINDER_INTERVAL = 10;

const keyOf = (open: OpenSession[]) => JSON.stringify(open);

export class StatusContext {
  private open: OpenSession[] = [];
  /** What the newest appended snapshot said; undefined = none in context (never, or compacted away). */
  private lastSnapshot: string | undefined;
  private hadOpenWork = false;
  private callsSince = 0;
  private seq = 0;

  /** `idPrefix` keeps ids unique across owner sessions and restarts (e.g. the session id plus a start time). */
  constructor(private readonly idPrefix: string) {}

  /** The owner's open sessions as of now (order-insensitive). */
  setOpen(sessions: OpenSession[]): void {
    this.open = [...sessions].sort((a, b) => a.subagent_id.localeCompare(b.subagent_id));
    if (this.open.length > 0) this.hadOpenWork = true;
  }

  get openSessions(): readonly OpenSession[] {
    return this.open;
  }

  /** One owner model call happened. */
  modelCall(): void {
    this.callsSince += 1;
  }

  /** Compaction dropped the snapshot from the context: the next boundary appends a fresh one while work is open. */
  snapshotLost(): void {
    this.lastSnapshot = undefined;
  }

  /** Restore from persisted messages (after /reload or /resume): the newest snapshot's content. */
  restore(lastSnapshotContent: string | undefined, hadOpenWork: boolean): void {
    this.lastSnapshot = lastSnapshotContent;
    this.hadOpenWork = this.hadOpenWork || hadOpenWork;
  }

  /**
   * At a safe boundary (before an owner run, or at the end of a turn after its tool results): the message to
   * append, if any. A changed state wins over a due reminder; either resets the model-call counter.
   */
  atBoundary(): StatusMessage | null {
    const content = JSON.stringify({ crew_status: this.open });
    const changed = this.lastSnapshot === undefined ? this.open.length > 0 : this.lastSnapshot !== content;
    // A session that never had open work gets nothing; the last close yields one empty list (a changed state).
    if (this.hadOpenWork && changed) {
      this.lastSnapshot = content;
      this.callsSince = 0;
      return this.message("crew_status", content);
    }
    const waiting = this.open.filter((s) => awaitsOwner(s.status));
    if (this.callsSince >= REMINDER_INTERVAL && waiting.length > 0) {
      this.callsSince = 0;
      return this.message("crew_reminder", JSON.stringify({ crew_reminder: waiting }));
    }
    return null;
  }

  private message(customType: StatusMessageType, content: string): StatusMessage {
    this.seq += 1;
    return { customType, content, details: { statusId: `${this.idPrefix}-${this.seq}` } };
  }

  /** For tests and logs: the state key of the open set. */
  static key(open: OpenSession[]): string {
    return keyOf(open);
  }
}

/** The minimal message shape the repair looks at (pi's AgentMessage has more). */
export interface ContextMessage {
  role: string;
  timestamp?: number;
  customType?: string;
  details?: unknown;
}

/** The message a status message followed in the request it first went out with: where it stays. */
export interface StatusAnchor {
  role: string;
  timestamp: number;
}

export const statusIdOf = (m: ContextMessage): string | undefined => {
  if (m.role !== "custom" || (m.customType !== "crew_status" && m.customType !== "crew_reminder")) return undefined;
  const d = m.details as { statusId?: unknown } | undefined;
  return typeof d?.statusId === "string" ? d.statusId : undefined;
};

const anchorOf = (m: ContextMessage): StatusAnchor | undefined => {
  const a = (m.details as { after?: { role?: unknown; timestamp?: unknown } } | undefined)?.after;
  return typeof a?.role === "string" && typeof a.timestamp === "number"
    ? { role: a.role, timestamp: a.timestamp }
    : undefined;
};

/** The anchor of a status message appended after `messages` (their last one), if it has a time. */
export function anchorAfter(messages: readonly ContextMessage[]): StatusAnchor | undefined {
  const last = messages.at(-1);
  return last && typeof last.timestamp === "number" ? { role: last.role, timestamp: last.timestamp } : undefined;
}

/**
 * Append a status message at the end of a model request's messages (it rides with a request that happens anyway),
 * recording the message it follows so later requests keep it right there.
 */
export function appendStatus<M extends ContextMessage>(messages: M[], status: StatusMessage, timestamp: number): M[] {
  const after = anchorAfter(messages);
  const m = {
    role: "custom",
    customType: status.customType,
    content: status.content,
    display: false,
    details: { ...status.details, ...(after ? { after } : {}) },
    timestamp,
  } as unknown as M;
  return [...messages, m];
}

/**
 * Put persisted status messages that a model request lacks back at their recorded positions, without replacing,
 * removing or reordering anything already there: right after the message each followed when it first went out
 * (`details.after`, its role and time), else (no anchor, or the anchor is gone) by timestamp. `persisted` is the
 * compaction-aware session context, so compacted-away messages are never replayed. Returns the same array when
 * nothing is missing.
 */
export function insertMissingStatus<M extends ContextMessage>(messages: M[], persisted: M[]): M[] {
  const present = new Set(messages.map(statusIdOf).filter((x): x is string => x !== undefined));
  const missing = persisted.filter((m) => {
    const id = statusIdOf(m);
    return id !== undefined && !present.has(id);
  });
  if (missing.length === 0) return messages;
  const out = [...messages];
  for (const m of missing) {
    const anchor = anchorOf(m);
    let i = -1;
    if (anchor) {
      const at = out.findLastIndex(
        (x) => statusIdOf(x) === undefined && x.role === anchor.role && x.timestamp === anchor.timestamp,
      );
      if (at >= 0) {
        i = at + 1;
        while (i < out.length && statusIdOf(out[i]!) !== undefined) i++; // after earlier status messages there
      }
    }
    if (i < 0) {
      const at = m.timestamp ?? Number.MAX_SAFE_INTEGER;
      i = out.findIndex((x) => (x.timestamp ?? -1) > at);
      if (i < 0) i = out.length;
    }
    out.splice(i, 0, m);
  }
  return out;
}
