// One fs.watch (inotify/FSEvents) per task directory: session.jsonl and result.md appear and grow there. Only new
// session bytes are read (the SessionReader keeps the offset and the partial line); reads are serialized and
// coalesced (at most one queued read, which sees every byte written before it starts).
//
// Not chokidar: it emits at most one `change` per file per 50 ms and drops the rest with no trailing event, and pi
// appends its settling line a few ms after the previous one, so that line was often never read (docs/performance.md).
import { closeSync, constants, fstatSync, openSync, readSync, watch, type FSWatcher } from "node:fs";
import { stat } from "node:fs/promises";
import { setImmediate as yieldToLoop } from "node:timers/promises";
import { basename } from "node:path";
import { SessionReader, type SessionFacts } from "../../core/session/session-reader.js";
import { parseResultMd, RESULT_MD_MAX_BYTES, type ParsedResultMd } from "../../core/result/result-md.js";
import type { Clock, TimerHandle } from "../../core/clock.js";
import { systemClock } from "./clock.js";
import { readChildFile } from "./safe-read.js";

export interface TaskFilesOptions {
  taskDir: string;
  sessionPath: string;
  resultPath: string;
  onChange(what: "session" | "result"): void;
  /** Poll interval when the OS refuses a watch (inotify limit reached); default 250 ms. */
  fallbackPollMs?: number;
  /** The clock the fallback polls on (the task runner's clock port; default the system clock). */
  clock?: Clock;
}

/**
 * The largest read. Parsing a chunk allocates a few times its size: with the daemon's 4 MB semi-space
 * (DAEMON_NODE_FLAGS) a 1 MiB chunk outlived two scavenges and was promoted, so catching up on a 200 MB session grew
 * the daemon's peak RSS by ~50 MB until a full GC; read 256 KiB at a time it grows by a few MB, and reads no slower
 * (docs/performance.md).
 */
const CHUNK = 256 * 1024;
/** How much of the first line is kept to recognise the file (pi's header line is ~200 bytes). */
const FIRST_LINE_MAX = 4096;
/** Most reads are one line or a few: start small, double while reads come back full. */
const FIRST_READ = 16 * 1024;

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

  /** Resolves once no run is in progress or waiting. */
  async idle(): Promise<void> {
    for (let c; c !== this.chain; ) await (c = this.chain);
  }
}

export class TaskFiles {
  readonly reader: SessionReader;
  private watcher: FSWatcher | undefined;
  private poll: TimerHandle | undefined;
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
  /** The session's descriptor, open while watched. */
  private fd: number | undefined;
  /** A rename event named the session: the name may now hold another file. */
  private recheck = false;
  /**
   * The session's first line as read (at most FIRST_LINE_MAX bytes): a file truncated and written again on the same
   * inode, longer than what was read, has another first line (pi's header carries the session id and its time).
   */
  private firstLine: Buffer | undefined;

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
      // The reads (and what they start: a harvest, journal writes) run from the check phase, not inside the event:
      // libuv reads inotify until it is drained, and the daemon's own writes into the task dirs it watches keep it
      // fed, so work done inside the event starved every socket (a child's agent_end waited 10-15 ms in a burst).
      let due: { session: boolean; result: boolean } | undefined;
      this.watcher = watch(this.opts.taskDir, { persistent: false }, (type, name) => {
        const n = name?.toString();
        if (n === undefined || (n === session && type === "rename")) this.recheck = true;
        const s = n === undefined || n === session;
        const r = n === undefined || n === result;
        if (!s && !r) return;
        if (!due) {
          due = { session: false, result: false };
          setImmediate(() => {
            const d = due!;
            due = undefined;
            if (this.stopped) return;
            if (d.session) onSession();
            if (d.result) onResult();
          });
        }
        if (s) due.session = true;
        if (r) due.result = true;
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
    const clock = this.opts.clock ?? systemClock;
    const every = () =>
      (this.poll = clock.setTimer(this.opts.fallbackPollMs ?? 250, () => {
        if (this.stopped) return;
        this.recheck = true; // no events tell us of a replaced file: check the name each time
        onSession();
        onResult();
        every();
      }));
    every();
  }

  get polling(): boolean {
    return this.poll !== undefined;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.watcher?.close();
    this.watcher = undefined;
    (this.opts.clock ?? systemClock).clearTimer(this.poll);
    this.poll = undefined;
    // After any read in progress: it holds the handle until it returns (a read after this closes it again).
    await this.sessionRead.idle();
    await this.closeSession();
  }

  facts(): SessionFacts | undefined {
    return this.sessionExists ? this.reader.facts() : undefined;
  }

  get result(): ParsedResultMd | undefined {
    return this.resultMd;
  }

  /** result.md's text as last read (what `result` parsed), or why it was refused; undefined when there is none. */
  get resultRaw(): { text: string } | { refused: string } | undefined {
    const t = this.resultText;
    if (t === undefined) return undefined;
    return t.startsWith("\0refused ") ? { refused: t.slice("\0refused ".length) } : { text: t };
  }

  /** Read the session's new bytes now (also called on child events, which can beat the watcher). */
  readSession(): Promise<boolean> {
    return this.sessionRead.run().catch(() => false);
  }

  /**
   * The session stays open while the task is watched: a line costs one read, not open + fstat + read + close (four
   * thread-pool calls per line, which with 1,000 streaming tasks kept the daemon's event loop busy). The file is
   * stat'ed only when it may have been replaced (a rename event), truncated (a change with no new bytes) or first
   * opened.
   */
  private async readNewBytes(): Promise<boolean> {
    try {
      return await this.readNewBytesOpen();
    } finally {
      if (this.stopped) await this.closeSession(); // a read after stop (a settle, an abort) keeps no handle
    }
  }

  private async readNewBytesOpen(): Promise<boolean> {
    let moved = false;
    if (this.fd !== undefined && this.recheck) {
      this.recheck = false;
      // Another file under the name (a rename over it, or deleted): read whatever the name holds now, from 0.
      const now = await stat(this.opts.sessionPath).catch(() => undefined);
      if (now?.ino !== this.sessionIno) await this.closeSession();
    }
    let fd = this.fd;
    if (fd === undefined) {
      const before = this.reader.offset + this.pendingBytes;
      fd = this.openSession();
      if (fd === undefined) return false;
      if (this.reader.offset + this.pendingBytes < before) moved = true; // replaced or truncated: read again from 0
    }
    if (this.regrown(fd)) moved = true; // emptied and written again in place: read from 0 (the result warns)
    let got = await this.readFrom(fd);
    // An event and nothing new: shorter than what we read (truncated in place)? Then read it again from 0.
    if (got === 0 && this.truncated(fd)) {
      moved = true;
      got = await this.readFrom(fd);
    }
    if (got > 0 && this.firstLine === undefined) this.keepFirstLine(fd);
    if (got > 0) {
      // The bytes were written since the last read, which the watch event triggered: their mtime is about now (the
      // freshness check allows a second of slack, as for line timestamps).
      this.sessionMtimeMs = Math.max(this.sessionMtimeMs, Date.now());
      moved = true;
    }
    return moved;
  }

  /**
   * Hand every byte past what the reader has to it; returns how many were read. Synchronous reads of the page cache
   * (a line is a few hundred bytes: microseconds, where a thread-pool read cost ~100 µs of daemon time with 100
   * tasks streaming); a long catch-up (a big session first opened) yields to the event loop after each full chunk.
   */
  private async readFrom(fd: number): Promise<number> {
    let pos = this.reader.offset + this.pendingBytes;
    let size = FIRST_READ;
    let got = 0;
    for (;;) {
      const buf = Buffer.allocUnsafe(size);
      if (size === CHUNK && got > 0) {
        await yieldToLoop();
        if (this.fd !== fd) break; // closed meanwhile (stop): what was read is handed over
      }
      const bytesRead = readSync(fd, buf, 0, size, pos);
      if (bytesRead === 0) break;
      // A copy of just the bytes: the reader keeps a partial line by reference (an over-1 MiB line was once
      // corrupted by a reused buffer; test/reliability/hostile-files).
      this.reader.push(Buffer.from(buf.subarray(0, bytesRead)));
      pos += bytesRead;
      got += bytesRead;
      if (bytesRead < size) break; // the end of what is written so far
      size = Math.min(CHUNK, size * 2);
    }
    this.pendingBytes = pos - this.reader.offset;
    return got;
  }

  private openSession(): number | undefined {
    let fd: number;
    try {
      // O_NONBLOCK: a FIFO planted under the name must not hold the daemon in open(2) (reads of a regular file are
      // unaffected by the flag).
      fd = openSync(this.opts.sessionPath, constants.O_RDONLY | constants.O_NONBLOCK);
    } catch {
      return undefined; // not there yet (or unreadable): the next event tries again
    }
    const st = fstatSync(fd);
    if (!st.isFile()) {
      // Not a session pi writes (a FIFO, a device): never read; the task is judged without one.
      closeSync(fd);
      return undefined;
    }
    this.fd = fd;
    this.sessionExists = true;
    this.sessionMtimeMs = st.mtimeMs;
    // Another file than the one read so far: read it again from 0 (the result warns).
    if (this.sessionIno !== undefined && st.ino !== this.sessionIno) this.restart();
    this.sessionIno = st.ino;
    if (st.size < this.reader.offset + this.pendingBytes) this.restart();
    return fd;
  }

  /** True when the file is shorter than what was read (then the reader starts again from 0, and the result warns). */
  private truncated(fd: number): boolean {
    const st = fstatSync(fd);
    this.sessionMtimeMs = st.mtimeMs;
    if (st.size >= this.reader.offset + this.pendingBytes) return false;
    this.restart();
    return true;
  }

  private restart(): void {
    this.reader.restart();
    this.pendingBytes = 0;
    this.firstLine = undefined;
  }

  /** Remember the first complete line (one pread of a few hundred bytes, once per file). */
  private keepFirstLine(fd: number): void {
    if (this.reader.offset === 0) return; // no complete line yet
    const buf = Buffer.allocUnsafe(Math.min(this.reader.offset, FIRST_LINE_MAX));
    const n = readSync(fd, buf, 0, buf.length, 0);
    const nl = buf.subarray(0, n).indexOf(0x0a);
    // Its own memory, not a slice of node's shared 8 KiB pool: kept for the task's life, a pooled copy would pin
    // a whole pool slab per task (8 MB at 1,000 live tasks).
    const line = buf.subarray(0, nl < 0 ? n : nl + 1);
    this.firstLine = Buffer.allocUnsafeSlow(line.length);
    line.copy(this.firstLine);
  }

  /**
   * True (and the reader restarted) when the file no longer starts with the first line read: truncated and regrown
   * on the same inode between two reads, where neither the inode nor a shorter size tells. One pread of the first
   * line per read (page cache; microseconds).
   */
  private regrown(fd: number): boolean {
    const first = this.firstLine;
    if (first === undefined) return false;
    const buf = Buffer.allocUnsafe(first.length);
    const n = readSync(fd, buf, 0, first.length, 0);
    if (n === first.length && buf.equals(first)) return false;
    this.restart();
    return true;
  }

  private async closeSession(): Promise<void> {
    const fd = this.fd;
    this.fd = undefined;
    if (fd === undefined) return;
    try {
      closeSync(fd);
    } catch {
      // already closed: nothing held
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
