// Writing a task's record: live snapshots paced per task, and the record + status journal line of a harvest, with
// retries when the home is full (the owner already heard the status). Split from settle.ts, which decides what to
// write.
import type { AgentResult } from "../core/types.js";
import { DshError } from "../core/errors.js";
import { unsynced } from "../store/task-store.js";
import type { Live, UnsavedStatus } from "./live.js";
import type { Supervisor } from "./supervisor-types.js";

const SNAPSHOT_EVERY_MS = 250;
/**
 * With many live tasks the per-task wait grows, so all of them together rewrite at most ~40 records a second:
 * 1,000 tasks streaming lines otherwise kept the thread pool busy with snapshot writes, and settles waited behind
 * them (bench/live-tasks). A live snapshot is only a convenience on disk (recovery rebuilds it from the session).
 */
const SNAPSHOT_MS_PER_TASK = 25;
/** The result is being written now: a deferred snapshot of it is moot. */
export function snapshotWritten(live: Live): void {
  delete live.snapshotDue;
}

/** Write a deferred live snapshot now (daemon stop), on the task's chain. */
export function flushSnapshot(sup: Supervisor, live: Live): Promise<void> {
  if (!live.snapshotDue) return live.chain;
  live.chain = live.chain
    .then(async () => {
      const due = live.snapshotDue === true;
      delete live.snapshotDue;
      if (!due || !live.result || live.rec.lifecycle) return;
      await sup.deps.store.saveTask(live.rec, live.result, { sync: false });
    })
    .catch((e: unknown) => sup.deps.log.warn({ taskId: live.rec.taskId, err: String(e) }, "live snapshot not saved"));
  return live.chain;
}

export function deferSnapshot(sup: Supervisor, live: Live): void {
  if (live.snapshotDue) return;
  live.snapshotDue = true;
  const t = setTimeout(
    () => {
      if (!sup.stopped) void flushSnapshot(sup, live);
    },
    Math.max(SNAPSHOT_EVERY_MS, sup.tasks.size * SNAPSHOT_MS_PER_TASK),
  );
  t.unref();
}

/**
 * Write the record and journal the status. A full or read-only home (HOME_UNWRITABLE) must not lose a settled
 * result: the owner already heard it, so the write is tried again with backoff until space is back (or a newer
 * harvest, a close or a daemon stop makes it moot).
 */
type StatusEvent = Record<string, unknown> & { type: string; cycle?: unknown };

type Unsaved = UnsavedStatus;

export async function persist(
  sup: Supervisor,
  live: Live,
  result: AgentResult,
  sync: boolean,
  ev: StatusEvent | undefined,
): Promise<void> {
  try {
    await sup.deps.store.saveTask(live.rec, result, {
      sync,
      // The renames are visible at once (task.wait returns, `show` reads result.json); their directory fsync follows.
      dirSyncLater: (done) =>
        void done.catch((e: unknown) =>
          sup.deps.log.warn({ taskId: live.rec.taskId, err: String(e) }, "task directory not fsynced"),
        ),
    });
    if (ev) await (sync ? sup.journalWritten(live, ev) : sup.journal(live, unsynced(ev)));
  } catch (e) {
    if (!(e instanceof DshError) || e.code !== "HOME_UNWRITABLE" || !ev) throw e;
    retryLater(sup, live, { ev, sync, attempt: 0 });
    throw e;
  }
  // A newer status of the same or a later cycle is on disk: an older one still waiting is moot.
  const u = live.unsaved;
  if (ev && u && Number(u.ev.cycle) <= Number(ev.cycle)) delete live.unsaved;
}

/**
 * The owner already heard this status; the record must follow once the disk has room again. Retried with backoff
 * (0.5 s doubling to 30 s) on the task's chain, with whatever result is current then, until it is written, a newer
 * status is written, the task is closed or the daemon stops.
 */
function retryLater(sup: Supervisor, live: Live, u: Unsaved): void {
  live.unsaved = u;
  const delay = Math.min(30_000, 500 * 2 ** u.attempt);
  sup.deps.log.warn(
    { taskId: live.rec.taskId, status: u.ev.status, retryInMs: delay },
    "task record not saved; trying again",
  );
  const t = setTimeout(() => {
    if (sup.stopped || live.rec.lifecycle === "closed" || live.unsaved !== u) return;
    live.chain = live.chain
      .then(async () => {
        if (live.unsaved !== u || !live.result) return;
        try {
          await sup.deps.store.saveTask(live.rec, live.result, { sync: u.sync });
          await sup.journal(live, u.sync ? u.ev : unsynced(u.ev));
          if (live.unsaved === u) delete live.unsaved;
        } catch (e) {
          if (e instanceof DshError && e.code === "HOME_UNWRITABLE")
            retryLater(sup, live, { ...u, attempt: u.attempt + 1 });
          else throw e;
        }
      })
      .catch((err: unknown) =>
        sup.deps.log.error({ taskId: live.rec.taskId, err: String(err) }, "task record still not saved"),
      );
  }, delay);
  t.unref();
}
