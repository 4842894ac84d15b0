// Frames over the limit, sent by reference: a reply or push whose frame would pass MAX_FRAME_BYTES is held here and
// sent as `{id, large:{ref, bytes}}` (a push: `{method, large}`); the client fetches the held frame's bytes with
// `frame.page` in pages that each fit a frame, and reads them as the frame it stands for. A client of protocol 1
// (which cannot fetch) gets FRAME_TOO_LARGE for its request, and a push it could not take is logged by name: no
// frame is ever dropped without a word. What one connection may hold is bounded (docs/socket-protocol.md).
import { DshError } from "../../core/errors.js";
import { MAX_FRAME_BYTES, PAGE_BYTES, encodeFrame, LARGE_PROTOCOL } from "../../protocol/frames.js";
import type { Logger } from "./server-types.js";

export interface LargeLimits {
  /** Bytes of large frames one connection may hold unfetched; past it a large reply is FRAME_TOO_LARGE. */
  maxHeldBytes: number;
  /** A held frame not fetched from for this long is dropped (logged). */
  ttlMs: number;
}

export const DEFAULT_LARGE_LIMITS: LargeLimits = { maxHeldBytes: 64 * 1024 * 1024, ttlMs: 60_000 };

export interface PageResult {
  ref: string;
  offset: number;
  /** The held frame's whole size in bytes. */
  bytes: number;
  /** This page's bytes, base64. */
  data: string;
  /** The last page: the held frame is released. */
  done: boolean;
}

interface Held {
  buf: Buffer;
  what: string;
  timer: NodeJS.Timeout;
}

const mib = (n: number) => `${Math.round((n / (1024 * 1024)) * 10) / 10} MiB`;

export class LargeFrames {
  private readonly held = new Map<string, Held>();
  private heldBytes = 0;
  private next = 1;

  constructor(
    private readonly conn: number,
    private readonly log: Logger,
    private readonly limits: LargeLimits = DEFAULT_LARGE_LIMITS,
  ) {}

  /**
   * The frame to write for `msg` (a reply `{id, result|error}` or a push `{method, params}`): itself when it fits,
   * else a reference to it, else (a client that cannot fetch, or too much held) an error reply for a request and
   * nothing for a push; both logged as FRAME_TOO_LARGE.
   */
  frameFor(msg: { id?: unknown; method?: unknown; [k: string]: unknown }, protocol: number): string | undefined {
    const text = encodeFrame(msg);
    const bytes = Buffer.byteLength(text);
    if (bytes <= MAX_FRAME_BYTES) return text;
    const isReply = msg.id !== undefined;
    const what = isReply ? `the reply to request ${JSON.stringify(msg.id)}` : `a ${String(msg.method)} push`;
    const refuse = (why: string, fix: string) => {
      this.log.warn({ conn: this.conn, code: "FRAME_TOO_LARGE", bytes, what }, `frame not sent: ${why}`);
      if (!isReply) return undefined;
      const e = new DshError(
        "FRAME_TOO_LARGE",
        `${what} is ${bytes} bytes, over the ${mib(MAX_FRAME_BYTES)} frame limit, and ${why}; ${fix} (docs/socket-protocol.md, "Frames")`,
      );
      return encodeFrame({ id: msg.id, error: e.toWire() });
    };
    if (protocol < LARGE_PROTOCOL)
      return refuse(
        `this client said hello with protocol ${protocol}, which cannot fetch it by reference`,
        `say hello with protocol ${LARGE_PROTOCOL} and fetch it with frame.page, or ask for less`,
      );
    if (this.heldBytes + bytes > this.limits.maxHeldBytes)
      return refuse(
        `this connection already holds ${this.heldBytes} bytes of large frames not yet fetched (at most ${mib(this.limits.maxHeldBytes)})`,
        "fetch those with frame.page first",
      );
    const ref = `L${this.next++}`;
    const held: Held = { buf: Buffer.from(text.slice(0, -1), "utf8"), what, timer: this.expiry(ref) };
    this.held.set(ref, held);
    this.heldBytes += held.buf.length;
    this.log.debug({ conn: this.conn, ref, bytes, what }, "large frame held for frame.page");
    const large = { ref, bytes: held.buf.length };
    return encodeFrame(isReply ? { id: msg.id, large } : { method: msg.method, large });
  }

  /** frame.page: the held frame's bytes from offset, one page; the last page releases it. */
  page(p: { ref: string; offset: number }): PageResult {
    const h = this.held.get(p.ref);
    if (!h)
      throw new DshError(
        "BAD_PARAMS",
        `no large frame ${p.ref} on this connection (its last page was fetched, or it went unfetched for ${this.limits.ttlMs / 1000} s); send the request again`,
      );
    if (p.offset > h.buf.length)
      throw new DshError("BAD_PARAMS", `offset ${p.offset} is past the end of ${p.ref} (${h.buf.length} bytes)`);
    const end = Math.min(h.buf.length, p.offset + PAGE_BYTES);
    const done = end === h.buf.length;
    clearTimeout(h.timer);
    if (done) this.release(p.ref);
    else h.timer = this.expiry(p.ref);
    return {
      ref: p.ref,
      offset: p.offset,
      bytes: h.buf.length,
      data: h.buf.subarray(p.offset, end).toString("base64"),
      done,
    };
  }

  /** The connection closed: everything held goes. */
  clear(): void {
    for (const ref of [...this.held.keys()]) this.release(ref);
  }

  private expiry(ref: string): NodeJS.Timeout {
    const t = setTimeout(() => {
      const h = this.held.get(ref);
      if (!h) return;
      this.log.warn(
        { conn: this.conn, code: "FRAME_TOO_LARGE", ref, bytes: h.buf.length, what: h.what },
        `large frame dropped: not fetched with frame.page within ${this.limits.ttlMs} ms`,
      );
      this.release(ref);
    }, this.limits.ttlMs);
    t.unref();
    return t;
  }

  private release(ref: string): void {
    const h = this.held.get(ref);
    if (!h) return;
    clearTimeout(h.timer);
    this.held.delete(ref);
    this.heldBytes -= h.buf.length;
  }
}
