// notify/outbox.jsonl in the home: the durable queue of notifications, kept like an owner's outbox (src/store/
// outbox.ts): append-only JSON lines, the latest record per id is its state, records written while a write runs share
// the next write, and each write is made durable through the daemon's commit log (ordered after the settle records
// written before it), else fsynced. Start-up reads it back and compacts it.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { NotifyBody } from "../core/notify.js";
import { appendJsonLinesAt, parseJsonLines, readBoundedSync, writeAtomic } from "../store/fsio.js";
import type { MakeDurable } from "../store/outbox.js";

/**
 * `queued` carries the body and which target (by key); `done` after a 2xx (or a command that ran); `expired` after
 * 24 h without one; `dropped` when its target left the config. `target` records when a target was first configured
 * (a restart re-announces settled cycles: a target added later does not get old ones).
 */
export type NotifyRecord =
  | {
      state: "queued";
      /** `<deliveryId>@<targetKey>`. */
      id: string;
      ts: number;
      target: string;
      kind: "webhook" | "command";
      /** Scheme and host of a webhook; never its path or query (a token may live there). */
      label: string;
      body: NotifyBody;
    }
  | { state: "done" | "expired" | "dropped"; id: string; ts: number; answer?: string }
  | { state: "target"; target: string; ts: number };

export interface Pending {
  id: string;
  ts: number;
  target: string;
  kind: "webhook" | "command";
  label: string;
  body: NotifyBody;
}

export class NotifyLog {
  readonly path: string;
  private size: number | undefined;
  private open: { records: NotifyRecord[]; done: Promise<void> } | undefined;
  private tail: Promise<void> = Promise.resolve();

  constructor(
    home: string,
    private readonly durable?: MakeDurable,
  ) {
    this.path = join(home, "notify", "outbox.jsonl");
  }

  /**
   * Read it back: the deliveries still to send, every id on record (finished ones too: never queued twice), and when
   * each target was first configured. Then rewrite it with only what is still needed: pending deliveries, the ids of
   * the last `keepMs`, the targets.
   */
  async load(
    now: number,
    keepMs: number,
  ): Promise<{ pending: Pending[]; known: Set<string>; since: Map<string, number> }> {
    mkdirSync(join(this.path, ".."), { recursive: true, mode: 0o700 });
    const records = parseJsonLines<NotifyRecord>(readBoundedSync(this.path)?.toString("utf8") ?? "");
    const queued = new Map<string, Pending>();
    const latest = new Map<string, { state: string; ts: number }>();
    const since = new Map<string, number>();
    for (const r of records) {
      if (typeof r !== "object" || r === null) continue;
      if (r.state === "target") {
        if (typeof r.target === "string" && typeof r.ts === "number" && !since.has(r.target)) since.set(r.target, r.ts);
        continue;
      }
      if (typeof r.id !== "string" || typeof r.ts !== "number") continue;
      if (r.state === "queued" && !queued.has(r.id) && typeof r.body === "object" && r.body !== null)
        queued.set(r.id, { id: r.id, ts: r.ts, target: r.target, kind: r.kind, label: r.label, body: r.body });
      latest.set(r.id, { state: r.state, ts: r.ts }); // the latest record: its state, and when it was reached
    }
    const pending = [...queued.values()].filter((p) => latest.get(p.id)?.state === "queued");
    const known = new Set(latest.keys());
    // Compact: what a restart needs, and nothing older than keepMs that is finished.
    const keep: NotifyRecord[] = [...since].map(([target, ts]) => ({ state: "target", target, ts }));
    for (const [id, l] of latest) {
      if (l.state === "queued") {
        const p = queued.get(id);
        if (p) keep.push({ state: "queued", ...p });
      } else if (now - l.ts <= keepMs) keep.push({ state: l.state as "done", id, ts: l.ts });
    }
    if (keep.length < records.length) {
      await writeAtomic(this.path, keep.map((r) => JSON.stringify(r) + "\n").join(""));
      this.size = undefined;
    }
    return { pending, known, since };
  }

  /** Append records in order: resolves once they are written (a daemon crash keeps them) and made durable. */
  append(records: NotifyRecord[]): Promise<void> {
    if (records.length === 0) return Promise.resolve();
    if (this.open) {
      this.open.records.push(...records);
      return this.open.done;
    }
    const batch = { records: [...records], done: Promise.resolve() };
    this.open = batch;
    batch.done = this.tail.then(async () => {
      if (this.open === batch) this.open = undefined;
      const viaLog = this.durable !== undefined;
      const r = await appendJsonLinesAt(this.path, batch.records, {
        sync: !viaLog,
        ...(this.size !== undefined ? { knownSize: this.size } : {}),
      }).catch((e: unknown) => {
        this.size = undefined;
        throw e;
      });
      this.size = r.size;
      if (viaLog && r.at >= 0) await this.durable!(this.path, r.at, r.text);
    });
    this.tail = batch.done.catch(() => undefined);
    return batch.done;
  }

  /** Every write queued so far is done. */
  async idle(): Promise<void> {
    while (this.open) await this.open.done.catch(() => undefined);
    await this.tail;
  }
}
