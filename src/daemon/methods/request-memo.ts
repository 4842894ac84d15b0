// Idempotent requests: another machine's daemon relaying a task here (src/daemon/relay/relay-requests.ts) gives each
// task.spawn and task.respond a request id, and sends it again when the reply was lost (the link dropped, or that
// daemon was restarted while the request was in flight). A repeat gets the first answer; the work runs once.
// The first answer is found in memory while this daemon runs (a repeat arriving while the first still runs waits
// for it), else from what the request left on disk: the spawned task's record carries its request id, a follow-up's
// journal record (`respond`) carries its.
import type { Runner } from "../task/runner-types.js";
import type { Supervisor } from "../task/supervisor-types.js";
import type { Result } from "../../protocol/methods.js";

/** In-memory answers kept per daemon (the disk answers the rest): enough for every request of a busy hour. */
const MEMO_MAX = 10_000;

async function once<T>(
  sup: Supervisor,
  key: string,
  onDisk: () => Promise<T | undefined>,
  run: () => Promise<T>,
): Promise<T> {
  const memo = sup.requestMemo;
  const known = memo.get(key);
  if (known) return known as Promise<T>;
  const p = (async () => (await onDisk()) ?? (await run()))();
  memo.set(key, p);
  if (memo.size > MEMO_MAX) memo.delete(memo.keys().next().value!);
  // A refused request (an error) may be sent again and tried afresh.
  p.catch(() => {
    if (memo.get(key) === p) memo.delete(key);
  });
  return p;
}

/** task.spawn's answer (src/protocol/). */
export type SpawnAnswer = Result<"task.spawn">;

/** task.spawn with a request id: the task an earlier request with that id spawned, else a new one. */
export function spawnOnce(sup: Supervisor, requestId: string, run: () => Promise<SpawnAnswer>): Promise<SpawnAnswer> {
  return once(
    sup,
    `spawn:${requestId}`,
    async () => {
      for (const live of sup.tasks.values()) {
        if ((live.rec as { requestId?: string }).requestId !== requestId) continue;
        const { taskId, name } = live.rec;
        return { taskId, subagent_id: taskId, name, status: sup.statusOf(live), queued: false };
      }
      return undefined;
    },
    run,
  );
}

/** task.respond with a request id: the cycle an earlier request with that id started, else a new cycle. */
export function respondOnce(
  sup: Supervisor,
  live: Pick<Runner, "rec">,
  requestId: string,
  run: () => Promise<{ cycle: number; queued: boolean }>,
): Promise<{ cycle: number; queued: boolean }> {
  return once(
    sup,
    `respond:${live.rec.taskId}:${requestId}`,
    async () => {
      const events = await sup.deps.store.readEvents(live.rec.taskId).catch(() => []);
      const first = events.find((e) => e.type === "respond" && e.requestId === requestId);
      return first?.type === "respond" ? { cycle: first.cycle, queued: false } : undefined;
    },
    run,
  );
}
