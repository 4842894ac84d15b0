// One chokidar watcher per task directory: session.jsonl and result.md appear and grow there. Only new session
// bytes are read (the SessionReader keeps the offset and the partial line); reads are serialized.
import { watch, type FSWatcher } from "chokidar";
import { open, readFile, stat } from "node:fs/promises";
import { basename } from "node:path";
import { SessionReader, type SessionFacts } from "../core/session-reader.js";
import { parseResultMd, RESULT_MD_MAX_BYTES, type ParsedResultMd } from "../core/result-md.js";

export interface TaskFilesOptions {
  taskDir: string;
  sessionPath: string;
  resultPath: string;
  onChange(what: "session" | "result"): void;
}

const CHUNK = 1024 * 1024;

export class TaskFiles {
  readonly reader: SessionReader;
  private watcher: FSWatcher | undefined;
  private chain: Promise<void> = Promise.resolve();
  private resultMd: ParsedResultMd | undefined;
  private resultText: string | undefined;
  sessionExists = false;
  sessionMtimeMs = 0;

  constructor(private readonly opts: TaskFilesOptions) {
    this.reader = new SessionReader();
  }

  start(): void {
    const { taskDir, sessionPath, resultPath } = this.opts;
    const names = new Set([basename(sessionPath), basename(resultPath)]);
    this.watcher = watch(taskDir, {
      depth: 0,
      ignoreInitial: false,
      ignored: (p: string) => p !== taskDir && !names.has(basename(p)),
    });
    const on = (p: string) => {
      if (p === sessionPath) void this.readSession().then((moved) => moved && this.opts.onChange("session"));
      else if (p === resultPath) void this.readResult().then((changed) => changed && this.opts.onChange("result"));
    };
    this.watcher.on("add", on).on("change", on).on("unlink", (p) => {
      if (p === resultPath) {
        this.resultMd = undefined;
        this.resultText = undefined;
        this.opts.onChange("result");
      }
    });
  }

  async stop(): Promise<void> {
    await this.watcher?.close();
    this.watcher = undefined;
  }

  facts(): SessionFacts | undefined {
    return this.sessionExists ? this.reader.facts() : undefined;
  }

  get result(): ParsedResultMd | undefined {
    return this.resultMd;
  }

  /** Read the session's new bytes now (also called on child events, which can beat the watcher). */
  readSession(): Promise<boolean> {
    const run = this.chain.then(() => this.readNewBytes());
    this.chain = run.then(() => undefined, () => undefined);
    return run.catch(() => false);
  }

  private async readNewBytes(): Promise<boolean> {
    const fh = await open(this.opts.sessionPath, "r").catch(() => null);
    if (!fh) return false;
    try {
      const st = await fh.stat();
      this.sessionExists = true;
      this.sessionMtimeMs = st.mtimeMs;
      // The reader holds an unfinished last line itself: resume after every byte already handed to it.
      let pos = this.reader.offset + this.pendingBytes;
      let moved = false;
      const buf = Buffer.alloc(CHUNK);
      while (pos < st.size) {
        const { bytesRead } = await fh.read(buf, 0, Math.min(CHUNK, st.size - pos), pos);
        if (bytesRead === 0) break;
        this.reader.push(buf.subarray(0, bytesRead));
        pos += bytesRead;
        moved = true;
      }
      this.pendingBytes = pos - this.reader.offset;
      return moved;
    } finally {
      await fh.close();
    }
  }
  /** Bytes handed to the reader that are not yet a complete line. */
  private pendingBytes = 0;

  async readResult(): Promise<boolean> {
    const text = await readFile(this.opts.resultPath, "utf8").catch(() => undefined);
    if (text === this.resultText) return false;
    this.resultText = text;
    this.resultMd = text === undefined ? undefined : parseResultMd(text, { maxBytes: RESULT_MD_MAX_BYTES });
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
