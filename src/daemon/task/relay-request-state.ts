// What a relayed task keeps of its request to the machine while it waits for the answer (src/daemon/relay/relay-requests.ts):
// the request as journaled, the owner calls waiting for it, the send under way and its retry timer. It lives on the
// task's runner (src/daemon/task/live.ts, `remoteRequest`), like every other piece of per-task state; types only.
import type { TimerHandle } from "../../core/clock.js";
import type { DshError } from "../../core/errors.js";

export type RemoteMethod = "task.spawn" | "task.respond";

/** A spawn or a follow-up relayed to a machine, as made durable before it is sent (remote-request.json). */
export interface RemoteRequest {
  requestId: string;
  method: RemoteMethod;
  /** The params as sent (without the request id, added at each send). */
  params: Record<string, unknown>;
  /** The cycle it starts: 1 for a spawn, the next for a follow-up. */
  cycle: number;
}

export interface SpawnAnswer {
  taskId: string;
  name: string;
  status: string;
  queued: boolean;
}

export interface RespondAnswer {
  cycle: number;
  queued: boolean;
}

export type Answer = SpawnAnswer | RespondAnswer;

/** A request journaled and not answered yet. */
export interface PendingRequest {
  req: RemoteRequest;
  /** Owner calls waiting for the answer. */
  waiters: number;
  answered: Promise<Answer>;
  resolve(a: Answer): void;
  reject(e: DshError): void;
  /** A send under way. */
  sending?: Promise<void>;
  /** The link came up (a reconcile) while a send ran: once it ends, the request goes again if still unanswered. */
  again?: boolean;
  /** The next send, after a request the machine did not answer while its link stayed up. */
  retry?: TimerHandle;
  /** Send attempts that failed (link down, dropped, timed out), for the retry's backoff. */
  failures: number;
  /** hooks.unanswered ran (or runs) for it. */
  unanswered?: Promise<void>;
  /** Told of each failed attempt (an owner's call starts its wait for the reconcile). */
  onFailure: Set<(e: DshError) => void>;
}
