// An owner's outbox as the delivery service keeps it in memory: one entry per delivery id, its `queued` record and
// its latest state, built from the file's records. Split from delivery.ts.
import { pendingDeliveries, type DeliveryState, type OutboxRecord } from "../../store/outbox.js";

/** The cycle a `queued` record delivers (its payload says; older records without one count as no cycle). */
export const cycleOf = (r: OutboxRecord): number | undefined => (r.payload as { cycle?: number } | undefined)?.cycle;

/** One delivery as the daemon knows it: its `queued` record and its latest state. */
export interface BoxEntry {
  queued: OutboxRecord;
  state: DeliveryState;
  /**
   * The `queued` record is in the outbox file (written; its fsync through the commit log may still run): only then
   * is it pushed or listed as pending. A daemon crash keeps a written record; a power cut may lose it before its
   * fsync, and start-up queues the cycle again from its settled record (requeueLost).
   */
  written: boolean;
}

/** An owner's outbox as last read or written by this daemon, and the file size that state corresponds to. */
export interface OwnerBox {
  entries: Map<string, BoxEntry>;
  size: number;
}

/** The outbox file as entries: the first `queued` record of each id, with the latest state. */
export function boxOf(records: OutboxRecord[]): Map<string, BoxEntry> {
  const box = new Map<string, BoxEntry>();
  for (const r of pendingDeliveries(records))
    box.set(r.deliveryId, { queued: { ...r, state: "queued" }, state: r.state, written: true });
  // Finished ones are kept by id only, so a delivery id is never queued twice.
  for (const r of records) {
    if (typeof r?.deliveryId === "string" && !box.has(r.deliveryId) && r.state === "queued") {
      // Its task and cycle stay: start-up asks whether a settled cycle has any delivery on record (requeueLost);
      // without them every acked cycle looked lost and was warned about, and queued again, at every restart.
      const cycle = cycleOf(r);
      box.set(r.deliveryId, {
        queued: {
          deliveryId: r.deliveryId,
          state: "queued",
          ts: r.ts,
          ...(r.taskId !== undefined ? { taskId: r.taskId } : {}),
          ...(cycle !== undefined ? { payload: { cycle } } : {}),
        },
        state: "acked",
        written: true,
      });
    }
  }
  return box;
}

/** Written deliveries not yet acked (nor expired), in queue order. */
export function pendingOf(box: Map<string, BoxEntry>): BoxEntry[] {
  return [...box.values()].filter((e) => e.written && e.state !== "acked" && e.state !== "expired");
}
