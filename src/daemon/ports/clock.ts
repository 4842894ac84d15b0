// The real clock port (src/core/clock.ts): Date.now and unref'd timers. The only place the task runners' timers are
// made; tests give the daemon a fake clock instead (test/helpers/fake-clock.ts).
import type { Clock, TimerHandle } from "../../core/clock.js";

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(ms: number, fn: () => void): TimerHandle {
    const t = setTimeout(fn, ms);
    t.unref();
    return { timer: t };
  },
  clearTimer(handle: TimerHandle | undefined): void {
    if (handle) clearTimeout(handle.timer as NodeJS.Timeout);
  },
};

/** Resolves after `ms` on `clock` (a retry's pause). */
export function pause(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => clock.setTimer(ms, resolve));
}
