// Owner delivery: every settled cycle of a pi-owned task becomes one delivery in the owner's durable outbox
// (owners/<ownerId>/outbox.jsonl) and is pushed to the owner's attached extension, which injects it and acks.
// Unacked deliveries are pushed again on the next attach; ones older than 24 h are dropped then.
import { DshError } from "../../core/errors.js";
import {
  deliveryFor,
  isExpired,
  pushedDelivery,
  relayedReport,
  type CrewReport,
  type DeliveryPayload,
} from "../../core/crew/crew-delivery.js";
import type { AgentResult } from "../../core/types.js";
import {
  type DeliveryState,
  type MakeDurable,
  isValidOwnerId,
  outboxSize,
  readOutboxSized,
  type OutboxRecord,
} from "../../store/outbox.js";
import { boxOf, cycleOf, pendingOf, type BoxEntry, type OwnerBox } from "./outbox-box.js";
import { OutboxWriter, type OutboxLine } from "./outbox-writer.js";
import type { Connection, Logger } from "../server/server.js";
import type { Live } from "../task/live.js";

export interface DeliverySource {
  onStatus(fn: (live: Live, result: AgentResult, info: { settled: boolean; recovered?: true }) => void): () => void;
}

export interface DeliveryServiceOptions {
  home: string;
  log: Logger;
  /** The validated crew_report of the task's current cycle, when the child sent one. */
  reportOf?(live: Live): CrewReport | undefined;
  now?(): number;
  ttlMs?: number;
  /** The store's commit log: outbox fsyncs are shared with (and ordered after) the journal records before them. */
  durable?: MakeDurable;
  /** An owner's last connection closed and its outbox left memory (owner-gc.ts may remove its directory). */
  onOwnerLeft?(owner: string): void;
}

/** Owners whose deliveries the daemon keeps: pi session ids, not the person at the CLI. */
export const deliversTo = (owner: string): boolean => owner !== "cli" && isValidOwnerId(owner);

export class DeliveryService {
  private readonly attached = new Map<string, Set<Connection>>();
  /**
   * Each owner's outbox, read once and kept in step with every append, instead of reading the whole file on every
   * enqueue and ack. The daemon is its only writer; a size that differs from the last read or write (someone
   * appended by hand) makes it read the file again.
   */
  private readonly boxes = new Map<string, Promise<OwnerBox>>();
  private readonly boxTurns = new Map<string, Promise<void>>();
  private readonly now: () => number;
  private stopped = false;
  private readonly writer: OutboxWriter;

  constructor(private readonly opts: DeliveryServiceOptions) {
    this.now = opts.now ?? Date.now;
    this.writer = new OutboxWriter({
      home: opts.home,
      ...(opts.durable ? { durable: opts.durable } : {}),
      // A cache whose read failed is re-read next time anyway: that must not fail a write that succeeded.
      onWritten: (owner, size) =>
        void this.boxes.get(owner)?.then(
          (b) => void (b.size = size),
          () => undefined,
        ),
    });
  }

  /** Outbox appends and the records they carried, for the benchmark and the group-commit test. */
  get stats(): { writes: number; records: number } {
    return this.writer.stats;
  }

  /** Enqueue a delivery for every settled cycle the source reports. Returns an unsubscribe. */
  watch(source: DeliverySource): () => void {
    return source.onStatus((live, result, info) => {
      // Exactly one outcome per settled cycle: its settled harvest. Live snapshots and closes owe the owner nothing.
      if (!info.settled || !deliversTo(live.rec.owner)) return;
      // A relayed task's report was validated on its machine: read back from the result.md written for it there.
      const relayed = live.rec.remote && (result.status === "completed" || result.status === "blocked");
      const report = this.opts.reportOf?.(live) ?? (relayed ? relayedReport(result) : undefined);
      const payload = deliveryFor(result, live.rec.cycle, report);
      if (!payload) return;
      // The delivery's time is its settle's: the 24 h bound counts from there, whenever it is queued or moved.
      const at = result.timing?.settledAt;
      if (info.recovered) void this.requeueLost(live.rec.owner, payload, at);
      else this.enqueueOrRetry(live.rec.owner, payload, 0, at);
    });
  }

  /**
   * A delivery that cannot be written (a full or read-only home) is tried again with backoff (0.5 s doubling to
   * 30 s) until it is: the owner must hear every settled cycle, and the id makes a repeat harmless.
   */
  private enqueueOrRetry(owner: string, payload: DeliveryPayload, attempt: number, at?: number): void {
    this.enqueue(owner, payload, at).catch((e: unknown) => {
      const retry = e instanceof DshError && e.code === "HOME_UNWRITABLE" && !this.stopped;
      const delay = Math.min(30_000, 500 * 2 ** attempt);
      this.opts.log.error(
        { owner, deliveryId: payload.deliveryId, err: String(e), ...(retry ? { retryInMs: delay } : {}) },
        "delivery not queued",
      );
      if (retry) setTimeout(() => !this.stopped && this.enqueueOrRetry(owner, payload, attempt + 1, at), delay).unref();
    });
  }

  /**
   * A cycle that settled before a restart: queued only when the outbox has no delivery of that cycle at all (a power
   * cut lost its record). Evidence read back after the restart may word the outcome differently (another delivery
   * id), and a cycle has exactly one outcome, so any recorded delivery of the cycle stands.
   */
  private async requeueLost(owner: string, payload: DeliveryPayload, at?: number): Promise<void> {
    try {
      const box = await this.box(owner);
      for (const e of box.values())
        if (e.queued.taskId === payload.taskId && cycleOf(e.queued) === payload.cycle) return;
      this.opts.log.warn(
        { owner, deliveryId: payload.deliveryId },
        "a settled cycle had no delivery in the outbox after the restart; queued again",
      );
      this.enqueueOrRetry(owner, payload, 0, at);
    } catch (e) {
      this.opts.log.error({ owner, deliveryId: payload.deliveryId, err: String(e) }, "outbox not read at start-up");
    }
  }

  /** Daemon stop: no more retries from this instance (the next daemon queues it from the settled result it recovers). */
  stop(): void {
    this.stopped = true;
  }

  /**
   * The owner's outbox, to callers in call order: each caller's synchronous step after the await (e.g. enqueue's
   * insert and commit) runs before the next caller's, so records are written and pushed in the order they came.
   */
  private box(owner: string): Promise<Map<string, BoxEntry>> {
    const next = (this.boxTurns.get(owner) ?? Promise.resolve()).then(() => this.boxNow(owner));
    this.boxTurns.set(
      owner,
      next.then(
        () => undefined,
        () => undefined,
      ),
    );
    return next;
  }

  private async boxNow(owner: string): Promise<Map<string, BoxEntry>> {
    const known = this.boxes.get(owner);
    if (known) {
      const b = await known;
      // While our own write is queued or running the file trails memory: memory is the truth.
      if (this.writer.busy(owner) || (await outboxSize(this.opts.home, owner)) === b.size || this.writer.busy(owner))
        return b.entries;
    }
    const load = readOutboxSized(this.opts.home, owner).then(({ records, size }) => ({
      entries: boxOf(records),
      size,
    }));
    this.boxes.set(owner, load);
    load.catch(() => this.boxes.get(owner) === load && this.boxes.delete(owner)); // a failed read is tried again next time
    return (await load).entries;
  }

  /**
   * Written first, then pushed; its fsync (shared through the commit log) runs meanwhile rather than before the
   * push: on this class of disk an fsync's tail is tens of ms, most of a settle's push latency (docs/performance.md).
   * A delivery id already in the outbox is not queued again. `at`: the delivery's time (its settle's, or the original
   * one of a moved delivery), default now.
   */
  async enqueue(owner: string, payload: DeliveryPayload, at?: number): Promise<boolean> {
    const box = await this.box(owner);
    if (box.has(payload.deliveryId)) return false;
    const queued: OutboxRecord = {
      deliveryId: payload.deliveryId,
      state: "queued",
      ts: at ?? this.now(),
      taskId: payload.taskId,
      payload,
    };
    const entry: BoxEntry = { queued, state: "queued", written: false };
    box.set(payload.deliveryId, entry);
    const staged = this.writer.stage(owner, [queued]);
    try {
      await staged.written;
    } catch (e) {
      box.delete(payload.deliveryId); // not in the file: a later settle may queue it again
      throw e;
    }
    entry.written = true;
    this.opts.log.info({ owner, deliveryId: payload.deliveryId }, "delivery queued");
    await Promise.all([
      this.pushTo(owner, [entry]),
      staged.done.catch((e: unknown) =>
        this.opts.log.error({ owner, deliveryId: payload.deliveryId, err: String(e) }, "delivery record not fsynced"),
      ),
    ]);
    return true;
  }

  private async pushTo(owner: string, entries: BoxEntry[]): Promise<number> {
    const conns = [...(this.attached.get(owner) ?? [])].filter((c) => !c.closed);
    if (conns.length === 0) return 0;
    let pushed = 0;
    const sent: OutboxLine[] = [];
    const expired: OutboxLine[] = [];
    for (const e of entries) {
      const r = e.queued;
      if (isExpired(r.ts, this.now(), this.opts.ttlMs)) {
        e.state = "expired";
        expired.push({ deliveryId: r.deliveryId, state: "expired", taskId: r.taskId });
        this.opts.log.info({ owner, deliveryId: r.deliveryId }, "delivery expired (older than 24 h)");
        continue;
      }
      // One active owner extension gets it; the newest attach is the live session.
      // The report once (the card's is the model's), by reference when over the frame limit (server-large.ts).
      conns.at(-1)!.push("owner.delivery", { ...pushedDelivery(r.payload as DeliveryPayload), queuedAt: r.ts });
      if (e.state === "queued") {
        e.state = "sent";
        sent.push({ deliveryId: r.deliveryId, state: "sent", taskId: r.taskId });
      }
      pushed++;
    }
    // `sent` is informational (a sent delivery is still pending until acked), so it needs no fsync of its own.
    await Promise.all([this.writer.commit(owner, expired), this.writer.commit(owner, sent, false)]);
    return pushed;
  }

  /** An owner extension is active: remember its connection and push everything not yet acked, oldest first. */
  async attach(conn: Connection): Promise<{ pending: number }> {
    const owner = conn.ownerId!;
    let set = this.attached.get(owner);
    if (!set) this.attached.set(owner, (set = new Set()));
    set.add(conn);
    conn.onClose(() => {
      set!.delete(conn);
      if (set!.size > 0 || this.attached.get(owner) !== set) return;
      this.attached.delete(owner);
      // The session left: its outbox leaves memory too (read again from disk when it or a delivery comes back),
      // so a long-running daemon does not hold every session's deliveries ever queued.
      if (!this.writer.busy(owner)) {
        this.boxes.delete(owner);
        this.opts.onOwnerLeft?.(owner);
      }
    });
    return { pending: await this.pushTo(owner, pendingOf(await this.box(owner))) };
  }

  /** Attached, or its outbox in memory or being written: its directory is in use. */
  holds(owner: string): boolean {
    return this.attached.has(owner) || this.boxes.has(owner) || this.writer.busy(owner);
  }

  isActive(owner: string): boolean {
    return [...(this.attached.get(owner) ?? [])].some((c) => !c.closed);
  }

  /** The owner injected (or found already present, or dropped as expired) these deliveries. */
  async ack(conn: Connection, ids: string[], state: "acked" | "expired" = "acked"): Promise<{ acked: number }> {
    const owner = conn.ownerId!;
    const box = await this.box(owner);
    const changed: { entry: BoxEntry; was: DeliveryState }[] = [];
    for (const id of new Set(ids)) {
      const entry = box.get(id);
      if (!entry?.written || entry.state === "acked" || entry.state === "expired") continue; // unknown or done: idempotent
      changed.push({ entry, was: entry.state });
      entry.state = state;
    }
    try {
      await this.writer.commit(
        owner,
        changed.map(({ entry }) => ({ deliveryId: entry.queued.deliveryId, state })),
      );
    } catch (e) {
      for (const c of changed) c.entry.state = c.was;
      throw e;
    }
    // Done: only the id is needed from now on (dedupe), not the card and report it carried.
    for (const c of changed) delete c.entry.queued.payload;
    return { acked: changed.length };
  }

  /** /fork and /clone: the old owner's unacked deliveries move to the new owner (and are pushed if it is attached). */
  async moveQueued(fromOwner: string, toOwner: string): Promise<number> {
    const box = await this.box(fromOwner);
    // Deliveries of the old owner still being written move too.
    await this.writer.written(fromOwner);
    let moved = 0;
    for (const e of pendingOf(box)) {
      if (e.state === "acked" || e.state === "expired") continue; // acked by the old session meanwhile
      const was = e.state;
      e.state = "acked"; // before the awaits: an ack arriving meanwhile finds it done, not injected twice
      try {
        await this.enqueue(toOwner, e.queued.payload as DeliveryPayload, e.queued.ts);
        await this.writer.commit(fromOwner, [{ deliveryId: e.queued.deliveryId, state: "acked", movedTo: toOwner }]);
      } catch (err) {
        e.state = was;
        throw err;
      }
      moved++;
    }
    return moved;
  }
}
