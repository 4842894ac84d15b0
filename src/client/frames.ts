// Newline-delimited JSON framing shared by the daemon and its clients. Splits on "\n" only (never readline,
// which also splits on U+2028/2029) and caps a frame so one bad peer cannot grow a buffer without bound.

export const MAX_FRAME_BYTES = 1024 * 1024;

export type FrameEvent = { kind: "frame"; text: string } | { kind: "oversized"; bytes: number } | { kind: "not-utf8" };

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
        this.parts = [];
        this.size = 0;
        out.push({ kind: "oversized", bytes: this.skipped });
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
