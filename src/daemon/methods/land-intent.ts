// The intent record of a landing (tasks/<id>/land-intent.json): written, durably, before the checkout or the base
// branch changes, removed once the landing is recorded (`landed` in the journal, landedAs in task.json and
// result.json). One left behind means the daemon died in between; git decides what happened (resolveIntent in
// src/git/land.ts): the branch holds the commit → the landing is recorded, once; else the checkout is put back. Done
// at daemon start for every task, open or closed (recoverLandings), and by a repeat `land` of the task.
import { existsSync, readdirSync } from "node:fs";
import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import type { JournalRecordOf } from "../../core/lifecycle/journal-record.js";
import type { Landing } from "../../core/types.js";
import { type LandIntent, resolveIntent, sweepLandScratch } from "../ports/git-port.js";
import { writeAtomic } from "../../store/fsio.js";
import type { TaskStore } from "../../store/task-store.js";
import { recordClosedLanding } from "../task/land-record.js";
import type { TaskRecord } from "../task/record.js";
import type { Logger } from "../server/server-types.js";

const FILE = "land-intent.json";

const pathOf = (store: Pick<TaskStore, "taskPaths">, taskId: string) => join(store.taskPaths(taskId).dir, FILE);

export async function writeIntent(store: Pick<TaskStore, "taskPaths">, i: LandIntent): Promise<void> {
  await writeAtomic(pathOf(store, i.taskId), `${JSON.stringify(i)}\n`);
}

export async function readIntent(store: Pick<TaskStore, "taskPaths">, taskId: string): Promise<LandIntent | undefined> {
  try {
    return JSON.parse(await readFile(pathOf(store, taskId), "utf8")) as LandIntent;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
}

export async function clearIntent(store: Pick<TaskStore, "taskPaths">, taskId: string): Promise<void> {
  await rm(pathOf(store, taskId), { force: true });
}

/** The journal record of a landing (the same for one done now and one found after a restart). */
export function landedEvent(
  rec: TaskRecord,
  l: Landing,
  committed?: string,
  recovered = false,
): JournalRecordOf<"landed"> {
  return {
    type: "landed",
    cycle: rec.cycle,
    commit: l.landedAs,
    strategy: l.strategy,
    baseBranch: l.baseBranch,
    workHead: l.workHead,
    ...(committed ? { committed } : {}),
    ...(recovered ? { recovered: true } : {}),
  };
}

/**
 * Settle a task's leftover intent, if any. `record` stores a landing found done (the caller's way: a live task's
 * save, or the files of one not loaded). Returns what was found, or undefined when there was no intent.
 */
export async function settleIntent(
  store: Pick<TaskStore, "taskPaths">,
  taskId: string,
  alreadyRecorded: (landedAs: string) => boolean,
  record: (landing: Landing, committed?: string) => Promise<void>,
  timeoutMs?: number,
): Promise<{ landed: boolean; said: string } | undefined> {
  const intent = await readIntent(store, taskId);
  if (!intent) return undefined;
  const r = await resolveIntent(intent, timeoutMs !== undefined ? { timeoutMs } : {});
  if (r.landed && r.landing && !alreadyRecorded(intent.newHead)) await record(r.landing, intent.committed);
  await clearIntent(store, taskId);
  return { landed: r.landed, said: r.said };
}

/**
 * At daemon start, before tasks are recovered: every leftover intent settled (a found landing written into the
 * task's files and journal), and the scratch a killed daemon's `land --check` left removed.
 */
export async function recoverLandings(store: TaskStore, root: string, log: Logger, timeoutMs?: number): Promise<void> {
  for (const dir of await sweepLandScratch().catch(() => [] as string[]))
    log.info({ dir }, "removed a landing's scratch a stopped daemon left");
  let ids: string[];
  try {
    ids = readdirSync(root);
  } catch {
    return;
  }
  for (const taskId of ids) {
    if (!existsSync(join(root, taskId, FILE))) continue;
    try {
      const rec = await store.readTask<TaskRecord>(taskId);
      const out = await settleIntent(
        store,
        taskId,
        (landedAs) => rec.landing?.landedAs === landedAs,
        async (landing, committed) => {
          // A closed task's files take it (land-record.ts, as task.land writes a closed task's landing).
          const event = landedEvent(rec, landing, committed, true);
          const result = await store.readResult(taskId);
          if (result) await recordClosedLanding(store, rec, result, { landing }, event);
          else {
            await store.writeTask({ ...rec, landing });
            await store.appendEvent(taskId, event);
          }
        },
        timeoutMs,
      );
      if (out) log.info({ taskId, landed: out.landed }, `an interrupted landing was resolved: ${out.said}`);
    } catch (e) {
      log.warn({ taskId, err: (e as Error).message }, "an interrupted landing could not be resolved; `land` it again");
    }
  }
}
