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
}

export interface SocketServer {
  readonly connections: ReadonlySet<Connection>;
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
      if (c === 92) i++; // backslash: skip the escaped char
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
  let nextId = 1;

  const server: Server = createServer((socket) => {
    sockets.add(socket);
    const closers: (() => void)[] = [];
    const conn: Connection = {
      id: nextId++,
      closed: false,
      push(method, params) {
        if (!socket.destroyed) socket.write(encodeFrame({ method, params }));
      },
      onClose(fn) {
        closers.push(fn);
      },
    };
    connections.add(conn);
    const reader = new FrameReader();
    const reply = (msg: unknown) => {
      if (!socket.destroyed) socket.write(encodeFrame(msg));
    };
    const fail = (id: unknown, e: DshError) => reply({ id: id ?? null, error: e.toJSON() });

    socket.on("data", (chunk: Buffer) => {
      for (const ev of reader.push(chunk)) {
        if (ev.kind === "oversized") {
          fail(null, new DshError("FRAME_TOO_LARGE", `frame exceeds 1 MiB (${ev.bytes}+ bytes); send smaller requests (put large prompts in a file)`));
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
        fail(null, new DshError("BAD_REQUEST", `frame nests deeper than ${MAX_NESTING} levels; send flat params as documented in docs/socket-protocol.md`));
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
          throw new DshError("UNKNOWN_METHOD", `unknown method ${JSON.stringify(method)}; see docs/socket-protocol.md for the methods`);
        }
        const p = params === undefined ? {} : params;
        opts.schemas.checkParams(method, p);
        const result = method === "hello" ? hello(p as HelloParams) : await dispatch(method, p);
        opts.schemas.checkResult(method, result);
        reply({ id, result });
      } catch (e) {
        const err = asDshError(e);
        if (err.code === "INTERNAL") opts.log.error({ method, err: err.message, stack: (e as Error).stack }, "handler failed");
        fail(id, err);
      }
    }

    function hello(p: HelloParams): unknown {
      if (conn.kind !== undefined) throw new DshError("BAD_STATE", "hello was already sent on this connection; open a new one to change identity");
      if (p.kind === "child") {
        if (!opts.authenticateChild(p.taskId, p.token)) {
          throw new DshError("UNAUTHORIZED", `no open task ${p.taskId} with that token; a child must use the DSH_HERDR_TASK_ID and DSH_HERDR_TASK_TOKEN it was started with`);
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
        throw new DshError("FORBIDDEN", `a child may not call ${method}; children speak only for their own task through child.*`);
      }
      if (conn.kind !== "child" && childOnly) throw new DshError("FORBIDDEN", `${method} is for child connections only`);
      if (conn.kind !== "owner" && method.startsWith("owner.")) {
        throw new DshError("FORBIDDEN", `${method} is for owner connections only; say hello {kind:"owner", ownerId:<pi session id>} first`);
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
