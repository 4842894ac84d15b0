// Admission: at most maxParallelAgents tasks hold a slot; up to maxQueuedAgents wait in FIFO order for at
// most queueTimeoutMs. A slot is reserved synchronously in acquire(), so simultaneous spawns cannot overshoot.
import type { Clock, TimerHandle } from "../../core/clock.js";
import { DshError } from "../../core/errors.js";
import { systemClock } from "../ports/clock.js";

export interface AdmissionLimits {
  maxParallelAgents: number;
  maxQueuedAgents: number;
  queueTimeoutMs: number;
}

export interface Slot {
  taskId: string;
  queuedMs: number;
}

interface Waiter {
  taskId: string;
  since: number;
  resolve(slot: Slot): void;
  reject(e: Error): void;
  timer: TimerHandle;
}

export class Admission {
  private readonly holders = new Set<string>();
  private readonly queue: Waiter[] = [];
  private stopped = false;

  private readonly clock: Clock;

  /** `clock`: the queue timeout's timers (the daemon's clock port), or only a `now` for the queued time. */
  constructor(
    private readonly limits: () => AdmissionLimits,
    clock: Clock | (() => number) = systemClock,
  ) {
    this.clock = typeof clock === "function" ? { ...systemClock, now: clock } : clock;
  }

  private now(): number {
    return this.clock.now();
  }

  get running(): number {
    return this.holders.size;
  }
  get queued(): number {
    return this.queue.length;
  }
  holds(taskId: string): boolean {
    return this.holders.has(taskId);
  }
  isQueued(taskId: string): boolean {
    return this.queue.some((w) => w.taskId === taskId);
  }

  /** Reserve a slot now or join the queue; throws synchronously (CONCURRENCY_LIMIT) when the queue is full. */
  acquire(taskId: string): Promise<Slot> {
    const l = this.limits();
    if (this.holders.has(taskId)) return Promise.resolve({ taskId, queuedMs: 0 });
    if (this.holders.size < l.maxParallelAgents && this.queue.length === 0) {
      this.holders.add(taskId);
      return Promise.resolve({ taskId, queuedMs: 0 });
    }
    if (this.queue.length >= l.maxQueuedAgents) {
      throw new DshError(
        "CONCURRENCY_LIMIT",
        `${this.holders.size} agents are running and ${this.queue.length} are queued (maxParallelAgents ${l.maxParallelAgents}, maxQueuedAgents ${l.maxQueuedAgents}); wait for one to finish, close finished tasks, or raise the limits in config.json`,
      );
    }
    return new Promise<Slot>((resolve, reject) => {
      const w: Waiter = {
        taskId,
        since: this.now(),
        resolve,
        reject,
        timer: this.clock.setTimer(l.queueTimeoutMs, () => {
          this.dropWaiter(w);
          reject(
            new DshError(
              "CONCURRENCY_LIMIT",
              `no agent slot became free within queueTimeoutMs (${l.queueTimeoutMs} ms); close finished tasks, raise maxParallelAgents or queueTimeoutMs in config.json, or spawn later`,
            ),
          );
        }),
      };
      this.queue.push(w);
    });
  }

  /** Move a reservation (held or queued) to a new key, e.g. from a provisional key to the task id. */
  rekey(from: string, to: string): void {
    if (this.holders.delete(from)) this.holders.add(to);
    const w = this.queue.find((x) => x.taskId === from);
    if (w) w.taskId = to;
  }

  /** Give a slot back (task settled for good, closed or aborted) and admit the next waiter. Idempotent. */
  release(taskId: string): void {
    if (this.holders.delete(taskId)) this.pump();
  }

  /** Remove a queued task (aborted before it started). True when it was queued. */
  /** `reason` may be a function: the error (and its stack) is built only when a queued spawn is really refused. */
  cancel(taskId: string, reason: Error | (() => Error)): boolean {
    const w = this.queue.find((x) => x.taskId === taskId);
    if (!w) return false;
    this.dropWaiter(w);
    w.reject(typeof reason === "function" ? reason() : reason);
    return true;
  }

  /**
   * Daemon stop: queued spawns stay queued for the next daemon (its recovery re-admits them), so their timers are
   * dropped and nothing more is admitted; a stopped daemon must not start or fail tasks behind the new one's back.
   */
  stop(): void {
    this.stopped = true;
    for (const w of this.queue) this.clock.clearTimer(w.timer);
    this.queue.length = 0;
  }

  private dropWaiter(w: Waiter): void {
    this.clock.clearTimer(w.timer);
    const i = this.queue.indexOf(w);
    if (i >= 0) this.queue.splice(i, 1);
  }

  private pump(): void {
    if (this.stopped) return;
    const l = this.limits();
    while (this.holders.size < l.maxParallelAgents && this.queue.length > 0) {
      const w = this.queue.shift()!;
      this.clock.clearTimer(w.timer);
      this.holders.add(w.taskId);
      w.resolve({ taskId: w.taskId, queuedMs: Math.max(1, this.now() - w.since) });
    }
  }
}
