// The clock port: what the daemon's task runners time with (src/daemon/ports/clock.ts is the real one; tests pass a fake
// one and move time themselves). Types only: core keeps no time of its own.

/** A timer set through a Clock; only that clock can clear it. */
export type TimerHandle = { readonly timer: unknown };

export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
  /** Call `fn` once, `ms` from now; a timer never keeps the process alive by itself. */
  setTimer(ms: number, fn: () => void): TimerHandle;
  /** Cancel a timer that has not fired (a fired or unknown one: nothing happens). */
  clearTimer(handle: TimerHandle | undefined): void;
}
