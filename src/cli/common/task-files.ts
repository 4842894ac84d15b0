// Read-only views of the task directories (shared/design.md §6): ids, result.json, diff.patch.
// Reading files keeps `show`, `result` and `diff` working after the daemon is gone.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { DshError } from "../../core/errors.js";
import { isValidTaskId } from "../../core/ids.js";
import type { AgentResult } from "../../core/types.js";
import { parseJsonLines } from "../../store/fsio.js";
import { storedResultRow, type TaskRow, type TaskSummary } from "../../store/task-index.js";
import { type KnownTask, resolveTaskId } from "./ids.js";

export function tasksDir(home: string): string {
  return join(home, "tasks");
}

export function taskDir(home: string, taskId: string): string {
  return join(tasksDir(home), taskId);
}

/** Every task id with a directory in this home. */
export function knownTaskIds(home: string): string[] {
  const dir = tasksDir(home);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((n) => isValidTaskId(n))
    .sort();
}

/**
 * The task index (tasks/index.jsonl) as the daemon last wrote it, latest line per task, for tasks that still have a
 * directory. Read-only: the daemon alone repairs and compacts it.
 */
export function readIndex(home: string): Map<string, TaskSummary> {
  const out = new Map<string, TaskSummary>();
  let text = "";
  try {
    text = readFileSync(join(tasksDir(home), "index.jsonl"), "utf8");
  } catch {
    return out; // no index yet (no task was ever recorded, or an old home): directories still resolve
  }
  const present = new Set(knownTaskIds(home));
  for (const l of parseJsonLines<TaskSummary>(text))
    if (isValidTaskId(l?.taskId) && present.has(l.taskId)) out.set(l.taskId, l);
  return out;
}

/** Every task of this home with its agent name and brief where the index has them. */
export function knownTasks(home: string): KnownTask[] {
  const index = readIndex(home);
  return knownTaskIds(home).map((taskId) => {
    const s = index.get(taskId);
    const t: KnownTask = { taskId };
    const name = s?.row?.agent?.name;
    if (typeof name === "string") t.name = name;
    const brief = s?.row?.brief ?? s?.brief;
    if (typeof brief === "string" && brief !== "") t.brief = brief;
    // A task on another machine is also known by its id there (its agent name ends in that id's last 4).
    const remoteId = s?.remoteTaskId ?? (s?.row?.agent?.machine ? remoteIdOf(home, taskId) : undefined);
    if (remoteId !== undefined) t.aliases = [remoteId];
    return t;
  });
}

/** task.json's `remote.taskId` (index lines written before the index kept it). */
function remoteIdOf(home: string, taskId: string): string | undefined {
  try {
    const rec = JSON.parse(readFileSync(join(taskDir(home, taskId), "task.json"), "utf8")) as {
      remote?: { taskId?: unknown };
    };
    return typeof rec.remote?.taskId === "string" ? rec.remote.taskId : undefined;
  } catch {
    return undefined;
  }
}

/** Resolve a typed id, prefix, suffix or agent name to a task id of this home. */
export function resolveId(home: string, input: string): string {
  return resolveTaskId(input, knownTasks(home));
}

/**
 * Listing rows without a daemon: the index's row per task, else the task's result.json; newest first. Statuses are
 * as last recorded (a task whose child moved on since the daemon stopped shows its old status).
 */
export function offlineRows(home: string): TaskRow[] {
  const index = readIndex(home);
  const rows: TaskRow[] = [];
  for (const taskId of knownTaskIds(home).reverse()) {
    let row = index.get(taskId)?.row;
    if (row === undefined) {
      try {
        row = storedResultRow(JSON.parse(readFileSync(join(taskDir(home, taskId), "result.json"), "utf8")));
      } catch {
        row = undefined; // still being set up, or unreadable: `dsh-herdr show` names the problem
      }
    }
    if (row !== undefined) rows.push(row);
  }
  return rows;
}

/** The exact text of result.json (the latest AgentResult). */
export function readResultText(home: string, taskId: string): string {
  const file = join(taskDir(home, taskId), "result.json");
  if (!existsSync(file)) {
    throw new DshError(
      "TASK_NOT_FOUND",
      `task ${taskId} has no result.json yet (it is still being set up); try again in a moment or run \`dsh-herdr wait ${taskId}\``,
    );
  }
  return readFileSync(file, "utf8");
}

export function readResult(home: string, taskId: string): AgentResult {
  const text = readResultText(home, taskId);
  try {
    return JSON.parse(text) as AgentResult;
  } catch {
    throw new DshError(
      "RESULT_INVALID",
      `${join(taskDir(home, taskId), "result.json")} is not valid JSON; the daemon rewrites it on the next status change (\`dsh-herdr daemon status\`)`,
    );
  }
}
