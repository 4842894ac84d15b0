// A task's files (tasks/<taskId>/...) and the journal record's "not worth an fsync" mark. Split from
// task-store.ts, which reads and writes them.
import { join } from "node:path";
import { assertTaskId } from "../core/ids.js";
import type { JournalRecord } from "../core/lifecycle/journal-record.js";

/**
 * Mark a journal event as not worth an fsync (it is still written before appendEvent returns, so a daemon crash
 * keeps it; a power cut may not). A symbol key: the mark travels with the event object but is never serialized.
 */
export const UNSYNCED: unique symbol = Symbol("dsh-herdr.unsynced");

export function unsynced<E extends JournalRecord>(event: E): E {
  return Object.assign(event, { [UNSYNCED]: true });
}

export interface TaskPaths {
  readonly dir: string;
  readonly taskJson: string;
  readonly events: string;
  readonly prompt: string;
  readonly resultMd: string;
  readonly resultJson: string;
  readonly diffPatch: string;
}

/** Paths of one task under `tasksDir`; throws BAD_TASK_ID for anything that is not a task id (`../x`, `/etc`). */
export function taskPathsIn(tasksDir: string, taskId: unknown): TaskPaths {
  const dir = join(tasksDir, assertTaskId(taskId));
  return {
    dir,
    taskJson: join(dir, "task.json"),
    events: join(dir, "events.jsonl"),
    prompt: join(dir, "prompt.md"),
    resultMd: join(dir, "result.md"),
    resultJson: join(dir, "result.json"),
    diffPatch: join(dir, "diff.patch"),
  };
}
