// Newline-delimited JSON framing shared by the daemon and its clients. Splits on "\n" only (never readline,
// which also splits on U+2028/2029) and caps a frame so one bad peer cannot grow a buffer without bound.

/**
 * The one frame limit, the same for both sides and both directions (docs/socket-protocol.md, "Frames"): a frame
 * longer than this is refused by its reader. Replies and pushes over it go by reference (LARGE_PROTOCOL).
 */
export const MAX_FRAME_BYTES = 1024 * 1024;

/** The protocol a client names in hello to fetch frames over the limit by reference (frame.page). */
export const LARGE_PROTOCOL = 2;

/** Bytes of a held frame per frame.page reply (base64 makes it 4/3 of this, well inside the frame limit). */
export const PAGE_BYTES = 512 * 1024;

/** The most a client takes by reference in one frame. */
export const MAX_LARGE_BYTES = 64 * 1024 * 1024;

/** The first bytes of an oversized frame kept, to tell which request (or push) it was. */
const HEAD_BYTES = 256;

export type FrameEvent =
  | { kind: "frame"; text: string }
  | { kind: "oversized"; bytes: number; head: string }
  | { kind: "not-utf8" };

/**
 * The id (or the push method) an oversized frame opens with: every frame this package writes starts with `{"id":`
 * or `{"method":`, so the refusal can be tied to its request even though the frame is not read.
 */
export function frameHead(head: string): { id?: string | number; method?: string } {
  const id = /^\s*\{\s*"id"\s*:\s*(-?\d{1,15}|"(?:[^"\\]|\\.){0,200}")\s*,/.exec(head);
  if (id) {
    const v = JSON.parse(id[1]!) as string | number;
    return { id: v };
  }
  const m = /^\s*\{\s*"method"\s*:\s*"([A-Za-z0-9._-]{1,64})"/.exec(head);
  return m ? { method: m[1]! } : {};
}

/** The words of FRAME_TOO_LARGE: what was too large, and what to do about it. */
export function frameTooLargeMessage(what: string, bytes: number, fix: string, exact = false): string {
  return `${what} is ${bytes}${exact ? "" : "+"} bytes, over the ${MAX_FRAME_BYTES / (1024 * 1024)} MiB frame limit (docs/socket-protocol.md, "Frames"); ${fix}`;
}

// Fatal: a frame with invalid UTF-8 is refused, never silently patched with U+FFFD.
const utf8 = new TextDecoder("utf-8", { fatal: true });

export class FrameReader {
  private parts: Buffer[] = [];
  private size = 0;
  /** True while discarding the rest of an oversized frame up to its newline. */
  private skipping = false;
  private skipped = 0;

  constructor(private readonly maxBytes = MAX_FRAME_BYTES) {}

  push(chunk: Buffer): FrameEvent[] {
    const out: FrameEvent[] = [];
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(10, start);
      const end = nl === -1 ? chunk.length : nl;
      const piece = chunk.subarray(start, end);
      if (this.skipping) {
        this.skipped += piece.length;
      } else if (this.size + piece.length > this.maxBytes) {
        // Report at once (the peer may be waiting for a reply), then drop bytes up to the next newline.
        this.skipping = true;
        this.skipped = this.size + piece.length;
        const head = Buffer.concat([...this.parts, piece.subarray(0, HEAD_BYTES)]).subarray(0, HEAD_BYTES);
        this.parts = [];
        this.size = 0;
        out.push({ kind: "oversized", bytes: this.skipped, head: head.toString("utf8") });
      } else {
        this.parts.push(piece);
        this.size += piece.length;
      }
      if (nl === -1) break;
      if (this.skipping) {
        this.skipping = false;
        this.skipped = 0;
      } else {
        const bytes = Buffer.concat(this.parts);
        this.parts = [];
        this.size = 0;
        let text: string | undefined;
        try {
          text = utf8.decode(bytes).replace(/\r$/, "");
        } catch {
          out.push({ kind: "not-utf8" });
        }
        if (text !== undefined && text.trim() !== "") out.push({ kind: "frame", text });
      }
      start = nl + 1;
    }
    return out;
  }

  /** Bytes of the unfinished frame held now (what the daemon counts against its partial-frame budget). */
  get buffered(): number {
    return this.size;
  }

  /** True when an oversized frame is being discarded (no newline seen yet). */
  get discarding(): boolean {
    return this.skipping;
  }
}

export function encodeFrame(message: unknown): string {
  return JSON.stringify(message) + "\n";
}
