// Who a connection is and what it may call: the hello handshake (a child proves its task token) and the access
// rules per method (child.* for children only, owner.* for owners only), then the method's handler.
import { DshError } from "../core/errors.js";
import { PROTOCOL_VERSION, type RequestMethod } from "./protocol.js";
import type { Connection, SocketServerOptions } from "./server-types.js";

export type HelloParams =
  | { kind: "cli" }
  | { kind: "owner"; ownerId: string; secret?: string }
  | { kind: "child"; taskId: string; token: string };

const CHILD_METHODS = new Set<string>(["child.event", "child.report"]);
/** Methods of the connection itself, open to every kind once it said hello. */
const CONNECTION_METHODS = new Set<string>(["daemon.status", "frame.page"]);

/**
 * Sets the connection's identity once: a child's token must match an open task, an owner must prove its id with the
 * secret issued to it (its first hello is issued one, returned this once as `secret`).
 */
export async function hello(p: HelloParams, conn: Connection, opts: SocketServerOptions): Promise<unknown> {
  if (conn.kind !== undefined || conn.helloing)
    throw new DshError("BAD_STATE", "hello was already sent on this connection; open a new one to change identity");
  let issued: string | undefined;
  if (p.kind === "owner" && opts.authenticateOwner) {
    const proving = opts.authenticateOwner(conn, p.ownerId, p.secret);
    conn.helloing = proving.catch(() => undefined);
    try {
      issued = (await proving).secret;
    } finally {
      delete conn.helloing;
    }
  }
  const protocol = (p as { protocol?: unknown }).protocol;
  conn.protocol = typeof protocol === "number" ? protocol : 1;
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
  return {
    daemonVersion: opts.version,
    protocol: PROTOCOL_VERSION,
    pid: process.pid,
    kind: p.kind,
    // Where this daemon listens: another machine's link forwards a Unix socket to it (ssh -L) instead of running a
    // bridge process per connection (src/remote/link-forward.ts).
    ...(p.kind === "cli" ? { socketPath: opts.socketPath } : {}),
    ...(issued !== undefined ? { secret: issued } : {}),
  };
}

/** Runs the method's handler when this connection's kind may call it. */
export async function dispatch(
  method: RequestMethod,
  p: unknown,
  conn: Connection,
  opts: SocketServerOptions,
): Promise<unknown> {
  // A request sent right behind its hello waits for the hello's check (an owner's proof is read from disk).
  if (conn.kind === undefined && conn.helloing) await conn.helloing;
  if (conn.kind === undefined) throw new DshError("UNAUTHORIZED", "send hello {kind} first");
  const childOnly = CHILD_METHODS.has(method);
  if (conn.kind === "child" && !childOnly && !CONNECTION_METHODS.has(method)) {
    throw new DshError(
      "FORBIDDEN",
      `a child may not call ${method}; children speak only for their own task through child.*`,
    );
  }
  if (conn.kind !== "child" && childOnly) throw new DshError("FORBIDDEN", `${method} is for child connections only`);
  if (conn.kind !== "owner" && method.startsWith("owner.")) {
    throw new DshError(
      "FORBIDDEN",
      `${method} is for owner connections only; say hello {kind:"owner", ownerId:<pi session id>} first`,
    );
  }
  if (method === "frame.page") {
    if (!conn.page) throw new DshError("UNKNOWN_METHOD", "frame.page is not served on this connection");
    return conn.page(p as { ref: string; offset: number });
  }
  const h = opts.handlers[method];
  if (!h) throw new DshError("UNKNOWN_METHOD", `${method} is not served by this daemon; upgrade dsh-herdr`);
  return await h(p, conn);
}
