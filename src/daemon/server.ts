// The Unix socket server: framing, hello handshake, access rules, params/result validation, error replies.
// A bad frame costs only an error reply; the connection and the daemon live on.
import { createServer, type Server, type Socket } from "node:net";
import { chmodSync, existsSync, unlinkSync } from "node:fs";
import { DshError, asDshError } from "../core/errors.js";
import { FrameReader, encodeFrame } from "../client/frames.js";
import { PROTOCOL_VERSION, type ProtocolSchemas, type RequestMethod } from "./protocol.js";

export type ClientKind = "cli" | "owner" | "child";

export interface Connection {
  readonly id: number;
  kind?: ClientKind;
  ownerId?: string;
  taskId?: string;
  push(method: string, params: unknown): void;
  onClose(fn: () => void): void;
  readonly closed: boolean;
}

export type Handler = (params: any, conn: Connection) => unknown;

export interface Logger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

export interface SocketServerOptions {
  socketPath: string;
  schemas: ProtocolSchemas;
  handlers: Partial<Record<RequestMethod, Handler>>;
  /** True when token is the per-task token of taskId. */
  authenticateChild(taskId: string, token: string): boolean;
  onChildConnected?(conn: Connection): void;
  version: string;
  log: Logger;
  limits?: Partial<ConnectionLimits>;
}

/** What one client may cost the daemon; past a bound it is slowed down or closed, never buffered without end. */
export interface ConnectionLimits {
  /** Concurrent connections; one more is refused with CONNECTION_LIMIT. */
  maxConnections: number;
  /** Bytes of unfinished frames held across all connections; the connection that passes it is closed. */
  maxPartialBytes: number;
  /** A connection holding part of a frame this long without completing one is closed (TIMEOUT). */
  partialFrameTimeoutMs: number;
  /** Unsent bytes to one connection: past it the daemon stops reading its requests until it reads; pushes past twice it close it. */
  maxUnsentBytes: number;
}

export const DEFAULT_LIMITS: ConnectionLimits = {
  maxConnections: 1024,
  maxPartialBytes: 32 * 1024 * 1024,
  partialFrameTimeoutMs: 30_000,
  maxUnsentBytes: 8 * 1024 * 1024,
};

export interface SocketServer {
  readonly connections: ReadonlySet<Connection>;
  /** Bytes of unfinished frames held across all connections now. */
  readonly partialBytes: number;
  close(): Promise<void>;
}

const MAX_NESTING = 64;

/** Deepest [ / { nesting of a JSON text, ignoring brackets inside strings; one pass, no recursion. */
export function nestingDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92)
        i++; // backslash: skip the escaped char
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 91 || c === 123) max = Math.max(max, ++depth);
    else if (c === 93 || c === 125) depth--;
  }
  return max;
}

const CHILD_METHODS = new Set<string>(["child.event", "child.report"]);

export async function startSocketServer(opts: SocketServerOptions): Promise<SocketServer> {
  const connections = new Set<Connection>();
  const sockets = new Set<Socket>();
  const limits: ConnectionLimits = { ...DEFAULT_LIMITS, ...(opts.limits ?? {}) };
  let partialBytes = 0;
  let nextId = 1;

  const server: Server = createServer((socket) => {
    if (sockets.size >= limits.maxConnections) {
      socket.on("error", () => socket.destroy());
      const e = new DshError(
        "CONNECTION_LIMIT",
        `the daemon already serves ${limits.maxConnections} connections; close idle clients and connect again`,
      );
      socket.end(encodeFrame({ id: null, error: e.toJSON() }));
      setTimeout(() => socket.destroy(), 1000).unref();
      opts.log.warn({ connections: sockets.size }, "connection refused: too many connections");
      return;
    }
    sockets.add(socket);
    const closers: (() => void)[] = [];
    const conn: Connection = {
      id: nextId++,
      closed: false,
      push(method, params) {
        if (socket.destroyed) return;
        if (socket.writableLength > 2 * limits.maxUnsentBytes) {
          // A subscriber that does not read: its queue cannot grow without end, and an error frame would wait behind it.
          opts.log.warn(
            { conn: conn.id, unsent: socket.writableLength },
            "connection closed: it does not read its pushes (SLOW_READER)",
          );
          socket.destroy();
          return;
        }
        socket.write(encodeFrame({ method, params }));
        throttle();
      },
      onClose(fn) {
        closers.push(fn);
      },
    };
    connections.add(conn);
    const reader = new FrameReader();
    /** This connection's share of partialBytes. */
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
      socket.write(encodeFrame(msg));
      throttle();
    };
    const fail = (id: unknown, e: DshError) => reply({ id: id ?? null, error: e.toJSON() });
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
      opts.log.warn({ conn: conn.id, code: e.code }, "connection refused");
    };
    const release = () => {
      partialBytes -= held;
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
      partialBytes += now - held;
      held = now;
      if (held > 0 || reader.discarding) {
        if (partialTimer === undefined) armPartialTimer();
      } else if (partialTimer !== undefined) {
        clearTimeout(partialTimer);
        partialTimer = undefined;
      }
      if (partialBytes > limits.maxPartialBytes) {
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
          fail(
            null,
            new DshError(
              "FRAME_TOO_LARGE",
              `frame exceeds 1 MiB (${ev.bytes}+ bytes); send smaller requests (put large prompts in a file)`,
            ),
          );
          continue;
        }
        if (ev.kind === "not-utf8") {
          fail(null, new DshError("BAD_REQUEST", "frame is not valid UTF-8; encode each request as UTF-8 JSON"));
          continue;
        }
        void handleFrame(ev.text);
      }
    });
    socket.on("error", () => socket.destroy());
    socket.on("close", () => {
      release();
      sockets.delete(socket);
      connections.delete(conn);
      (conn as { closed: boolean }).closed = true;
      for (const fn of closers) {
        try {
          fn();
        } catch (e) {
          opts.log.warn({ err: String(e) }, "connection close hook failed");
        }
      }
    });

    async function handleFrame(text: string): Promise<void> {
      let msg: unknown;
      try {
        msg = JSON.parse(text);
      } catch {
        fail(null, new DshError("BAD_REQUEST", "frame is not valid JSON; send one JSON object per line"));
        return;
      }
      if (nestingDepth(text) > MAX_NESTING) {
        // Deep values would overflow the stack of whatever walks them later (logging, journaling, schemas).
        fail(
          null,
          new DshError(
            "BAD_REQUEST",
            `frame nests deeper than ${MAX_NESTING} levels; send flat params as documented in docs/socket-protocol.md`,
          ),
        );
        return;
      }
      if (typeof msg !== "object" || msg === null || Array.isArray(msg)) {
        fail(null, new DshError("BAD_REQUEST", "frame must be a JSON object {id, method, params}"));
        return;
      }
      const { id, method, params } = msg as { id?: unknown; method?: unknown; params?: unknown };
      if (typeof id !== "string" && typeof id !== "number") {
        fail(null, new DshError("BAD_REQUEST", "request needs an id (string or number) so the reply can be matched"));
        return;
      }
      try {
        if (typeof method !== "string" || !opts.schemas.isMethod(method)) {
          throw new DshError(
            "UNKNOWN_METHOD",
            `unknown method ${JSON.stringify(method)}; see docs/socket-protocol.md for the methods`,
          );
        }
        const p = params === undefined ? {} : params;
        opts.schemas.checkParams(method, p);
        const result = method === "hello" ? hello(p as HelloParams) : await dispatch(method, p);
        opts.schemas.checkResult(method, result);
        reply({ id, result });
      } catch (e) {
        const err = asDshError(e);
        if (err.code === "INTERNAL")
          opts.log.error({ method, err: err.message, stack: (e as Error).stack }, "handler failed");
        fail(id, err);
      }
    }

    function hello(p: HelloParams): unknown {
      if (conn.kind !== undefined)
        throw new DshError("BAD_STATE", "hello was already sent on this connection; open a new one to change identity");
      if (p.kind === "child") {
        if (!opts.authenticateChild(p.taskId, p.token)) {
          throw new DshError(
            "UNAUTHORIZED",
            `no open task ${p.taskId} with that token; a child must use the DSH_HERDR_TASK_ID and DSH_HERDR_TASK_TOKEN it was started with`,
          );
        }
        conn.taskId = p.taskId;
      }
      if (p.kind === "owner") conn.ownerId = p.ownerId;
      conn.kind = p.kind;
      if (p.kind === "child") queueMicrotask(() => opts.onChildConnected?.(conn));
      return { daemonVersion: opts.version, protocol: PROTOCOL_VERSION, pid: process.pid, kind: p.kind };
    }

    async function dispatch(method: RequestMethod, p: unknown): Promise<unknown> {
      if (conn.kind === undefined) throw new DshError("UNAUTHORIZED", "send hello {kind} first");
      const childOnly = CHILD_METHODS.has(method);
      if (conn.kind === "child" && !childOnly && method !== "daemon.status") {
        throw new DshError(
          "FORBIDDEN",
          `a child may not call ${method}; children speak only for their own task through child.*`,
        );
      }
      if (conn.kind !== "child" && childOnly)
        throw new DshError("FORBIDDEN", `${method} is for child connections only`);
      if (conn.kind !== "owner" && method.startsWith("owner.")) {
        throw new DshError(
          "FORBIDDEN",
          `${method} is for owner connections only; say hello {kind:"owner", ownerId:<pi session id>} first`,
        );
      }
      const h = opts.handlers[method];
      if (!h) throw new DshError("UNKNOWN_METHOD", `${method} is not served by this daemon; upgrade dsh-herdr`);
      return await h(p, conn);
    }
  });

  if (existsSync(opts.socketPath)) unlinkSync(opts.socketPath);
  // Owner-only from the first moment: the umask covers the window before chmod.
  const oldUmask = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(opts.socketPath, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } finally {
    process.umask(oldUmask);
  }
  chmodSync(opts.socketPath, 0o600);

  return {
    connections,
    get partialBytes() {
      return partialBytes;
    },
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
      try {
        unlinkSync(opts.socketPath);
      } catch {
        /* already gone */
      }
    },
  };
}

type HelloParams =
  | { kind: "cli" }
  | { kind: "owner"; ownerId: string }
  | { kind: "child"; taskId: string; token: string };
