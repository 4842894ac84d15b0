// Start-up recovery of remote tasks (called from src/daemon/recover.ts): each is registered from its record and
// result.json, then every machine with open ones is reattached before the socket serves.
import { isSettledStatus } from "../core/derive.js";
import type { MachineLink } from "./link.js";
import type { RemoteFollow } from "./relay-follow.js";
import { lifecycleOf, type SettleReason } from "../core/task-cycle.js";
import { stepRemote } from "./relay-machine.js";
import type { RelayContext, RemoteRecord } from "./relay-types.js";

/**
 * A remote task found at start-up: registered from its record and result.json; a cycle recorded as settled is fed
 * to delivery again (the delivery id drops it when it was queued before the crash). Then the machine's link is
 * awaited (bounded): once up, open cycles are followed again. An unreachable machine leaves the task with its
 * last status and a warning; the link keeps trying.
 */
export async function relayRecover(
  ctx: RelayContext,
  rec: RemoteRecord,
  journal: { settled: Set<number>; settleReasons: Map<number, SettleReason>; settling: Set<number> },
): Promise<void> {
  const { sup } = ctx;
  const live = sup.register(rec);
  const stored = await sup.deps.store.readResult(rec.taskId).catch(() => undefined);
  if (stored) live.result = stored;
  if (journal.settled.has(rec.cycle) && stored && isSettledStatus(stored.status)) {
    const reason = journal.settleReasons.get(rec.cycle) ?? { kind: "remote", status: stored.status };
    await stepRemote(ctx, live, {
      type: "restored",
      phase: { name: "settled", cycle: rec.cycle, reason },
      childAlive: false,
    });
    sup.notifyStatus(live, stored, { settled: true });
  } else {
    // The cycle runs there (or settled there and is not recorded here yet): followed again once the link is up.
    if (journal.settling.has(rec.cycle)) live.settleJournaled = rec.cycle;
    await stepRemote(ctx, live, { type: "restored", phase: { name: "running", cycle: rec.cycle }, childAlive: false });
  }
  await live.journal({
    type: "recovered",
    plan: "remote",
    label: rec.remote!.label,
    phase: live.state.phase.name,
  });
}

/** After every remote task is registered: reattach to each machine with open ones, before the socket serves. */
export async function relayReattach(
  ctx: RelayContext,
  follow: RemoteFollow,
  m: { knows(label: string): boolean; link(label: string): MachineLink; reattachTimeoutMs: number },
): Promise<void> {
  const { sup } = ctx;
  const labels = new Set(
    [...sup.tasks.values()].filter((l) => l.rec.remote && !lifecycleOf(l.state.phase)).map((l) => l.rec.remote!.label),
  );
  await Promise.all(
    [...labels].map(async (label) => {
      if (!m.knows(label)) {
        sup.deps.log.warn({ label }, "remote tasks of a machine no longer in config.json: left as they are");
        return;
      }
      const link = m.link(label);
      let timer: NodeJS.Timeout | undefined;
      const up = new Promise<void>((resolve) => {
        if (link.state === "up") return resolve();
        link.once("up", () => resolve());
        timer = setTimeout(resolve, m.reattachTimeoutMs);
      });
      await up;
      if (timer) clearTimeout(timer);
      if (link.state === "up")
        await follow.onUp(label); // the "up" listener runs it too; follow() runs once per task
      else
        sup.deps.log.warn(
          { label, err: link.error?.message },
          "machine unreachable at start-up; its tasks keep their last status",
        );
    }),
  );
}
