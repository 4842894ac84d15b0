// Owner Status Context wiring: feeds the pure StatusContext from the daemon and pi's events and puts snapshots and
// reminders into model requests that happen anyway (the `context` hook, awaited before every request): appended at
// the request's end, written to the session as hidden custom messages, never a turn of their own. pi does not wait
// for event handlers before its next request, so a message sent from turn_end could land after a final answer and
// make a model call of its own; the context hook cannot.
import type { ExtensionContext } from "@mariozechner/pi-coding-agent";
import {
  StatusContext,
  appendStatus,
  insertMissingStatus,
  statusIdOf,
  type ContextMessage,
  type StatusMessage,
} from "../core/crew/crew-status.js";
import { ABORT_TYPE } from "./owner-delivery.js";
import type { OwnerLink } from "./owner-link.js";
import { listOpenSessions } from "./owner-tools.js";

type Entry = Record<string, unknown>;
const STATUS_TYPES = new Set(["crew_status", "crew_reminder"]);

/**
 * What the model still sees, as pi's buildSessionContext does: after the last compaction, the entries it kept (from
 * its firstKeptEntryId up to the compaction entry) and those after it.
 */
function liveBranch(ctx: ExtensionContext): Entry[] {
  const branch = ctx.sessionManager.getBranch() as unknown as Entry[];
  const at = branch.findLastIndex((e) => e.type === "compaction");
  if (at < 0) return branch;
  const kept = branch.findIndex((e, i) => i < at && e.id === branch[at]!.firstKeptEntryId);
  return [...(kept >= 0 ? branch.slice(kept, at) : []), ...branch.slice(at + 1)];
}

function persistedStatus(entries: Entry[]): (ContextMessage & Entry)[] {
  return entries
    .filter((e) => e.type === "custom_message" && STATUS_TYPES.has(String(e.customType)))
    .map((e) => ({
      role: "custom",
      customType: String(e.customType),
      content: e.content,
      display: false,
      details: e.details,
      timestamp: typeof e.timestamp === "string" ? Date.parse(e.timestamp) : Number(e.timestamp),
    }));
}

/** The part of pi's SessionManager that writes a custom message entry (ctx.sessionManager is the real one). */
interface EntryWriter {
  appendCustomMessageEntry(customType: string, content: unknown, display: boolean, details: unknown): string;
}

type Sent = ContextMessage & { content: string; details: Record<string, unknown> };

export class OwnerStatus {
  private status = new StatusContext("none");
  /** Set once this owner session had any crew activity: others never pay a daemon round trip per request. */
  private active = false;
  private lastSnapshotId: string | undefined;
  /** Sent with a request (its number), not yet in the session: written when that request's answer starts. */
  private unwritten: { request: number; message: Sent }[] = [];
  /** Model requests this session made and answers that started (pi's events may trail its requests). */
  private requests = 0;
  private answers = 0;

  constructor(private readonly link: OwnerLink) {}

  markChanged(): void {
    this.active = true;
  }

  /** A new, resumed, forked or reloaded session: restore what its persisted messages say. */
  sessionStarted(ctx: ExtensionContext): void {
    this.status = new StatusContext(`${ctx.sessionManager.getSessionId()}-${Date.now().toString(36)}`);
    this.unwritten = [];
    this.requests = this.answers = 0;
    const all = persistedStatus(ctx.sessionManager.getBranch() as unknown as Entry[]).filter(
      (m) => m.customType === "crew_status",
    );
    const last = all.at(-1);
    this.lastSnapshotId = last ? statusIdOf(last) : undefined;
    this.active = all.length > 0;
    const live = persistedStatus(liveBranch(ctx))
      .filter((m) => m.customType === "crew_status")
      .at(-1);
    this.status.restore(live ? String(live.content) : undefined, all.length > 0);
  }

  modelCall(): void {
    this.status.modelCall();
  }

  /** Compaction dropped the newest snapshot: a fresh one follows at the next request while work is open. */
  compacted(ctx: ExtensionContext): void {
    const ids = new Set(persistedStatus(liveBranch(ctx)).map(statusIdOf));
    if (this.lastSnapshotId && !ids.has(this.lastSnapshotId)) this.status.snapshotLost();
  }

  private async next(): Promise<StatusMessage | null> {
    if (!this.active) return null;
    try {
      const open = await listOpenSessions(this.link);
      this.status.setOpen(open.map((s) => ({ subagent_id: s.subagent_id, status: s.status })));
    } catch {
      return null; // daemon away: no observation rather than a wrong one
    }
    const msg = this.status.atBoundary();
    if (msg?.customType === "crew_status") this.lastSnapshotId = msg.details.statusId;
    return msg;
  }

  /**
   * Model-bound context, before every request: put back status messages the request lacks (persisted ones and those
   * sent but not written yet, each right after the message it followed; nothing else moves), drop abort cards (for
   * the person only), and append a due snapshot or reminder at the end: it rides with this request.
   */
  async context(messages: ContextMessage[], ctx: ExtensionContext): Promise<ContextMessage[] | undefined> {
    const withoutAborts = messages.filter((m) => !(m.role === "custom" && m.customType === ABORT_TYPE));
    const persisted = persistedStatus(liveBranch(ctx));
    const known = new Set(persisted.map(statusIdOf));
    const repaired = insertMissingStatus(withoutAborts, [
      ...persisted,
      ...this.unwritten.map((u) => u.message).filter((m) => !known.has(statusIdOf(m))),
    ]);
    const request = ++this.requests;
    // Only a request that carries something new (a prompt, a delivery, tool results) gets a status message.
    const due = repaired.at(-1)?.role === "assistant" ? null : await this.next();
    if (!due) return repaired === messages ? undefined : repaired;
    const out = appendStatus(repaired, due, Date.now());
    this.unwritten.push({ request, message: out.at(-1) as Sent });
    return out;
  }

  /**
   * The answer to a request started: the messages before it are in the session, so the status messages that request
   * carried are written now, in their place (hidden in the TUI; pi's own rebuild of the context then has them).
   */
  answerStarted(ctx: ExtensionContext): void {
    this.answers = Math.min(this.answers + 1, this.requests);
    this.write(ctx, this.answers);
  }

  /** The run ended: a request whose answer never started (aborted) leaves its status message at the end. */
  runEnded(ctx: ExtensionContext): void {
    this.answers = this.requests;
    this.write(ctx, this.requests);
  }

  private write(ctx: ExtensionContext, upTo: number): void {
    const now = this.unwritten.filter((u) => u.request <= upTo);
    if (now.length === 0) return;
    this.unwritten = this.unwritten.filter((u) => u.request > upTo);
    const writer = ctx.sessionManager as unknown as Partial<EntryWriter>;
    if (typeof writer.appendCustomMessageEntry !== "function") return;
    for (const { message: m } of now) writer.appendCustomMessageEntry(m.customType!, m.content, false, m.details);
  }
}
