// owner.move for one task: its record, result and journal name the new owner, behind its harvests (the chain), so a
// concurrent rewrite of task.json cannot restore the old owner.
import type { TaskPort } from "./runner-types.js";

export type OwnerMovePort = TaskPort<"rec" | "result" | "journal" | "onChain", "store" | "log">;

export function moveOwner(r: OwnerMovePort, to: string): Promise<void> {
  const { rec } = r;
  const { store, log } = r.ports;
  const from = rec.owner;
  const run = r.onChain(async () => {
    rec.owner = to;
    await store.writeTask(rec);
    const moved = r.result ? { ...r.result, owner: to } : undefined;
    if (moved) await store.writeResult(rec.taskId, moved);
    await r.journal({ type: "owner_moved", from, to });
    if (moved) r.result = moved;
  });
  run.catch((e: unknown) => log.warn({ taskId: rec.taskId, err: String(e) }, "owner move failed"));
  return run;
}
