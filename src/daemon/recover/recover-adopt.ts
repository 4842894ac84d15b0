// Re-attaching a child to its task after a crash: a launch the daemon died in before journaling its handle is
// asked of the runtime (find), and a child it left running is adopted instead of started a second time.
import type { Runtime } from "../../runtime/types.js";
import type { TaskRecord } from "../task/record.js";
import type { TaskPorts } from "../task/runner-types.js";

/**
 * The daemon died after runtime.launch and before journaling its handle: the runtime may still hold that child.
 * It is adopted (its worktree kept: the child works in it), never started a second time.
 */
export async function adopt(
  ports: Pick<TaskPorts, "store" | "log">,
  runtime: Runtime,
  rec: TaskRecord,
  worktree: string | undefined,
): Promise<boolean> {
  if (!runtime.find) return false;
  // The child runs in the worktree journaled before the launch, even when task.json predates that record.
  const where = {
    taskId: rec.taskId,
    taskDir: ports.store.taskPaths(rec.taskId).dir,
    name: rec.name,
    cwd: worktree ?? rec.workdir,
  };
  const found = await runtime.find(where).catch((e: unknown) => {
    ports.log.warn(
      { taskId: rec.taskId, err: String(e) },
      "could not ask the runtime for a child launched before the crash",
    );
    return undefined;
  });
  if (!found) return false;
  rec.handle = found;
  return true;
}
