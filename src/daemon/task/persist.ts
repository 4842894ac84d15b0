// Writing a task's record: live snapshots paced per task, and the record + status journal line of a harvest, with
// retries when the home is full (the owner already heard the status). Split from settle.ts, which decides what to
// write.
import type { JournalRecordOf } from "../../core/lifecycle/journal-record.js";
import type { AgentResult } from "../../core/types.js";
import { DshError } from "../../core/errors.js";
import { lifecycleOf } from "../../core/lifecycle/task-cycle.js";
import { unsynced } from "../../store/task-store.js";
import type { UnsavedStatus } from "./live.js";
import type { Runner, TaskPort } from "./runner-types.js";

const SNAPSHOT_EVERY_MS = 250;
/**
 * With many live tasks the per-task wait grows, so all of them together rewrite at most ~40 records a second:
 * 1,000 tasks streaming lines otherwise kept the thread pool busy with snapshot writes, and settles waited behind
 * them (bench/live-tasks). A live snapshot is only a convenience on disk (recovery rebuilds it from the session).
 */
const SNAPSHOT_MS_PER_TASK = 25;
/** The result is being written now: a deferred snapshot of it is moot. */
export function snapshotWritten(r: Pick<Runner, "snapshotDue">): void {
  delete r.snapshotDue;
}

/** What writing a task's record touches: its record and result, its chain, the store and log, and its own timers. */
export type PersistPort = TaskPort<
  "rec" | "result" | "state" | "chain" | "onChain" | "snapshotDue" | "unsaved" | "journal" | "journalWritten" | "later",
  "log" | "store" | "taskCount"
>;

/** Write a deferred live snapshot now (daemon stop), on the task's chain. */
export function flushSnapshot(r: PersistPort): Promise<void> {
  if (!r.snapshotDue) return r.chain;
  return r
    .onChain(async () => {
      const due = r.snapshotDue === true;
      delete r.snapshotDue;
      if (!due || !r.result || lifecycleOf(r.state.phase)) return;
      await r.ports.store.saveTask(r.rec, r.result, { sync: false });
    })
    .catch((e: unknown) => r.ports.log.warn({ taskId: r.rec.taskId, err: String(e) }, "live snapshot not saved"));
}

export function deferSnapshot(r: PersistPort): void {
  if (r.snapshotDue) return;
  r.snapshotDue = true;
  r.later(Math.max(SNAPSHOT_EVERY_MS, r.ports.taskCount() * SNAPSHOT_MS_PER_TASK), () => void flushSnapshot(r));
}

/**
 * Write the record and journal the status. A full or read-only home (HOME_UNWRITABLE) must not lose a settled
 * result: the owner already heard it, so the write is tried again with backoff until space is back (or a newer
 * harvest, a close or a daemon stop makes it moot).
 */
type StatusEvent = JournalRecordOf<"status">;

type Unsaved = UnsavedStatus;

export async function persist(
  r: PersistPort,
  result: AgentResult,
  sync: boolean,
  ev: StatusEvent | undefined,
  extra?: { name: string; data: string }[],
): Promise<void> {
  try {
    await r.ports.store.saveTask(r.rec, result, {
      sync,
      // The renames are visible at once (task.wait returns, `show` reads result.json); their directory fsync follows.
      dirSyncLater: (done) =>
        void done.catch((e: unknown) =>
          r.ports.log.warn({ taskId: r.rec.taskId, err: String(e) }, "task directory not fsynced"),
        ),
      ...(extra ? { extra } : {}),
    });
    if (ev) await (sync ? r.journalWritten(ev) : r.journal(unsynced(ev)));
  } catch (e) {
    if (!(e instanceof DshError) || e.code !== "HOME_UNWRITABLE" || !ev) throw e;
    retryLater(r, { ev, sync, attempt: 0, ...(extra ? { extra } : {}) });
    throw e;
  }
  // A newer status of the same or a later cycle is on disk: an older one still waiting is moot.
  const u = r.unsaved;
  if (ev && u && Number(u.ev.cycle) <= Number(ev.cycle)) delete r.unsaved;
}

/**
 * The owner already heard this status; the record must follow once the disk has room again. Retried with backoff
 * (0.5 s doubling to 30 s) on the task's chain, with whatever result is current then, until it is written, a newer
 * status is written, the task is closed or the daemon stops.
 */
function retryLater(r: PersistPort, u: Unsaved): void {
  r.unsaved = u;
  const delay = Math.min(30_000, 500 * 2 ** u.attempt);
  r.ports.log.warn(
    { taskId: r.rec.taskId, status: u.ev.status, retryInMs: delay },
    "task record not saved; trying again",
  );
  r.later(delay, () => {
    if (r.state.phase.name === "closed" || r.unsaved !== u) return;
    void r
      .onChain(async () => {
        if (r.unsaved !== u || !r.result) return;
        try {
          await r.ports.store.saveTask(r.rec, r.result, {
            sync: u.sync,
            ...(u.extra ? { extra: u.extra } : {}),
          });
          await r.journal(u.sync ? u.ev : unsynced(u.ev));
          if (r.unsaved === u) delete r.unsaved;
        } catch (e) {
          if (e instanceof DshError && e.code === "HOME_UNWRITABLE") retryLater(r, { ...u, attempt: u.attempt + 1 });
          else throw e;
        }
      })
      .catch((err: unknown) =>
        r.ports.log.error({ taskId: r.rec.taskId, err: String(err) }, "task record still not saved"),
      );
  });
}
