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

export const statusIdOf = (m: ContextMessage): string | undefined => {
  if (m.role !== "custom" || (m.customType !== "crew_status" && m.customType !== "crew_reminder")) return undefined;
  const d = m.details as { statusId?: unknown } | undefined;
  return typeof d?.statusId === "string" ? d.statusId : undefined;
};

/**
 * Put persisted status messages that a model request lacks back at their recorded positions (by timestamp), without
 * replacing, removing or reordering anything already there. `persisted` is the compaction-aware session context,
 * so compacted-away messages are never replayed. Returns the same array when nothing is missing.
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
    const at = m.timestamp ?? Number.MAX_SAFE_INTEGER;
    let i = out.findIndex((x) => (x.timestamp ?? -1) > at);
    if (i < 0) i = out.length;
    out.splice(i, 0, m);
  }
  return out;
}
