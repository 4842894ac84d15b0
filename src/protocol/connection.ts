// A served connection and a method's handler, as the daemon's methods and the board (which calls the same handlers)
// see them: the server side of the protocol table.
import type { Params, PushMethod, PushParams, RequestMethod, Result } from "./methods.js";

export type ClientKind = "cli" | "owner" | "child";

export interface Connection {
  readonly id: number;
  kind?: ClientKind;
  ownerId?: string;
  taskId?: string;
  /** The protocol the client said hello with (1 when it named none): 2 and later fetch large frames by reference. */
  protocol?: number;
  /** The hello being checked (an owner's proof is read from disk): requests that follow it wait for it. */
  helloing?: Promise<unknown>;
  /** A push, its params as the protocol table declares them (src/protocol/). */
  push<P extends PushMethod>(method: P, params: PushParams<P>): void;
  /** frame.page: a page of a frame held for this connection by reference (the daemon's server-large.ts). */
  page?(p: { ref: string; offset: number }): unknown;
  onClose(fn: () => void): void;
  readonly closed: boolean;
}

/** One method's handler: its params already checked against the method's schema, its result checked as it leaves. */
export type Handler<M extends RequestMethod> = (params: Params<M>, conn: Connection) => Result<M> | Promise<Result<M>>;

/** The daemon's methods, one handler each, typed by the protocol table (src/protocol/). */
export type HandlerTable = { [M in RequestMethod]: Handler<M> };
