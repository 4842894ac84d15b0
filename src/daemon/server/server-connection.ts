// One client connection of the socket server: framing (src/protocol/frames.ts) and what the client may cost (partial
// frames, unsent bytes); each whole frame goes on to the request handler. A bad frame costs only an error reply.
import type { Socket } from "node:net";
import { DshError } from "../../core/errors.js";
import { FrameReader, frameHead, frameTooLargeMessage } from "../../protocol/frames.js";
import { LargeFrames } from "./server-large.js";
import type { Connection, ConnectionLimits, Logger } from "./server-types.js";

/** Bytes of unfinished frames held across all connections: shared by them, bounded by maxPartialBytes. */
export interface PartialPool {
  bytes: number;
}

export interface ConnectionSetup {
  id: number;
  limits: ConnectionLimits;
  log: Logger;
  pool: PartialPool;
  /** A whole frame arrived; send writes one reply frame (nothing once the socket is gone). */
  onFrame(text: string, conn: Connection, send: (msg: unknown) => void): void;
  /** The socket closed: runs before `closed` is set and the connection's close hooks run. */
  onClosed(conn: Connection): void;
}

/** Serves one accepted socket: returns its Connection (pushes, close hooks). */
export function serveConnection(socket: Socket, s: ConnectionSetup): Connection {
  const { limits, log, pool } = s;
  const closers: (() => void)[] = [];
  const large = new LargeFrames(s.id, log);
  const conn: Connection = {
    id: s.id,
    closed: false,
    push(method, params) {
      if (socket.destroyed) return;
      if (socket.writableLength > 2 * limits.maxUnsentBytes) {
        // A subscriber that does not read: its queue cannot grow without end, and an error frame would wait behind it.
        log.warn(
          { conn: conn.id, unsent: socket.writableLength },
          "connection closed: it does not read its pushes (SLOW_READER)",
        );
        socket.destroy();
        return;
      }
      // Over the frame limit: by reference, or logged by name (server-large.ts).
      const frame = large.frameFor({ method, params }, conn.protocol ?? 1);
      if (frame === undefined) return;
      socket.write(frame);
      throttle();
    },
    page: (p) => large.page(p),
    onClose(fn) {
      closers.push(fn);
    },
  };
  const reader = new FrameReader();
  /** This connection's share of pool.bytes. */
  let held = 0;
  let paused = false;
  let refused = false;
  let partialTimer: NodeJS.Timeout | undefined;
  // Replies wait in socket.writableLength while the client does not read: stop reading its requests meanwhile.
  const throttle = () => {
    if (paused || socket.destroyed || socket.writableLength <= limits.maxUnsentBytes) return;
    paused = true;
    socket.pause();
    socket.once("drain", () => {
      paused = false;
      if (!refused) socket.resume();
    });
  };
  const reply = (msg: unknown) => {
    if (socket.destroyed) return;
    const frame = large.frameFor(msg as { id?: unknown; [k: string]: unknown }, conn.protocol ?? 1);
    if (frame === undefined) return;
    socket.write(frame);
    throttle();
  };
  const fail = (id: unknown, e: DshError) => reply({ id: id ?? null, error: e.toWire() });
  /** Refuse the connection: the error goes out, nothing more is read or buffered from it. */
  const refuse = (e: DshError) => {
    if (refused) return;
    refused = true;
    socket.pause(); // read no more of it: its bytes stay in the kernel, not in our heap
    release();
    fail(null, e);
    socket.end();
    // A peer that never reads the refusal would keep the socket open: it goes anyway.
    setTimeout(() => socket.destroy(), 2000).unref();
    log.warn({ conn: conn.id, code: e.code }, "connection refused");
  };
  const release = () => {
    pool.bytes -= held;
    held = 0;
    if (partialTimer) clearTimeout(partialTimer);
    partialTimer = undefined;
  };
  const armPartialTimer = () => {
    partialTimer = setTimeout(() => {
      partialTimer = undefined;
      // Not its fault while we are the ones not reading.
      if (paused) return armPartialTimer();
      refuse(
        new DshError(
          "TIMEOUT",
          `no complete frame within ${limits.partialFrameTimeoutMs} ms; end each request with a newline`,
        ),
      );
    }, limits.partialFrameTimeoutMs);
    partialTimer.unref();
  };

  socket.on("data", (chunk: Buffer) => {
    if (refused) return;
    const events = reader.push(chunk);
    const now = reader.buffered;
    pool.bytes += now - held;
    held = now;
    if (held > 0 || reader.discarding) {
      if (partialTimer === undefined) armPartialTimer();
    } else if (partialTimer !== undefined) {
      clearTimeout(partialTimer);
      partialTimer = undefined;
    }
    if (pool.bytes > limits.maxPartialBytes) {
      refuse(
        new DshError(
          "CONNECTION_LIMIT",
          `the daemon holds ${limits.maxPartialBytes} bytes of unfinished frames across its clients; send whole frames (one JSON line each) and connect again`,
        ),
      );
      return;
    }
    for (const ev of events) {
      if (ev.kind === "oversized") {
        // Answered with the request's id when its first bytes name it (every client of ours writes the id first).
        const head = frameHead(ev.head);
        const what = head.id !== undefined ? `request ${JSON.stringify(head.id)}` : "a frame";
        log.warn(
          {
            conn: conn.id,
            code: "FRAME_TOO_LARGE",
            bytes: ev.bytes,
            ...(head.id !== undefined ? { id: head.id } : {}),
          },
          "request frame refused: over the frame limit",
        );
        fail(
          head.id ?? null,
          new DshError(
            "FRAME_TOO_LARGE",
            frameTooLargeMessage(
              what,
              ev.bytes,
              "send less per request: a prompt or message that large does not fit one; put the bulk in a file the task can read and name the file in the prompt",
            ),
          ),
        );
        continue;
      }
      if (ev.kind === "not-utf8") {
        fail(null, new DshError("BAD_REQUEST", "frame is not valid UTF-8; encode each request as UTF-8 JSON"));
        continue;
      }
      s.onFrame(ev.text, conn, reply);
    }
  });
  socket.on("error", () => socket.destroy());
  socket.on("close", () => {
    release();
    large.clear();
    s.onClosed(conn);
    (conn as { closed: boolean }).closed = true;
    for (const fn of closers) {
      try {
        fn();
      } catch (e) {
        log.warn({ err: String(e) }, "connection close hook failed");
      }
    }
  });
  return conn;
}
