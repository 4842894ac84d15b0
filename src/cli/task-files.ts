// Read-only views of the task directories (shared/design.md §6): ids, result.json, diff.patch.
// Reading files keeps `show`, `result` and `diff` working after the daemon is gone.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { DshError } from "../core/errors.js";
import { isValidTaskId } from "../core/ids.js";
import type { AgentResult } from "../core/types.js";
import { resolveTaskId } from "./ids.js";

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
  return readdirSync(dir).filter((n) => isValidTaskId(n)).sort();
}

/** Resolve a typed id or prefix to a task id of this home. */
export function resolveId(home: string, input: string): string {
  return resolveTaskId(input, knownTaskIds(home));
}

/** The exact text of result.json (the latest AgentResult). */
export function readResultText(home: string, taskId: string): string {
  const file = join(taskDir(home, taskId), "result.json");
  if (!existsSync(file)) {
    throw new DshError("TASK_NOT_FOUND", `task ${taskId} has no result.json yet (it is still being set up); try again in a moment or run \`dsh-herdr wait ${taskId}\``);
  }
  return readFileSync(file, "utf8");
}

export function readResult(home: string, taskId: string): AgentResult {
  const text = readResultText(home, taskId);
  try {
    return JSON.parse(text) as AgentResult;
  } catch {
    throw new DshError("RESULT_INVALID", `${join(taskDir(home, taskId), "result.json")} is not valid JSON; the daemon rewrites it on the next status change (\`dsh-herdr daemon status\`)`);
  }
}
