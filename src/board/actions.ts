// The board's one way into the daemon: every read and every act goes through the daemon's own method handlers (the
// same table the socket serves), as a person at the CLI would call them, so the rules (states, ownership, landing)
// and the answers (results, error codes) are the daemon's. The board adds one rule of its own: an owner pi's tasks
// are read-only here unless config board.mayActOnOwnerTasks allows a person to act on them.
import { DshError } from "../core/errors.js";
import type { AgentResult } from "../core/types.js";
import type { Params, RequestMethod, Result } from "../protocol/methods.js";
import type { ProtocolSchemas } from "../protocol/schemas.js";
import type { Connection, HandlerTable } from "../protocol/connection.js";

/** The daemon's handler table (the socket's own methods, hello and frame.page, are not the board's to call). */
export type Handlers = Omit<HandlerTable, "hello" | "frame.page">;
type BoardMethod = keyof Handlers;
export type LandStrategy = NonNullable<Params<"task.land">["strategy"]>;

export interface BoardActionsDeps {
  handlers: Handlers;
  /** The socket's own parameter schemas (the daemon's instance, read once at its start): the board's calls are checked as a socket request's are. */
  schemas: ProtocolSchemas;
  /** config board.mayActOnOwnerTasks, read on every act (a config change takes effect at once). */
  mayActOnOwnerTasks(): boolean;
}

let nextId = 1_000_000_000;

/** A connection of a person (the CLI's kind) for one call; `close()` ends what it subscribed or started. */
function personConnection(push: (method: string, params: unknown) => void = () => undefined) {
  const closers: (() => void)[] = [];
  const conn: Connection & { close(): void } = {
    id: nextId++,
    kind: "cli",
    protocol: 2,
    closed: false,
    push,
    onClose: (fn) => void closers.push(fn),
    close() {
      if (conn.closed) return;
      (conn as { closed: boolean }).closed = true;
      for (const fn of closers.splice(0)) fn();
    },
  };
  return conn;
}

/** A task is an owner pi's when its owner is not the person at the CLI. */
export const ownedByPi = (owner: string | undefined): boolean => owner !== undefined && owner !== "cli";

export class BoardActions {
  constructor(private readonly deps: BoardActionsDeps) {}

  private async call<M extends BoardMethod>(
    method: M,
    params: Params<M>,
    conn = personConnection(),
  ): Promise<Result<M>> {
    this.deps.schemas.checkParams(method as RequestMethod, params);
    const h = this.deps.handlers[method] as (p: Params<M>, c: Connection) => Result<M> | Promise<Result<M>>;
    return await h(params, conn);
  }

  /** Newest first: every open task and the most recent closed ones (rows: no report, no diff). */
  async list(limit: number): Promise<Record<string, unknown>[]> {
    const page = await this.call("task.list", { limit });
    return page.tasks as unknown as Record<string, unknown>[];
  }

  get(taskId: string): Promise<AgentResult> {
    return this.call("task.get", { taskId });
  }

  patch(taskId: string): Promise<Result<"task.patch">> {
    return this.call("task.patch", { taskId });
  }

  /** Every status the daemon announces (the listeners owner delivery uses); the returned function ends it. */
  subscribe(onStatus: (result: AgentResult) => void): () => void {
    const conn = personConnection((method, params) => {
      if (method === "task.status") onStatus((params as { result: AgentResult }).result);
    });
    void this.call("task.subscribe", {}, conn).catch(() => conn.close());
    return () => conn.close();
  }

  /** Whether the page may act on this task (an owner pi's only when the config allows it). */
  mayAct(owner: string | undefined): boolean {
    return !ownedByPi(owner) || this.deps.mayActOnOwnerTasks();
  }

  private async acting(taskId: string): Promise<void> {
    const r = await this.get(taskId);
    if (!this.mayAct(r.owner))
      throw new DshError(
        "FORBIDDEN",
        `task ${taskId} belongs to owner pi ${r.owner}; the board shows it read-only unless you allow acting on owners' tasks: \`dsh-herdr config set board.mayActOnOwnerTasks true\``,
      );
  }

  async land(taskId: string, o: { strategy?: LandStrategy; check?: boolean }): Promise<unknown> {
    await this.acting(taskId);
    return this.call("task.land", {
      taskIds: [taskId],
      ...(o.strategy ? { strategy: o.strategy } : {}),
      ...(o.check ? { check: true } : {}),
    });
  }

  async check(taskId: string): Promise<unknown> {
    await this.acting(taskId);
    return this.call("task.check", { taskId });
  }

  async close(taskId: string): Promise<unknown> {
    await this.acting(taskId);
    return this.call("task.close", { taskId });
  }

  async abort(taskId: string): Promise<unknown> {
    await this.acting(taskId);
    return this.call("task.abort", { taskIds: [taskId] });
  }

  /** A follow-up (a new cycle), or a steer when `steer` and the cycle is still running. */
  async respond(taskId: string, message: string, steer: boolean): Promise<unknown> {
    await this.acting(taskId);
    return this.call("task.respond", { taskId, message, ...(steer ? { steer: true } : {}) });
  }
}
