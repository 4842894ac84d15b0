// A task whose task.json was lost while the daemon was down: rebuilt from result.json, the index and the journal,
// only so that it can settle failed (RECORD_LOST) and its owner hears it.
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { TaskSummary } from "../../store/task-index.js";
import type { Runtimes } from "../ports/runtimes.js";
import type { TaskRecord } from "../task/record.js";
import type { Supervisor } from "../task/supervisor-types.js";
import { adopt } from "./recover-adopt.js";
import { replayJournal } from "./recover-replay.js";

/**
 * task.json is gone or unreadable (deleted, corrupted) while the daemon was down. The child cannot prove itself
 * any more (its token lived there), so the task cannot go on: its child (from the journal, or found in the
 * runtime) is ended and the task settles failed with RECORD_LOST, rebuilt from result.json and the index, so
 * its owner hears it and `wait` ends.
 */
export async function recoverLost(
  sup: Supervisor,
  runtimes: Runtimes,
  row: TaskSummary,
  cause: unknown,
): Promise<void> {
  const { store } = sup.deps;
  const taskId = row.taskId;
  const paths = store.taskPaths(taskId);
  const stored = await store.readResult(taskId).catch(() => undefined);
  const j = replayJournal(await store.readEvents(taskId).catch(() => []));
  const agent = stored?.agent ?? row.row?.agent;
  const createdAt = stored?.timing.createdAt ?? row.createdAt;
  const runtime = (agent?.runtime ?? "headless") as TaskRecord["runtime"];
  const cwd = stored?.cwd ?? row.cwd ?? paths.dir;
  const rec: TaskRecord = {
    taskId,
    owner: row.owner || stored?.owner || "cli",
    status: "running",
    createdAt,
    cwd,
    kind: "pi",
    role: stored?.role ?? row.row?.role ?? "worker",
    model: agent?.model ?? "unknown",
    thinking: agent?.thinking ?? "off",
    isolated: stored?.worktree !== undefined,
    timeoutMs: sup.deps.config().defaultTimeoutMs,
    runtime,
    name: agent?.name ?? taskId,
    token: randomBytes(24).toString("hex"),
    workdir: stored?.worktree?.path ?? cwd,
    sessionPath: join(paths.dir, "session.jsonl"),
    resultPath: paths.resultMd,
    cycle: Math.max(j.cycle, 1),
    timing: { ...(stored?.timing ?? {}), createdAt },
    ...((stored?.brief ?? row.brief) ? { brief: stored?.brief ?? row.brief } : {}),
    ...(stored?.worktree ? { worktree: stored.worktree } : {}),
    ...(j.handle ? { handle: j.handle } : {}),
  };
  delete rec.timing.settledAt;
  const live = sup.register(rec);
  if (stored?.diff) live.diff = stored.diff;
  const rt = runtimes.get(runtime);
  rec.handle ??= await adopt(live.ports, rt, rec, undefined).then((ok) => (ok ? rec.handle : undefined));
  // Whatever ran, it ran in this cycle: the machine takes it as running, and settles it RECORD_LOST.
  await live.restore([
    { feed: { type: "restored", found: { found: "prompt_out", cycle: rec.cycle }, childAlive: false } },
    { do: "resume" },
  ]);
  const why = cause instanceof Error ? cause.message : String(cause);
  await live.journal({ type: "recovered", plan: "record_lost", error: why });
  await live.restore([
    {
      feed: {
        type: "record_lost",
        message: `task.json of task ${taskId} was lost or unreadable while the daemon was down (${why.slice(0, 200)}); its child was ended. Inspect ${paths.dir}, then spawn the task again`,
      },
    },
    { do: "wait_chain" },
  ]);
}
