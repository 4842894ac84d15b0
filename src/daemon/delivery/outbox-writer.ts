// The owner outboxes' group commit: records from every caller that arrives while an owner's write runs share the
// next write (one append) and, through the commit log, its fsync. With 100 tasks settling at once this is a handful
// of writes instead of 100 (docs/performance.md). Split from delivery.ts, which decides what to write.
import { appendOutboxMany, type MakeDurable, type OutboxRecord } from "../../store/outbox.js";

export type OutboxLine = Omit<OutboxRecord, "ts">;

/** Records waiting for one write: everything queued while the previous write ran goes out in the next one. */
interface Batch {
  records: OutboxLine[];
  sync: boolean;
  /** The records are in the file (the page cache: a daemon crash keeps them). */
  written: Promise<void>;
  /** ...and fsynced (unless no record of the batch asked for it). */
  done: Promise<void>;
}

/** A staged write: `written` once the bytes are in the file, `done` once they are durable too. */
export interface Staged {
  written: Promise<void>;
  done: Promise<void>;
}

export interface OutboxWriterOptions {
  home: string;
  /** The store's commit log: outbox fsyncs are shared with (and ordered after) the journal records before them. */
  durable?: MakeDurable;
  /** The owner's outbox file now ends at `size` (the delivery service's cache keeps it). */
  onWritten(owner: string, size: number): void;
}

export class OutboxWriter {
  private readonly writers = new Map<string, { tail: Promise<void>; open?: Batch; busy: number }>();
  /** Outbox appends and the records they carried, for the benchmark and the group-commit test. */
  readonly stats = { writes: 0, records: 0 };

  constructor(private readonly opts: OutboxWriterOptions) {}

  /** A write for this owner is queued or running (the file may trail what the caller holds in memory). */
  busy(owner: string): boolean {
    return (this.writers.get(owner)?.busy ?? 0) > 0;
  }

  /** Resolves once every write queued for this owner so far is in the file. */
  async written(owner: string): Promise<void> {
    await this.writers.get(owner)?.tail;
  }

  /** Append, and resolve once durable (or written, for `sync: false`). */
  commit(owner: string, records: OutboxLine[], sync = true): Promise<void> {
    return this.stage(owner, records, sync).done;
  }

  stage(owner: string, records: OutboxLine[], sync = true): Staged {
    if (records.length === 0) return { written: Promise.resolve(), done: Promise.resolve() };
    let writer = this.writers.get(owner);
    if (!writer) this.writers.set(owner, (writer = { tail: Promise.resolve(), busy: 0 }));
    const batch = writer.open ?? this.open(owner, writer);
    batch.records.push(...records);
    if (sync) batch.sync = true;
    return { written: batch.written, done: batch.done };
  }

  private open(owner: string, writer: { tail: Promise<void>; open?: Batch; busy: number }): Batch {
    let wrote!: () => void;
    const written = new Promise<void>((r) => (wrote = r));
    // `done` is set just below, once the write is chained (it needs the batch).
    const batch: Batch = { records: [], sync: false, written, done: Promise.resolve() };
    writer.open = batch;
    writer.busy++;
    batch.done = writer.tail.then(async () => {
      if (writer.open === batch) delete writer.open;
      this.stats.writes++;
      this.stats.records += batch.records.length;
      try {
        await appendOutboxMany(this.opts.home, owner, batch.records, {
          sync: batch.sync,
          ...(this.opts.durable ? { durable: this.opts.durable } : {}),
          onWritten: (size) => {
            this.opts.onWritten(owner, size);
            wrote();
          },
        });
      } finally {
        writer.busy--;
      }
    });
    // A failed write never resolves `written`: `done` rejects for it.
    batch.written = Promise.race([written, batch.done]);
    // The next write needs only this one's bytes in the file (appends stay in order); its fsync may overlap this
    // one's: the commit log orders them and shares the fsync.
    writer.tail = batch.written.catch(() => undefined);
    return batch;
  }
}
