// A clock the test moves by hand (the daemon's clock port, src/core/clock.ts): timers fire only inside advance(), in
// the order they are due, so timing behaviour (timeouts, idle parking, the readiness barrier) is tested without
// sleeping.
import type { Clock, TimerHandle } from "../../src/core/clock.js";

interface Pending {
  at: number;
  seq: number;
  fn: () => void;
}

export class FakeClock implements Clock {
  private t: number;
  private seq = 0;
  private readonly timers = new Map<TimerHandle, Pending>();

  constructor(start = Date.now()) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  setTimer(ms: number, fn: () => void): TimerHandle {
    const h: TimerHandle = { timer: ++this.seq };
    this.timers.set(h, { at: this.t + Math.max(0, ms), seq: this.seq, fn });
    return h;
  }

  clearTimer(handle: TimerHandle | undefined): void {
    if (handle) this.timers.delete(handle);
  }

  /** Timers not fired yet, soonest first (ms from now). */
  pending(): number[] {
    return [...this.timers.values()].map((p) => p.at - this.t).sort((a, b) => a - b);
  }

  /** Move time on by `ms`, firing every timer due by then (also ones set by a timer that fired), in order. */
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      let next: [TimerHandle, Pending] | undefined;
      for (const e of this.timers) if (e[1].at <= end && (!next || due(e[1], next[1]))) next = e;
      if (!next) break;
      this.timers.delete(next[0]);
      this.t = Math.max(this.t, next[1].at);
      next[1].fn();
    }
    this.t = end;
  }
}

const due = (a: Pending, b: Pending) => a.at < b.at || (a.at === b.at && a.seq < b.seq);
