// Requests over a link are idempotent. Each task.spawn and task.respond this daemon relays gets a request id and is
// made durable before it is sent: the request (its params) in the task dir (remote-request.json), a
// `remote_request` record in the task's journal. The machine's daemon answers a repeat of an id with its first
// answer (src/daemon/methods/request-memo.ts), so when the reply is lost (the link dropped, the request timed out, this
// daemon was killed meanwhile) the request is simply sent again with the same id once the link answers: the task
// there is adopted, the follow-up's cycle taken, nothing runs twice. The answer's own journal record (`remote_spawned`,
// `respond`) carries the id, so a restarted daemon knows which requests still wait (restore).
//
// The owner's call waits for the answer; past a drop it waits a little longer for the reconnect's answer
// (RECONCILE_WAIT_MS), then says what happened: "the link ... dropped while ...; the request will be reconciled".
import { randomBytes } from "node:crypto";
import type { TimerHandle } from "../../core/clock.js";
import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { DshError, isDshError } from "../../core/errors.js";
import type { JournalRecord } from "../../core/lifecycle/journal-record.js";
import { backoffDelay, RELAY_RETRY_BACKOFF } from "../../core/machines.js";
import { writeAtomic } from "../../store/fsio.js";
import { RemoteViolation } from "./remote-check.js";
import type { Answer, PendingRequest as Pending, RemoteMethod, RemoteRequest } from "../task/relay-request-state.js";
import type { Params } from "../../protocol/methods.js";
import type { RelayContext, RelayLive } from "./relay-types.js";

export type { Answer, RemoteMethod, RemoteRequest, RespondAnswer, SpawnAnswer } from "../task/relay-request-state.js";

/** What carries an answer (or a refusal) out: adopting the spawned task, starting the follow-up's cycle. */
export interface RequestHooks {
  answered(live: RelayLive, req: RemoteRequest, answer: Answer): Promise<void>;
  /** The machine refused the request; `waited`: an owner's call is waiting for it (it gets the error). */
  refused(live: RelayLive, req: RemoteRequest, err: DshError, waited: boolean): Promise<void>;
  /** A send went unanswered (dropped, timed out, link down) for the first time: the request is reconciled later. */
  unanswered(live: RelayLive, req: RemoteRequest): Promise<void>;
}

/** How long an owner's call waits past a drop (or a request timeout) for the reconcile's answer. */
export const RECONCILE_WAIT_MS = 15_000;
/** Bound of one send (the remote's spawn answers once the task is recorded there). */
export const REQUEST_TIMEOUT_MS = 30_000;
const REQUEST_FILE = "remote-request.json";
/** The journal record answers the request `requestId` (the spawn's, a follow-up's, or the machine's refusal). */
function answers(e: JournalRecord, requestId: string): boolean {
  switch (e.type) {
    case "remote_spawned":
    case "respond":
    case "remote_request_refused":
      return e.requestId === requestId;
    default:
      return false;
  }
}

export function newRequestId(): string {
  return `r${randomBytes(15).toString("base64url")}`;
}

/**
 * The requests of every relayed task. What one task waits for lives on its runner (`live.remoteRequest`, as all of
 * a task's state does); this class sends, retries and reconciles them, its timers on the daemon's clock.
 */
export class RelayRequests {
  constructor(
    private readonly ctx: RelayContext,
    private readonly hooks: RequestHooks,
  ) {}

  pendingOf(live: RelayLive): RemoteRequest | undefined {
    return live.remoteRequest?.req;
  }

  private get clock() {
    return this.ctx.sup.deps.clock;
  }

  /** Make the request durable (its params, then its journal record); it is sent by call() or the reconcile. */
  async begin(live: RelayLive, req: RemoteRequest): Promise<void> {
    const file = join(this.ctx.sup.deps.store.taskPaths(live.rec.taskId).dir, REQUEST_FILE);
    await writeAtomic(file, JSON.stringify(req) + "\n", 0o600, { sync: true });
    await live.journal({
      type: "remote_request",
      requestId: req.requestId,
      method: req.method,
      cycle: req.cycle,
    });
    this.track(live, req);
  }

  /** At start-up: a request journaled and not answered is pending again (the reconcile sends it). */
  async restore(live: RelayLive, events: readonly JournalRecord[]): Promise<void> {
    const last = events.findLast((e) => e.type === "remote_request");
    if (last?.type !== "remote_request") return;
    if (events.some((e) => answers(e, last.requestId))) return;
    const file = join(this.ctx.sup.deps.store.taskPaths(live.rec.taskId).dir, REQUEST_FILE);
    const req = await readFile(file, "utf8")
      .then((t) => JSON.parse(t) as RemoteRequest)
      .catch(() => undefined);
    if (!req || req.requestId !== last.requestId) {
      this.ctx.sup.deps.log.error(
        { taskId: live.rec.taskId, requestId: last.requestId },
        `a journaled remote request has no readable ${REQUEST_FILE}; it is not sent again`,
      );
      return;
    }
    this.track(live, req);
  }

  private track(live: RelayLive, req: RemoteRequest): Pending {
    let resolve!: (a: Answer) => void;
    let reject!: (e: DshError) => void;
    const answered = new Promise<Answer>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    answered.catch(() => undefined); // a refusal nobody waits for is handled by hooks.refused
    const p: Pending = { req, waiters: 0, answered, resolve, reject, failures: 0, onFailure: new Set() };
    live.remoteRequest = p;
    return p;
  }

  /**
   * The owner's call: the answer. Past a failed send it waits up to `waitMs` for the reconcile (the link comes
   * back, the request goes again with the same id), then rejects with what happened; the request stays pending.
   */
  call(live: RelayLive, waitMs = RECONCILE_WAIT_MS): Promise<Answer> {
    const p = live.remoteRequest;
    if (!p) return Promise.reject(new DshError("INTERNAL", `no pending remote request for task ${live.rec.taskId}`));
    p.waiters++;
    return new Promise<Answer>((resolve, reject) => {
      let timer: TimerHandle | undefined;
      const done = (fn: () => void) => {
        this.clock.clearTimer(timer);
        p.waiters--;
        p.onFailure.delete(onFailure);
        fn();
      };
      const onFailure = (e: DshError) => {
        timer ??= this.clock.setTimer(waitMs, () => done(() => reject(this.words(live, p.req, e))));
      };
      p.onFailure.add(onFailure);
      p.answered.then(
        (a) => done(() => resolve(a)),
        (e: DshError) => done(() => reject(e)),
      );
      this.kick(live);
    });
  }

  /** The link to `label` is up: every request still pending for its tasks goes again. */
  reconcile(label: string): void {
    for (const live of this.ctx.sup.tasks.values()) {
      if (live.rec.remote?.label === label && live.remoteRequest) this.kick(live);
    }
  }

  /**
   * Send the pending request now; while a send runs, once it ends. A send that failed because the link was down
   * (or dropped) waits for the next "up", and an "up" that came while it was still marking the request unanswered
   * would otherwise be missed: the request never went again while the link stayed up.
   */
  private kick(live: RelayLive): void {
    const p = live.remoteRequest;
    if (!p) return;
    if (p.sending) {
      p.again = true;
      return;
    }
    this.clock.clearTimer(p.retry);
    p.retry = undefined;
    p.again = false;
    p.sending = this.send(live, p).finally(() => {
      p.sending = undefined;
      if (p.again && live.remoteRequest === p && !this.ctx.stopped) this.kick(live);
    });
  }

  private async send(live: RelayLive, p: Pending): Promise<void> {
    const { label } = live.rec.remote!;
    const link = this.ctx.linkOf(label);
    if (!link || link.state !== "up") {
      // The next "up" reconciles it.
      await this.failedAttempt(
        live,
        p,
        link?.error ?? new DshError("MACHINE_UNREACHABLE", `machine ${label} is not connected`),
        false,
      );
      return;
    }
    let raw: unknown;
    try {
      raw = await link.request(
        p.req.method,
        // Made durable (remote-request.json) from a request this daemon checked; the remote daemon checks it again.
        { ...p.req.params, requestId: p.req.requestId } as Params<RemoteMethod>,
        { timeoutMs: REQUEST_TIMEOUT_MS },
      );
    } catch (e) {
      const err = isDshError(e) ? e : new DshError("INTERNAL", String(e));
      if (err.code === "MACHINE_UNREACHABLE" || err.code === "TIMEOUT" || err.code === "DAEMON_UNAVAILABLE") {
        // No answer: the link dropped (the next "up" sends it again), or the machine is slow (try again later).
        await this.failedAttempt(live, p, err, err.code === "TIMEOUT" && link.state === "up");
        return;
      }
      return this.settleRefused(live, p, err);
    }
    let answer: Answer;
    try {
      answer = checkAnswer(p.req, raw);
    } catch (e) {
      const v = e as RemoteViolation;
      return this.settleRefused(
        live,
        p,
        new DshError(
          "REMOTE_INVALID",
          `machine ${label} answered ${p.req.method} with something the protocol does not allow (${v.field}: ${v.why}); run the same dsh-herdr version on both machines`,
          { field: v.field },
        ),
      );
    }
    if (live.remoteRequest !== p) return; // answered meanwhile by another send
    delete live.remoteRequest;
    try {
      await this.hooks.answered(live, p.req, answer);
    } catch (e) {
      this.ctx.sup.deps.log.error(
        { taskId: live.rec.taskId, requestId: p.req.requestId, err: String(e) },
        "a remote answer was not recorded",
      );
    }
    await rm(join(this.ctx.sup.deps.store.taskPaths(live.rec.taskId).dir, REQUEST_FILE), { force: true }).catch(
      () => undefined,
    );
    p.resolve(answer);
  }

  private async failedAttempt(live: RelayLive, p: Pending, err: DshError, retryLater: boolean): Promise<void> {
    p.failures++;
    if (retryLater) {
      // The link is up but the request went unanswered: again with the same id, backing off (RELAY_RETRY_BACKOFF:
      // 0.5-1 s, doubling to 15-30 s).
      p.retry = this.clock.setTimer(backoffDelay(p.failures - 1, Math.random(), RELAY_RETRY_BACKOFF), () => {
        p.retry = undefined;
        if (!this.ctx.stopped) this.kick(live);
      });
    }
    p.unanswered ??= this.hooks
      .unanswered(live, p.req)
      .catch((e: unknown) =>
        this.ctx.sup.deps.log.warn({ taskId: live.rec.taskId, err: String(e) }, "an unanswered request not marked"),
      );
    await p.unanswered;
    for (const fn of p.onFailure) fn(err);
  }

  /** The machine refused the request: it is answered (no longer pending), its caller gets the error. */
  private async settleRefused(live: RelayLive, p: Pending, err: DshError): Promise<void> {
    if (live.remoteRequest !== p) return;
    delete live.remoteRequest;
    // Still this daemon's request until its refusal is settled here: news of the cycle it may have started there
    // (a stored answer refused for its cycle) is not someone else's (relay-follow.ts movedOn).
    live.remoteRefusing = true;
    await live
      // With the machine's words: a restart that finds this refusal unsettled settles the cycle with them.
      .journal({
        type: "remote_request_refused",
        requestId: p.req.requestId,
        code: err.code,
        message: err.message.slice(0, 4000),
      })
      .catch(() => undefined);
    await rm(join(this.ctx.sup.deps.store.taskPaths(live.rec.taskId).dir, REQUEST_FILE), { force: true }).catch(
      () => undefined,
    );
    try {
      await this.hooks.refused(live, p.req, err, p.waiters > 0);
    } finally {
      delete live.remoteRefusing;
      p.reject(err);
    }
  }

  /** What the owner is told when the answer did not come in time: what happened, and that it is reconciled. */
  private words(live: RelayLive, req: RemoteRequest, e: DshError): DshError {
    const { label } = live.rec.remote!;
    const id = live.rec.taskId;
    const doing =
      req.method === "task.spawn"
        ? `spawning task ${id} there`
        : `sending task ${id}'s follow-up (cycle ${req.cycle}) there`;
    const dontRepeat =
      req.method === "task.spawn"
        ? `do not spawn it again; follow it with \`dsh-herdr wait ${id}\``
        : `do not count on a retry starting another cycle (a retry joins this request); follow it with \`dsh-herdr wait ${id}\``;
    const what =
      e.code === "TIMEOUT"
        ? `machine ${label} did not answer while ${doing}`
        : e.details?.dropped === true
          ? `the link to machine ${label} dropped while ${doing}`
          : `the link to machine ${label} went down while ${doing} (${e.message.slice(0, 200)})`;
    return new DshError(
      e.code === "TIMEOUT" ? "TIMEOUT" : "MACHINE_UNREACHABLE",
      `${what}; the request will be reconciled: it is journaled here and goes again with the same request id once the link answers, so it runs once there; ${dontRepeat}`,
      { taskId: id, label, requestId: req.requestId, reconciled: true },
    );
  }
}

const TASK_ID = /^t[0-9a-z]{11}$/;

/** The answer as the protocol promises it (task.spawn.json, task.respond.json), or a RemoteViolation. */
function checkAnswer(req: RemoteRequest, raw: unknown): Answer {
  const a = raw as Record<string, unknown> | null;
  const at = (f: string) => `${req.method}.${f}`;
  if (typeof a !== "object" || a === null) throw new RemoteViolation(at("result"), "is not an object");
  if (req.method === "task.spawn") {
    if (typeof a.taskId !== "string" || !TASK_ID.test(a.taskId))
      throw new RemoteViolation(at("taskId"), "is not a task id");
    if (typeof a.name !== "string" || a.name === "" || a.name.length > 256)
      throw new RemoteViolation(at("name"), "is not an agent name");
    if (typeof a.queued !== "boolean") throw new RemoteViolation(at("queued"), "is not a boolean");
    return {
      taskId: a.taskId,
      name: a.name,
      status: typeof a.status === "string" ? a.status : "starting",
      queued: a.queued,
    };
  }
  if (!Number.isSafeInteger(a.cycle) || (a.cycle as number) < 2)
    throw new RemoteViolation(at("cycle"), "is not a follow-up's cycle number");
  if (a.cycle !== req.cycle)
    throw new RemoteViolation(at("cycle"), `is ${String(a.cycle)}, not the cycle ${req.cycle} this follow-up starts`);
  return { cycle: a.cycle as number, queued: a.queued === true };
}
