// Group commit of durable journal records across tasks. Each task keeps its own journal (tasks/<id>/events.jsonl),
// and an fsync there is per file: 100 tasks settling at once queued ~200 journal fsyncs in the thread pool, and
// the owner's push waited behind them. Instead a durable record is written to its task's journal (not fsynced: a
// daemon crash keeps it, it is in the page cache), and the same bytes, with where they went, to one daemon-wide
// log (commit.N.jsonl in the home). Records arriving while a log write runs share the next write and its one
// fsync. After a power cut, start-up puts back into each task journal whatever the log has and the journal lost.
//
// Two log files take turns: when the current one passes ROTATE_BYTES, new records go to the other, the task
// journals the old one covers are fsynced in the background, and the old one is emptied (only after that).
import { open, truncate } from "node:fs/promises";
import { join } from "node:path";
import { appendJsonLinesAt, fsError, parseJsonLines, readBoundedSync } from "./fsio.js";

/** One durable record as the log keeps it: the task journal, the byte offset it was written at, its exact bytes. */
interface LogRecord {
  /** Sequence number across both files (replay order). */
  n: number;
  path: string;
  at: number;
  text: string;
}

const ROTATE_BYTES = 4 * 1024 * 1024;

interface Waiter {
  rec: Omit<LogRecord, "n">;
  resolve(): void;
  reject(e: unknown): void;
}

export class CommitLog {
  private seq = 0;
  private current: 0 | 1 = 0;
  private size = 0;
  /** The file whose size `size` is, as this process last wrote it. */
  private sizeKnown: 0 | 1 | undefined;
  private queue: Waiter[] = [];
  private writing: Promise<void> | undefined;
  /** Task journals written through each log file since it was last emptied. */
  private readonly covers: [Set<string>, Set<string>] = [new Set(), new Set()];
  /** The background fsync-then-empty of the file not in use; the next rotation waits for it. */
  private draining: Promise<void> = Promise.resolve();
  /** Log writes and the records they carried (the group-commit test and the bench read them). */
  readonly stats = { writes: 0, records: 0 };

  private constructor(private readonly files: [string, string]) {}

  /** Open the log in `dir`; first repair every task journal from what a power cut left in the log files. */
  static async open(dir: string): Promise<CommitLog> {
    const log = new CommitLog([join(dir, "commit.0.jsonl"), join(dir, "commit.1.jsonl")]);
    await log.replay();
    return log;
  }

  /**
   * Make `text`, already written to `path` at byte `at`, durable: resolves once the log holds it fsynced. Every call
   * waiting while a write runs goes out in the next write.
   */
  commit(path: string, at: number, text: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ rec: { path, at, text }, resolve, reject });
      // The write starts on the event loop's next turn, so the records committed in this one share it: a relayed
      // settle's records and the owner's outbox record they trigger go out in one write and one fsync.
      if (!this.writing) this.writing = new Promise<void>((r) => setImmediate(r)).then(() => this.drain());
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue;
      this.queue = [];
      try {
        if (this.size > ROTATE_BYTES) await this.rotate();
        const file = this.current;
        const recs = batch.map((w) => ({ n: ++this.seq, ...w.rec }));
        // After its own first write to this file, the log knows where the file ends (it is the only writer).
        const known = this.sizeKnown === file ? { knownSize: this.size } : {};
        this.sizeKnown = undefined;
        const { size } = await appendJsonLinesAt(this.files[file], recs, known);
        this.size = size;
        this.sizeKnown = file;
        for (const r of recs) this.covers[file].add(r.path);
        this.stats.writes++;
        this.stats.records += recs.length;
        for (const w of batch) w.resolve();
      } catch (e) {
        for (const w of batch) w.reject(e);
      }
    }
    this.writing = undefined;
  }

  /**
   * A clean stop: fsync every task journal the log covers, then empty it, so the next start has nothing to replay
   * (re-reading 1,000 journals at start-up cost more than these fsyncs at stop). A journal that cannot be fsynced
   * keeps the log as it is: the next start replays it.
   */
  async close(): Promise<void> {
    while (this.writing) await this.writing;
    await this.draining;
    const paths = [...new Set([...this.covers[0], ...this.covers[1]])];
    let failed = false;
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(16, paths.length) }, async () => {
        while (next < paths.length) {
          const path = paths[next++]!;
          // A journal whose task was removed meanwhile has nothing to keep.
          await syncFileStrict(path).catch((e: NodeJS.ErrnoException) => e.code === "ENOENT" || (failed = true));
        }
      }),
    );
    if (failed || this.size === Infinity) return;
    for (const f of this.files) {
      await truncate(f, 0).catch(() => undefined);
      await syncFile(f);
    }
    this.covers[0].clear();
    this.covers[1].clear();
    this.size = 0;
    this.sizeKnown = undefined;
  }

  /** Switch files; the old one is emptied once every task journal it covers is fsynced. */
  private async rotate(): Promise<void> {
    await this.draining;
    const old = this.current;
    this.current = old === 0 ? 1 : 0;
    this.size = 0;
    const paths = [...this.covers[old]];
    this.covers[old].clear();
    this.draining = (async () => {
      for (const p of paths) await syncFile(p);
      await truncate(this.files[old], 0);
      await syncFile(this.files[old]);
    })().catch(() => undefined); // left as it is: replayed (harmlessly) at the next start
  }

  /**
   * Start-up: every record in the log files whose bytes are not in its task journal at its offset (a power cut
   * lost them) is written there again, in order; then the journals are fsynced and the log files emptied.
   */
  private async replay(): Promise<void> {
    const recs: LogRecord[] = [];
    for (const f of this.files) {
      const text = readBoundedSync(f)?.toString("utf8") ?? ""; // checked and bounded (fsio.ts)
      recs.push(
        ...parseJsonLines<LogRecord>(text).filter(
          (r) => typeof r?.path === "string" && typeof r.text === "string" && Number.isInteger(r.at),
        ),
      );
    }
    if (recs.length === 0) return;
    recs.sort((a, b) => a.n - b.n);
    const byPath = new Map<string, LogRecord[]>();
    for (const r of recs) byPath.set(r.path, [...(byPath.get(r.path) ?? []), r]);
    let failed = false;
    for (const [path, list] of byPath) {
      // One journal that cannot be repaired must not keep the daemon from starting; the log keeps its records.
      await repairJournal(path, list).catch(() => (failed = true));
    }
    this.seq = recs[recs.length - 1]!.n;
    if (failed) {
      // Left for the next start (records already in place are skipped then) until the first rotation, which
      // fsyncs the journals it names before emptying it.
      this.size = Infinity;
      for (const r of recs) this.covers[0].add(r.path);
      return;
    }
    for (const f of this.files) {
      await truncate(f, 0).catch(() => undefined);
      await syncFile(f);
    }
  }
}

/** Put back the records a journal lost; a journal whose directory is gone (task removed) is left alone. */
async function repairJournal(path: string, list: LogRecord[]): Promise<void> {
  let fh;
  try {
    fh = await open(path, "r+");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") {
      // The journal itself is gone but its directory may not be: recreate it from the log's records.
      fh = await open(path, "wx+", 0o600).catch(() => undefined);
      if (!fh) return;
    } else {
      throw fsError(e, `open ${path}`);
    }
  }
  try {
    const have = await fh.readFile();
    let size = have.length;
    let repaired = false;
    for (const r of list) {
      const want = Buffer.from(r.text, "utf8");
      if (!repaired && r.at + want.length <= size && have.subarray(r.at, r.at + want.length).equals(want)) continue;
      // From the first lost record on, the log is the truth: cut there and write the rest again.
      const at = repaired ? size : Math.min(r.at, size);
      if (!repaired) await fh.truncate(at);
      // Records before it that were never made durable may be gone too: never glue a line onto a torn one.
      const prev = Buffer.alloc(1);
      const torn =
        at > 0 && (await fh.read(prev, 0, 1, at - 1)).bytesRead === 1 && prev[0] !== 0x0a && want[0] !== 0x0a;
      const bytes = torn ? Buffer.concat([Buffer.from("\n"), want]) : want;
      await fh.write(bytes, 0, bytes.length, at);
      size = at + bytes.length;
      repaired = true;
    }
    if (repaired) await fh.sync();
  } finally {
    await fh.close();
  }
}

async function syncFile(path: string): Promise<void> {
  const fh = await open(path, "r+").catch(() => undefined);
  await fh?.sync().catch(() => undefined);
  await fh?.close().catch(() => undefined);
}

async function syncFileStrict(path: string): Promise<void> {
  const fh = await open(path, "r+");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
