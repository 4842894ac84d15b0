// One fs.watch (inotify/FSEvents) per task directory: session.jsonl and result.md appear and grow there. Only new
// session bytes are read (the SessionReader keeps the offset and the partial line); reads are serialized and
// coalesced (at most one queued read, which sees every byte written before it starts).
//
// Not chokidar: it emits at most one `change` per file per 50 ms and drops the rest with no trailing event, and pi
// appends its settling line a few ms after the previous one, so that line was often never read (docs/performance.md).
import { watch, type FSWatcher } from "node:fs";
import { open, readFile, stat } from "node:fs/promises";
import { basename } from "node:path";
import { SessionReader, type SessionFacts } from "../core/session-reader.js";
import { parseResultMd, RESULT_MD_MAX_BYTES, type ParsedResultMd } from "../core/result-md.js";
import { readChildFile } from "./safe-read.js";

export interface TaskFilesOptions {
  taskDir: string;
  sessionPath: string;
  resultPath: string;
  onChange(what: "session" | "result"): void;
  /** Poll interval when the OS refuses a watch (inotify limit reached); default 250 ms. */
  fallbackPollMs?: number;
}

const CHUNK = 1024 * 1024;

/** A serialized async job with at most one run waiting: a request while one waits joins it. */
class Coalesced<T> {
  private chain: Promise<unknown> = Promise.resolve();
  private waiting: Promise<T> | undefined;

  constructor(private readonly job: () => Promise<T>) {}

  run(): Promise<T> {
    if (this.waiting) return this.waiting;
    const next = this.chain.then(() => {
      this.waiting = undefined;
      return this.job();
    });
    this.waiting = next;
    this.chain = next.catch(() => undefined);
    return next;
  }
}

export class TaskFiles {
  readonly reader: SessionReader;
  private watcher: FSWatcher | undefined;
  private poll: NodeJS.Timeout | undefined;
  private readonly sessionRead = new Coalesced(() => this.readNewBytes());
  private readonly resultRead = new Coalesced(() => this.readResultNow());
  private resultMd: ParsedResultMd | undefined;
  private resultText: string | undefined;
  /** Bytes handed to the reader that are not yet a complete line. */
  private pendingBytes = 0;
  private stopped = false;
  sessionExists = false;
  sessionMtimeMs = 0;
  /** Inode of the session file last read: another one means the file was replaced (rotation, a tool, a user). */
  private sessionIno: number | undefined;

  constructor(private readonly opts: TaskFilesOptions) {
    this.reader = new SessionReader();
  }

  start(): void {
    const session = basename(this.opts.sessionPath);
    const result = basename(this.opts.resultPath);
    const onSession = () =>
      void this.readSession().then((moved) => moved && !this.stopped && this.opts.onChange("session"));
    const onResult = () =>
      void this.readResult().then((changed) => changed && !this.stopped && this.opts.onChange("result"));
    try {
      // Every event (create, append, rename, unlink) is delivered; a missing file name (rare) re-reads both.
      this.watcher = watch(this.opts.taskDir, { persistent: false }, (_type, name) => {
        const n = name?.toString();
        if (n === undefined || n === session) onSession();
        if (n === undefined || n === result) onResult();
      });
      this.watcher.on("error", () => this.startPolling(onSession, onResult));
    } catch {
      this.startPolling(onSession, onResult);
    }
    // Whatever is already there (a recovered task, or a file written before the watch began).
    onSession();
    onResult();
  }

  /** The OS would not watch the directory: fall back to polling both files (degraded, never silent loss). */
  private startPolling(onSession: () => void, onResult: () => void): void {
    this.watcher?.close();
    this.watcher = undefined;
    if (this.poll || this.stopped) return;
    this.poll = setInterval(() => {
      onSession();
      onResult();
    }, this.opts.fallbackPollMs ?? 250);
    this.poll.unref();
  }

  get polling(): boolean {
    return this.poll !== undefined;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.watcher?.close();
    this.watcher = undefined;
    if (this.poll) clearInterval(this.poll);
    this.poll = undefined;
  }

  facts(): SessionFacts | undefined {
    return this.sessionExists ? this.reader.facts() : undefined;
  }

  get result(): ParsedResultMd | undefined {
    return this.resultMd;
  }

  /** Read the session's new bytes now (also called on child events, which can beat the watcher). */
  readSession(): Promise<boolean> {
    return this.sessionRead.run().catch(() => false);
  }

  private async readNewBytes(): Promise<boolean> {
    const fh = await open(this.opts.sessionPath, "r").catch(() => null);
    if (!fh) return false;
    try {
      const st = await fh.stat();
      this.sessionExists = true;
      this.sessionMtimeMs = st.mtimeMs;
      let moved = false;
      // Shorter than what we read, or another file under the name: read it again from 0 (the result warns).
      const replaced = this.sessionIno !== undefined && st.ino !== this.sessionIno;
      if (replaced || st.size < this.reader.offset + this.pendingBytes) {
        this.reader.restart();
        this.pendingBytes = 0;
        moved = true;
      }
      this.sessionIno = st.ino;
      // The reader holds an unfinished last line itself: resume after every byte already handed to it.
      let pos = this.reader.offset + this.pendingBytes;
      const buf = Buffer.alloc(Math.min(CHUNK, Math.max(1, st.size - pos)));
      while (pos < st.size) {
        const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, st.size - pos), pos);
        if (bytesRead === 0) break;
        // A copy: the reader keeps a partial line by reference, and buf is overwritten by the next read
        // (an over-1 MiB line was corrupted and counted invalid; found by test/reliability/hostile-files).
        this.reader.push(Buffer.from(buf.subarray(0, bytesRead)));
        pos += bytesRead;
        moved = true;
      }
      this.pendingBytes = pos - this.reader.offset;
      return moved;
    } finally {
      await fh.close();
    }
  }

  /** Re-read result.md; true when its text changed (appeared, changed or vanished). */
  readResult(): Promise<boolean> {
    return this.resultRead.run().catch(() => false);
  }

  private async readResultNow(): Promise<boolean> {
    // No symlinks, regular files only, bounded: result.md is written by the child (see safe-read.ts).
    const r = await readChildFile(this.opts.resultPath, RESULT_MD_MAX_BYTES).catch(() => ({ missing: true as const }));
    const text = "text" in r ? r.text : "refused" in r ? `\0refused ${r.refused}` : undefined;
    if (text === this.resultText) return false;
    this.resultText = text;
    this.resultMd =
      "text" in r
        ? parseResultMd(r.text, { maxBytes: RESULT_MD_MAX_BYTES })
        : "refused" in r
          ? { meta: {}, body: "", warnings: [r.refused] }
          : undefined;
    return true;
  }

  /** Session bytes consumed into complete lines, for the journal. */
  get sessionOffset(): number {
    return this.reader.offset;
  }
}

export async function mtimeMs(path: string): Promise<number | undefined> {
  return (await stat(path).catch(() => undefined))?.mtimeMs;
}
