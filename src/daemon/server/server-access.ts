// Who a connection is and what it may call: the hello handshake (a child proves its task token) and the access
// rules per method (child.* for children only, owner.* for owners only, an owner's per-task requests for its own
// tasks only), then the method's handler.
import { DshError } from "../../core/errors.js";
import { ownerLabel } from "./owner-label.js";
import { PROTOCOL_VERSION, type RequestMethod } from "../../protocol/methods.js";
import type { Connection, SocketServerOptions } from "./server-types.js";

export type HelloParams =
  | { kind: "cli" }
  | { kind: "owner"; ownerId: string; secret?: string }
  | { kind: "child"; taskId: string; token: string };

const CHILD_METHODS = new Set<string>(["child.event", "child.report"]);
/**
 * The tasks a per-task request names: an owner connection may name only its own (open or closed). task.abort reports
 * another owner's ids as foreign_ids, task.subscribe and task.follow push only the owner's own statuses, and
 * task.list is narrowed to the owner's own tasks; task.land has its own rule (owner.mayLand first, then ownership).
 */
const TASKS_NAMED: Partial<Record<string, (p: { taskId?: unknown; taskIds?: unknown }) => unknown[]>> = {
  "task.get": (p) => [p.taskId],
  "task.patch": (p) => [p.taskId],
  "task.check": (p) => [p.taskId],
  "task.respond": (p) => [p.taskId],
  "task.close": (p) => [p.taskId],
  "task.fetch": (p) => [p.taskId],
  "task.wait": (p) => (Array.isArray(p.taskIds) ? p.taskIds : []),
};

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
    // bridge process per connection (src/link/link-forward.ts).
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
  if (conn.kind === "owner" && opts.taskOwner) p = await ownTasksOnly(method, p, conn, opts.taskOwner);
  if (method === "frame.page") {
    if (!conn.page) throw new DshError("UNKNOWN_METHOD", "frame.page is not served on this connection");
    return conn.page(p as { ref: string; offset: number });
  }
  const h = opts.handlers[method];
  if (!h) throw new DshError("UNKNOWN_METHOD", `${method} is not served by this daemon; upgrade dsh-herdr`);
  // p passed this method's params schema (server-request.ts), which is what Params<method> is generated from.
  return await (h as (params: unknown, conn: Connection) => unknown)(p, conn);
}

/**
 * An owner connection acts on and reads only its own tasks: a per-task request naming another owner's task is
 * NOT_OWNER before its handler runs (an unknown id is left to the handler: TASK_NOT_FOUND), and task.list lists the
 * owner's own tasks. The CLI (a person) sees and acts on every task.
 */
async function ownTasksOnly(
  method: string,
  p: unknown,
  conn: Connection,
  taskOwner: NonNullable<SocketServerOptions["taskOwner"]>,
): Promise<unknown> {
  const me = conn.ownerId!;
  const params = (typeof p === "object" && p !== null ? p : {}) as {
    owner?: unknown;
    taskId?: unknown;
    taskIds?: unknown;
  };
  if (method === "task.list") {
    if (params.owner !== undefined && params.owner !== me && params.owner !== ownerLabel(me))
      throw new DshError(
        "NOT_OWNER",
        `an owner connection lists only its own tasks; drop params.owner (another owner's tasks are listed to the CLI: dsh-herdr list --owner ${String(params.owner)})`,
      );
    return { ...params, owner: me };
  }
  const named = TASKS_NAMED[method]?.(params) ?? [];
  for (const id of named) {
    if (typeof id !== "string") continue;
    const owner = await taskOwner(id);
    if (owner !== undefined && owner !== me)
      throw new DshError(
        "NOT_OWNER",
        `task ${id} belongs to owner ${owner === "cli" ? "cli" : ownerLabel(owner)}; only its owner (or the CLI: dsh-herdr show ${id}) may read it or act on it`,
      );
  }
  return p;
}
