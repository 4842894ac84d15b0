// The socket server's vocabulary: a client connection, a method handler, the logger, the options and the bounds
// one client may cost; shared by the server's parts and by the method handlers.
import type { ProtocolSchemas } from "../../protocol/schemas.js";

export type { ClientKind, Connection, Handler, HandlerTable } from "../../protocol/connection.js";
export type { Logger } from "../../core/logger.js";
import type { Connection, HandlerTable } from "../../protocol/connection.js";
import type { Logger } from "../../core/logger.js";

export interface SocketServerOptions {
  socketPath: string;
  schemas: ProtocolSchemas;
  handlers: Partial<HandlerTable>;
  /** True when token is the per-task token of taskId. */
  authenticateChild(taskId: string, token: string): boolean;
  /**
   * An owner's hello: resolves when `secret` proves ownerId (with `secret` set when one was issued to it now),
   * throws NOT_OWNER otherwise. Without it every owner hello is taken at its word (unit tests of other parts).
   */
  authenticateOwner?(conn: Connection, ownerId: string, secret: string | undefined): Promise<{ secret?: string }>;
  onChildConnected?(conn: Connection): void;
  /**
   * The owner of a task (undefined: no such task here). With it an owner connection's per-task requests name only its
   * own tasks (NOT_OWNER otherwise) and its task.list lists only its own (src/daemon/server/server-access.ts).
   */
  taskOwner?(taskId: string): string | undefined | Promise<string | undefined>;
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

export interface SocketServer {
  readonly connections: ReadonlySet<Connection>;
  /** Bytes of unfinished frames held across all connections now. */
  readonly partialBytes: number;
  close(): Promise<void>;
}
