// Incremental reader of a pi session JSONL (reference/pi.md §1). Fed raw bytes as the file grows; keeps only a byte
// offset, a partial-line buffer and running facts (session-facts.ts). Splits on "\n" bytes only (never U+2028), so a
// multi-byte character split across chunks is decoded whole. Unknown entry types and fields are tolerated (newer pi).
import {
  SessionFactsBuilder,
  type SessionEntry,
  type SessionFacts as BuiltFacts,
  type SessionFactsOptions,
} from "./session-facts.js";

export {
  isRetryableError,
  PI_RETRYABLE_ERROR,
  sessionErrorOf,
  type CycleFacts,
  type SessionEntry,
  type ToolCallFact,
  type ToolResultFact,
  type UsageFacts,
} from "./session-facts.js";

export interface SessionFacts extends BuiltFacts {
  /** Times the file was found truncated or replaced and read again from its start (absent: never). */
  restarts?: number;
}

export interface SessionReaderOptions extends SessionFactsOptions {
  /** A line over this many bytes is skipped (and counted invalid) without being held whole. Default 16 MiB. */
  maxLineBytes?: number;
}

const NEWLINE = 0x0a;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export class SessionReader {
  private readonly maxLineBytes: number;
  private readonly decoder = new TextDecoder();
  private pending: Uint8Array[] = [];
  /** Bytes of the current, unfinished line (held or skipped). */
  private lineBytes = 0;
  /** Inside an over-long line: drop bytes until its newline. */
  private skipping = false;
  private consumed = 0;
  private f: SessionFactsBuilder;
  private restarts = 0;

  constructor(private readonly opts: SessionReaderOptions = {}) {
    this.maxLineBytes = opts.maxLineBytes ?? 16 * 1024 * 1024;
    this.f = new SessionFactsBuilder(opts);
  }

  /**
   * The file was truncated or replaced: forget everything read and take the next bytes as the file from offset 0.
   * Facts (usage, final text, cycle) are then recomputed from the new content, not frozen at the old one's.
   */
  restart(): void {
    this.f = new SessionFactsBuilder(this.opts);
    this.pending = [];
    this.lineBytes = 0;
    this.skipping = false;
    this.consumed = 0;
    this.restarts++;
  }

  /** Bytes consumed into complete lines: where to resume reading the file. */
  get offset(): number {
    return this.consumed;
  }

  push(chunk: Uint8Array): SessionEntry[] {
    const out: SessionEntry[] = [];
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(NEWLINE, start);
      const end = nl < 0 ? chunk.length : nl;
      const piece = chunk.subarray(start, end);
      this.lineBytes += piece.length;
      if (!this.skipping) {
        if (this.lineBytes > this.maxLineBytes) {
          this.skipping = true; // drop what we held; the line is counted once when it ends
          this.pending = [];
        } else if (piece.length > 0) {
          // A copy: the caller may reuse its buffer (a Buffer's own slice() is a view, not a copy).
          this.pending.push(new Uint8Array(piece));
        }
      }
      if (nl < 0) break;
      this.consumed += this.lineBytes + 1;
      if (this.skipping) {
        this.f.invalidLine();
      } else {
        const entry = this.parseLine(this.takeLine());
        if (entry !== undefined) out.push(entry);
      }
      this.skipping = false;
      this.pending = [];
      this.lineBytes = 0;
      start = nl + 1;
    }
    return out;
  }

  private takeLine(): string {
    if (this.pending.length === 1) return this.decoder.decode(this.pending[0]);
    const buf = new Uint8Array(this.lineBytes);
    let at = 0;
    for (const p of this.pending) {
      buf.set(p, at);
      at += p.length;
    }
    return this.decoder.decode(buf);
  }

  private parseLine(raw: string): SessionEntry | undefined {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (line.trim() === "") return undefined;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      this.f.invalidLine();
      return undefined;
    }
    if (!isRecord(v) || typeof v.type !== "string") {
      this.f.invalidLine();
      return undefined;
    }
    const entry = v as SessionEntry;
    this.f.apply(entry);
    return entry;
  }

  /** Start a new cycle now (e.g. the daemon sent a follow-up): per-cycle usage and text restart from zero. */
  resetCycle(): void {
    this.f.resetCycle();
  }

  facts(): SessionFacts {
    const f: SessionFacts = this.f.facts();
    return this.restarts > 0 ? { ...f, restarts: this.restarts } : f;
  }
}
