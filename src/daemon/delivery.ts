// Owner delivery: every settled cycle of a pi-owned task becomes one delivery in the owner's durable outbox
// (owners/<ownerId>/outbox.jsonl) and is pushed to the owner's attached extension, which injects it and acks.
// Unacked deliveries are pushed again on the next attach; ones older than 24 h are dropped then.
import { deliveryFor, isExpired, type CrewReport, type DeliveryPayload } from "../core/crew-delivery.js";
import type { AgentResult } from "../core/types.js";
import { appendOutbox, isValidOwnerId, pendingDeliveries, readOutbox, type OutboxRecord } from "../store/outbox.js";
import type { Connection, Logger } from "./server.js";
import type { Live } from "./supervisor.js";

export interface DeliverySource {
  onStatus(fn: (live: Live, result: AgentResult) => void): () => void;
}

export interface DeliveryServiceOptions {
  home: string;
  log: Logger;
  /** The validated crew_report of the task's current cycle, when the child sent one. */
  reportOf?(live: Live): CrewReport | undefined;
  now?(): number;
  ttlMs?: number;
}

/** Owners whose deliveries the daemon keeps: pi session ids, not the person at the CLI. */
export const deliversTo = (owner: string): boolean => owner !== "cli" && isValidOwnerId(owner);

export class DeliveryService {
  private readonly attached = new Map<string, Set<Connection>>();
  private readonly chains = new Map<string, Promise<void>>();
  private readonly now: () => number;

  constructor(private readonly opts: DeliveryServiceOptions) {
    this.now = opts.now ?? Date.now;
  }

  /** Enqueue a delivery for every settled cycle the source reports. Returns an unsubscribe. */
  watch(source: DeliverySource): () => void {
    return source.onStatus((live, result) => {
      if (live.cycleRunning || live.promptPending || !deliversTo(live.rec.owner)) return;
      const payload = deliveryFor(result, live.rec.cycle, this.opts.reportOf?.(live));
      if (payload) void this.enqueue(live.rec.owner, payload);
    });
  }

  /** Per-owner serialization: the outbox is read and appended by one step at a time. */
  private serial<T>(owner: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.chains.get(owner) ?? Promise.resolve();
    const run = prev.then(fn);
    this.chains.set(owner, run.then(() => undefined, () => undefined));
    return run;
  }

  /** Durable first, then pushed; a delivery id already in the outbox is not queued again. */
  enqueue(owner: string, payload: DeliveryPayload): Promise<boolean> {
    return this.serial(owner, async () => {
      const records = await readOutbox(this.opts.home, owner);
      if (records.some((r) => r.deliveryId === payload.deliveryId)) return false;
      const ts = this.now();
      await appendOutbox(this.opts.home, owner, { deliveryId: payload.deliveryId, state: "queued", ts, taskId: payload.taskId, payload });
      this.opts.log.info({ owner, deliveryId: payload.deliveryId }, "delivery queued");
      await this.pushTo(owner, [{ deliveryId: payload.deliveryId, state: "queued", ts, payload }]);
      return true;
    });
  }

  private async pushTo(owner: string, records: OutboxRecord[]): Promise<number> {
    const conns = [...(this.attached.get(owner) ?? [])].filter((c) => !c.closed);
    if (conns.length === 0) return 0;
    let pushed = 0;
    for (const r of records) {
      if (isExpired(r.ts, this.now(), this.opts.ttlMs)) {
        await appendOutbox(this.opts.home, owner, { deliveryId: r.deliveryId, state: "expired", taskId: r.taskId });
        this.opts.log.info({ owner, deliveryId: r.deliveryId }, "delivery expired (older than 24 h)");
        continue;
      }
      // One active owner extension gets it; the newest attach is the live session.
      conns.at(-1)!.push("owner.delivery", { ...(r.payload as DeliveryPayload), queuedAt: r.ts });
      if (r.state === "queued") await appendOutbox(this.opts.home, owner, { deliveryId: r.deliveryId, state: "sent", taskId: r.taskId });
      pushed++;
    }
    return pushed;
  }

  /** An owner extension is active: remember its connection and push everything not yet acked, oldest first. */
  attach(conn: Connection): Promise<{ pending: number }> {
    const owner = conn.ownerId!;
    let set = this.attached.get(owner);
    if (!set) this.attached.set(owner, (set = new Set()));
    set.add(conn);
    conn.onClose(() => {
      set!.delete(conn);
      if (set!.size === 0 && this.attached.get(owner) === set) this.attached.delete(owner);
    });
    return this.serial(owner, async () => {
      const pending = pendingDeliveries(await readOutbox(this.opts.home, owner));
      return { pending: await this.pushTo(owner, pending) };
    });
  }

  isActive(owner: string): boolean {
    return [...(this.attached.get(owner) ?? [])].some((c) => !c.closed);
  }

  /** The owner injected (or found already present, or dropped as expired) these deliveries. */
  ack(conn: Connection, ids: string[], state: "acked" | "expired" = "acked"): Promise<{ acked: number }> {
    const owner = conn.ownerId!;
    return this.serial(owner, async () => {
      const records = await readOutbox(this.opts.home, owner);
      const open = new Set(pendingDeliveries(records).map((r) => r.deliveryId));
      let acked = 0;
      for (const id of new Set(ids)) {
        if (!open.has(id)) continue; // unknown or already acked: idempotent
        await appendOutbox(this.opts.home, owner, { deliveryId: id, state });
        acked++;
      }
      return { acked };
    });
  }

  /** /fork and /clone: the old owner's unacked deliveries move to the new owner (and are pushed if it is attached). */
  moveQueued(fromOwner: string, toOwner: string): Promise<number> {
    return this.serial(fromOwner, async () => {
      const pending = pendingDeliveries(await readOutbox(this.opts.home, fromOwner));
      for (const r of pending) {
        await this.enqueue(toOwner, r.payload as DeliveryPayload);
        await appendOutbox(this.opts.home, fromOwner, { deliveryId: r.deliveryId, state: "acked", movedTo: toOwner });
      }
      return pending.length;
    });
  }
}
