// Start-up reconciliation: every task that is not closed is taken back under supervision before the socket is
// served. task.json is rewritten only when a status is harvested, so the journal (events.jsonl, fsynced before
// each effect's next step) is replayed to learn what was in flight at the crash: a launch, a prompt, a follow-up,
// a settle, an abort, a close. Effects the journal shows are never repeated (a sent prompt is not sent again);
// effects it does not show are done now (a prompt never sent is sent; a task never launched starts again). A launch
// the daemon died in before journaling it is asked of the runtime (find): a child it left running is adopted.
// Here: gathering each task's inputs and planning (src/core/lifecycle/recovery-plan.ts). The journal's replay is
// recover-replay.ts, adopting a child recover-adopt.ts, the plan's steps recover-apply.ts (the runner carries them
// out: TaskRunner.restore), a lost task.json recover-lost.ts.
import type { JournalRecord } from "../../core/lifecycle/journal-record.js";
import { planRecovery } from "../../core/lifecycle/recovery-plan.js";
import { isSettledStatus, recordStatus } from "../../core/result/derive.js";
import type { Runtimes } from "../ports/runtimes.js";
import { unsynced } from "../../store/task-store.js";
import type { TaskRecord } from "../task/record.js";
import type { Runner, TaskPort } from "../task/runner-types.js";
import type { Supervisor } from "../task/supervisor-types.js";
import type { Relay } from "../relay/relay.js";
import { replayJournal, restorePrelaunch } from "./recover-replay.js";
import { adopt } from "./recover-adopt.js";
import { recoverySteps } from "./recover-apply.js";
import { recoverLost } from "./recover-lost.js";

/** Open tasks recovered at once: each waits mostly on its own reads and journal records, not on the CPU. */
const RECOVER_CONCURRENCY = 16;

export async function recoverTasks(sup: Supervisor, runtimes: Runtimes, relay?: Relay): Promise<void> {
  const rows = sup.deps.store.listTasks({}).filter((row) => row.status !== "closed");
  // A few at a time instead of one by one: 1,000 open tasks took 12 s to recover in sequence (bench/live-tasks).
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(RECOVER_CONCURRENCY, rows.length) }, async () => {
      while (next < rows.length) await recoverRow(sup, runtimes, rows[next++]!, relay);
    }),
  );
  // Every machine with open remote tasks is reattached in the background (start-up never waits on a machine).
  await relay?.reattach();
}

async function recoverRow(
  sup: Supervisor,
  runtimes: Runtimes,
  row: ReturnType<Supervisor["deps"]["store"]["listTasks"]>[number],
  relay?: Relay,
): Promise<void> {
  const { store, log } = sup.deps;
  try {
    // A task relayed to another machine: its record and settled cycles only; the machine's daemon recovers the rest.
    const rec = await store.readTask<TaskRecord>(row.taskId).catch(() => undefined);
    if (relay && rec?.remote && !ended(rec)) {
      const events = await journalOf(sup, row.taskId);
      await relay.recover(rec, replayJournal(events), events);
      return;
    }
    await recoverOne(sup, runtimes, row.taskId, rec); // read once: 1,000 open tasks are 1,000 record reads
  } catch (e) {
    const lost = sup.tasks.get(row.taskId) === undefined && !(await validRecord(store, row.taskId));
    log.warn(
      { taskId: row.taskId, err: String(e), lost },
      lost ? "task record lost; failing the task" : "task not recovered",
    );
    if (lost)
      await recoverLost(sup, runtimes, row, e).catch((err: unknown) =>
        log.error({ taskId: row.taskId, err: String(err) }, "lost task not settled"),
      );
  }
}

/** The task's journal for recovery; records of no known kind or shape (another daemon version's) are left out, said. */
async function journalOf(sup: Supervisor, taskId: string): Promise<JournalRecord[]> {
  const { records, unknown } = await sup.deps.store.readJournal(taskId);
  if (unknown > 0)
    sup.deps.log.warn({ taskId, unknown }, "journal records of no known kind or shape were left out of recovery");
  return records;
}

async function recoverOne(sup: Supervisor, runtimes: Runtimes, taskId: string, read?: TaskRecord): Promise<void> {
  const { store } = sup.deps;
  const rec = read ?? (await store.readTask<TaskRecord>(taskId));
  if (ended(rec) || rec.token === undefined) return;
  const j = replayJournal(await journalOf(sup, taskId));
  // A retry's or a parked child's relaunch may run unjournaled: find it below, never reuse the dead one. Else the
  // journal's last launch is the newest handle (task.json may predate a relaunch).
  if (j.handleStalled || j.handleParked) delete rec.handle;
  if (j.handle) rec.handle = j.handle;
  const runtime = runtimes.get(rec.runtime);
  const live = sup.register(rec);
  await restoreResult(live, j.settled);

  if (j.closed) {
    // Closed by its owner; the crash came before the record said so. Finish the close, do not supervise. A cycle
    // that had settled and been harvested closes with its verdict (the machine is told it settled first).
    if (j.settled.has(rec.cycle) && isSettledStatus(rec.status))
      await live.restore([
        {
          feed: {
            type: "restored",
            found: {
              found: "settled",
              cycle: rec.cycle,
              reason: j.settleReasons.get(rec.cycle),
              status: rec.status,
              childEnded: true,
            },
            childAlive: false,
          },
        },
      ]);
    await live.close(j.closed.closePane);
    sup.tasks.delete(taskId);
    return;
  }
  // Adopted before an abort is finished too, so the abort ends that child instead of leaving it running.
  const adopted = rec.handle === undefined ? await adopt(live.ports, runtime, rec, j.worktree) : false;
  if (adopted)
    await live.journal({
      type: "launched",
      attempt: j.stalled + 1,
      runtime: rec.runtime,
      handle: rec.handle,
      adopted: true,
    });
  if (rec.handle !== undefined) await restorePrelaunch(rec, j);
  // A follow-up journaled after the last task.json: its cycle is the current one.
  if (j.cycle > rec.cycle) {
    rec.cycle = j.cycle;
    delete rec.timing.settledAt;
    recordStatus(rec, { kind: "follow_up_journaled" });
  }
  const promptedAt = j.prompted.get(rec.cycle) ?? (rec.cycle === 1 ? rec.timing.promptedAt : undefined);
  if (promptedAt !== undefined && rec.timing.promptedAt === undefined) rec.timing.promptedAt = promptedAt;
  // The settle record's disk state is part of its verdict (the harvest does not ask the disk again).
  const disk = j.settleDisk.get(rec.cycle);
  if (disk) live.settleDisk = { cycle: rec.cycle, ...disk };
  // The child confirmed this cycle's prompt before the crash: its run is under way (its agent_start went to the
  // daemon that died), so the cycle reads running, not starting.
  if (j.accepted.has(rec.cycle)) live.agentStartedCycle = rec.cycle;
  if ((rec.handle !== undefined || rec.cycle > 1) && !j.interrupted) {
    await live.resume();
    live.promptSentAt = promptedAt ?? rec.timing.promptedAt ?? 0;
  }
  const alive = rec.handle !== undefined ? await runtime.isAlive(rec.handle).catch(() => false) : false;
  const f = live.files?.facts();
  const plan = planRecovery({
    cycle: rec.cycle,
    harvested: j.settled.has(rec.cycle) && isSettledStatus(rec.status),
    ...(j.interrupted ? { interrupted: j.interrupted } : {}),
    launched: rec.handle !== undefined,
    alive,
    prompted: promptedAt !== undefined,
    accepted: j.accepted.has(rec.cycle),
    settling: j.settling.has(rec.cycle),
    endedMeanwhile:
      promptedAt !== undefined &&
      f?.cycleSettled === true &&
      !f.retryMayFollow &&
      (f.lastTimestampMs ?? 0) >= promptedAt - 1000,
    ...(j.settleReasons.has(rec.cycle) ? { settleReason: j.settleReasons.get(rec.cycle)! } : {}),
    status: rec.status,
  });
  // A note for people reading the journal; recovery decides from the other records, so it needs no fsync.
  await live.journal(
    unsynced({
      type: "recovered",
      plan: plan.kind,
      alive,
      status: rec.status,
      cycle: rec.cycle,
      ...(adopted ? { action: "adopt the child launched before the crash" } : {}),
    }),
  );

  // Steers the crash left untaken go back to the machine: pushed to the child when it says hello (it takes each once).
  const steers = j.steers.filter((s) => s.cycle === rec.cycle);
  if (j.lastSteer > 0) await live.restore([{ feed: { type: "steers_restored", steers, last: j.lastSteer } }]);
  await live.restore(await recoverySteps(live, plan, runtime, alive, j.worktree, j.setupGroup));
}

/**
 * A task nothing is left to do for: closed or interrupted (its status says so; records written before the lifecycle
 * was derived from the phase carry it as `lifecycle`, which still loads).
 */
function ended(rec: TaskRecord): boolean {
  return rec.lifecycle !== undefined || rec.status === "closed" || rec.status === "interrupted";
}

/**
 * The last harvested result and diff live in memory between settles; after a restart they come back from
 * result.json, or the next live result (and the close) would drop the diff of a cycle that settled before the
 * crash, and a settled cycle would be judged again.
 */
async function restoreResult(
  live: TaskPort<"rec" | "diff" | "result" | "settledCycle", "store">,
  settledCycles: Set<number>,
): Promise<void> {
  const stored = await live.ports.store.readResult(live.rec.taskId).catch(() => undefined);
  if (stored?.diff && !live.diff) live.diff = stored.diff;
  if (stored && stored.status === live.rec.status) {
    live.result = stored;
    // The record's cycle settled and was harvested: result.json is that verdict (a close keeps it).
    if (settledCycles.has(live.rec.cycle) && isSettledStatus(stored.status)) live.settledCycle = live.rec.cycle;
  }
}

/** task.json exists and parses (the task failed to recover for another reason). */
async function validRecord(store: Supervisor["deps"]["store"], taskId: string): Promise<boolean> {
  return store.readTask(taskId).then(
    (r) => typeof (r as { token?: unknown }).token === "string",
    () => false,
  );
}
