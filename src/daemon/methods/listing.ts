// task.list: one page of tasks, newest first, answered from memory, one row per task (task.get has the whole
// result). Open tasks show the row of their live result; every other task shows the row its last harvest left in the index (no result.json is read, except for an index line
// written before rows existed). Pages are cut by a cursor (the last task id of the previous page).
import { DshError } from "../../core/errors.js";
import { isValidTaskId } from "../../core/ids.js";
import { rowOf, storedResultRow, type TaskRow } from "../../store/task-index.js";
import type { TaskStore } from "../../store/task-store.js";
import type { Supervisor } from "../task/supervisor-types.js";

/** Rows per page without a limit, and the most one page may hold (keeps a reply far below the 1 MiB frame cap). */
export const LIST_DEFAULT_LIMIT = 200;
export const LIST_MAX_LIMIT = 1000;

export interface ListParams {
  status?: string[];
  owner?: string;
  limit?: number;
  cursor?: string;
}

export interface ListPage {
  tasks: TaskRow[];
  /** Present when more tasks match: pass it back as `cursor` for the next page. */
  nextCursor?: string;
}

export async function listTasks(sup: Supervisor, p: ListParams): Promise<ListPage> {
  if (p.cursor !== undefined && !isValidTaskId(p.cursor)) {
    throw new DshError(
      "BAD_PARAMS",
      `cursor ${JSON.stringify(p.cursor)} is not a task id; pass the nextCursor of the previous task.list reply`,
    );
  }
  const limit = Math.min(p.limit ?? LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT);
  const wanted = p.status ? new Set(p.status) : undefined;
  const { store } = sup.deps;
  const candidates = store.listTasks({
    ...(p.owner !== undefined ? { owner: p.owner } : {}),
    ...(p.cursor !== undefined ? { before: p.cursor } : {}),
  });
  const tasks: TaskRow[] = [];
  for (const s of candidates) {
    // The index may trail a harvest by a few ms: an open task's status is its live one.
    const live = sup.tasks.get(s.taskId);
    const status = live?.result?.status ?? s.row?.status ?? s.status;
    if (wanted && !wanted.has(status)) continue;
    if (tasks.length === limit) return { tasks, nextCursor: tasks[tasks.length - 1]!.taskId };
    // A row, not the whole live result: 1,000 open tasks' results made a reply of several hundred ms to build.
    const row = (live?.result && rowOf(live.result)) ?? s.row ?? (await legacyRow(store, s.taskId));
    if (row) tasks.push(row);
  }
  return { tasks };
}

/** An index line from before rows were kept: read that task's result.json once. */
async function legacyRow(store: Pick<TaskStore, "readResult">, taskId: string): Promise<TaskRow | undefined> {
  return storedResultRow(await store.readResult(taskId).catch(() => undefined));
}
