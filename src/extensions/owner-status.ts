// Owner Status Context wiring: feeds the pure StatusContext from the daemon and pi's events, appends snapshots and
// reminders at safe boundaries (hidden in the TUI, never starting a turn), and repairs the model-bound context.
import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import {
  StatusContext,
  insertMissingStatus,
  statusIdOf,
  type ContextMessage,
  type StatusMessage,
} from "../core/crew-status.js";
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

export class OwnerStatus {
  private status = new StatusContext("none");
  /** Set once this owner session had any crew activity: others never pay a daemon round trip per turn. */
  private active = false;
  private lastSnapshotId: string | undefined;

  constructor(
    private readonly pi: ExtensionAPI,
    private readonly link: OwnerLink,
  ) {}

  markChanged(): void {
    this.active = true;
  }

  /** A new, resumed, forked or reloaded session: restore what its persisted messages say. */
  sessionStarted(ctx: ExtensionContext): void {
    this.status = new StatusContext(`${ctx.sessionManager.getSessionId()}-${Date.now().toString(36)}`);
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

  /** Compaction dropped the newest snapshot: a fresh one follows at the next boundary while work is open. */
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

  /** Idle boundary (before a delivery starts a run): appended without a turn. */
  async appendIdle(): Promise<void> {
    const m = await this.next();
    if (m) this.pi.sendMessage({ ...m, display: false });
  }

  /** End of a turn whose tool results lead to another model call: steered in before that call. */
  async turnEnded(hasToolResults: boolean): Promise<void> {
    if (!hasToolResults) return; // the run is ending: a steer now would start another model call
    const m = await this.next();
    if (m) this.pi.sendMessage({ ...m, display: false }, { deliverAs: "steer" });
  }

  /** Before a user-prompted run: the message rides along with the prompt. */
  async beforeAgentStart(): Promise<
    { message: { customType: string; content: string; display: boolean; details: unknown } } | undefined
  > {
    const m = await this.next();
    return m ? { message: { ...m, display: false } } : undefined;
  }

  /**
   * Model-bound context: put back persisted status messages the request lacks (at their positions, nothing else
   * moves) and drop abort cards, which are for the person only.
   */
  context(messages: ContextMessage[], ctx: ExtensionContext): ContextMessage[] | undefined {
    const withoutAborts = messages.filter((m) => !(m.role === "custom" && m.customType === ABORT_TYPE));
    const repaired = insertMissingStatus(withoutAborts, persistedStatus(liveBranch(ctx)));
    return repaired === messages ? undefined : repaired;
  }
}
