// Start-up reconciliation: every task that is not closed is taken back under supervision before the socket is
// served. Its files are re-read from the start, its runtime is asked whether the child still lives, and a
// child that died while the daemon was away settles as gone. Live children reconnect with their token.
import { isSettledStatus } from "../core/derive.js";
import type { Runtimes } from "./runtimes.js";
import type { TaskRecord } from "./record.js";
import type { Supervisor } from "./supervisor.js";

export async function recoverTasks(sup: Supervisor, runtimes: Runtimes): Promise<void> {
  const { store, log } = sup.deps;
  for (const row of store.listTasks({})) {
    if (row.status === "closed") continue;
    let rec: TaskRecord;
    try {
      rec = await store.readTask<TaskRecord>(row.taskId);
    } catch (e) {
      log.warn({ taskId: row.taskId, err: String(e) }, "skipping unreadable task record");
      continue;
    }
    if (rec.lifecycle !== undefined || rec.token === undefined) continue;
    const settled = isSettledStatus(rec.status);
    if (settled && rec.status !== "completed" && rec.status !== "blocked") continue; // terminal: nothing to watch
    const live = sup.register(rec);
    await sup.resume(live);
    const runtime = runtimes.get(rec.runtime);
    const alive = rec.handle ? await runtime.isAlive(rec.handle).catch(() => false) : false;
    await sup.journal(live, { type: "recovered", alive, status: rec.status });
    if (!settled) {
      live.cycleRunning = rec.timing.promptedAt !== undefined;
      if (!alive || rec.timing.promptedAt === undefined) {
        // Nothing can finish this cycle: the child is gone, or it never took its prompt.
        sup.markGone(live);
        continue;
      }
      sup.armTimeout(live);
      // A running cycle holds a slot again (over the cap if the config shrank meanwhile: it is already running).
      try {
        void sup.admission.acquire(rec.taskId).catch(() => undefined);
      } catch {
        /* queue full: the cycle runs anyway */
      }
    }
    if (alive) sup.watchRuntime(live, runtime);
    await sup.refresh(live);
  }
}
