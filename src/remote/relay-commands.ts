// The owner's commands on a remote task, forwarded to its machine's daemon: respond (a new cycle there, followed
// here), abort (the remote settles the cycle; the follow loop records it), close (closed there, then here).
import { isSettledStatus } from "../core/derive.js";
import type { AgentResult } from "../core/types.js";
import type { RemoteFollow } from "./relay-follow.js";
import { mayAbort } from "../core/task-cycle.js";
import { stepRemote } from "./relay-machine.js";
import { localize, type RelayContext, type RelayLive } from "./relay-types.js";

export async function relayRespond(
  ctx: RelayContext,
  follow: RemoteFollow,
  live: RelayLive,
  message: string,
): Promise<{ cycle: number; queued: boolean }> {
  const link = await ctx.ready(live.rec.remote!.label);
  const r = await link.request<{ cycle: number; queued?: true }>("task.respond", {
    taskId: live.rec.remote!.taskId,
    message,
  });
  live.rec.cycle = r.cycle;
  delete live.rec.timing.settledAt;
  await live.journal({ type: "respond", cycle: r.cycle, remote: true });
  await stepRemote(ctx, live, { type: "remote_started", cycle: r.cycle });
  const now = await link.request<AgentResult>("task.get", { taskId: live.rec.remote!.taskId }).catch(() => undefined);
  if (now && !isSettledStatus(now.status)) await follow.snapshot(live, now, true);
  else await ctx.sup.deps.store.writeTask(live.rec);
  void follow.follow(live);
  return { cycle: r.cycle, queued: r.queued === true };
}

export async function relayAbort(ctx: RelayContext, live: RelayLive): Promise<boolean> {
  if (!mayAbort(live.state.phase, live.result?.status ?? live.rec.status)) return false;
  if (live.state.phase.name !== "running") {
    // A settled cycle: as for a local task, the abort closes the task there and here; its verdict stands.
    await relayClose(ctx, live, false);
    return true;
  }
  const link = await ctx.ready(live.rec.remote!.label);
  const r = await link.request<{ aborted_ids: string[] }>("task.abort", { taskIds: [live.rec.remote!.taskId] });
  // The abort settles the remote cycle; the follow loop records it (one delivery, as for a local abort).
  return r.aborted_ids.includes(live.rec.remote!.taskId);
}

export async function relayClose(ctx: RelayContext, live: RelayLive, closePane: boolean): Promise<AgentResult> {
  const link = await ctx.ready(live.rec.remote!.label);
  const r = await link.request<AgentResult>("task.close", { taskId: live.rec.remote!.taskId, closePane });
  const result = localize(live, r);
  // The machine journals the close (the other machine's daemon ended its child); the phase says closed.
  await stepRemote(ctx, live, { type: "close", closePane, headless: false });
  live.rec.status = result.status;
  live.result = result;
  await ctx.sup.deps.store.saveTask(live.rec, result, { sync: true });
  ctx.sup.notifyStatus(live, result, { settled: false });
  return result;
}
