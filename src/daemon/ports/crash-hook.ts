// Test-only kill points for the crash tests (test/reliability/crash.test.ts). DSH_HERDR_CRASH_AT=<point>[#n]
// makes the daemon SIGKILL itself right after the n-th (default first) durable journal record matching <point>:
// an event type (`launched`, `settle`), `status:<status>` for status records (`status:running`), or
// `outbox:<state>` for owner outbox records (`outbox:sent`), or a code point that is no record, passed to crashPoint()
// (`launch_returned`: runtime.launch answered, its handle is not journaled yet). Unset, this module does nothing:
// the store is not wrapped, crashPoint() returns at once and no code path changes.
import { onOutboxAppended } from "../../store/outbox.js";

/** A kill point: a journal record (its type and status), an outbox record (its state), or a named code point. */
export type CrashPoint = (event: { type: string; status?: unknown; state?: unknown }) => void;

/** The hook crashHookFromEnv armed, for points between records (a process-wide test switch, like the env). */
let armed: CrashPoint | undefined;

/** A kill point that is not a journal record (e.g. `launch_returned`); a no-op unless DSH_HERDR_CRASH_AT is set. */
export function crashPoint(type: string): void {
  armed?.({ type });
}

export function crashHookFromEnv(env: NodeJS.ProcessEnv = process.env): CrashPoint | undefined {
  const spec = env.DSH_HERDR_CRASH_AT?.trim();
  if (!spec) return undefined;
  const [point, nth] = spec.split("#");
  const want = Math.max(1, Number.parseInt(nth ?? "1", 10) || 1);
  let seen = 0;
  const hook: CrashPoint = (event) => {
    const keys = [event.type, `${event.type}:${String(event.status ?? event.state ?? "")}`];
    if (!keys.includes(point!)) return;
    if (++seen === want) process.kill(process.pid, "SIGKILL");
  };
  onOutboxAppended((state) => hook({ type: "outbox", state }));
  armed = hook;
  return hook;
}

/**
 * Wrap an append function so the hook runs once it resolves (durable for appendEvent, written for a settle's), for
 * its record or, for an append of several (appendEventsWritten), for each of them in order once all are written.
 */
export function withCrashHook<A extends unknown[], L extends { type: string } | { type: string }[], R>(
  hook: CrashPoint | undefined,
  append: (...args: [...A, L]) => Promise<R>,
): (...args: [...A, L]) => Promise<R> {
  if (!hook) return append;
  return async (...args) => {
    const r = await append(...args);
    const last = args[args.length - 1] as { type: string } | { type: string }[];
    for (const e of Array.isArray(last) ? last : [last]) hook(e);
    return r;
  };
}
