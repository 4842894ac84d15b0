// Start-up recovery of remote tasks (called from src/daemon/recover/recover.ts): each is registered from its record and
// result.json, with its unanswered request (relay-requests.ts) pending again. Start-up never waits on a machine:
// reattaching runs in the background, each request bounded, while the socket serves; meanwhile an open remote task
// reads its last status with a `machine LABEL unreachable since ...` warning, until the link answers.
import { isSettledStatus, recordStatus } from "../../core/result/derive.js";
import type { JournalRecord } from "../../core/lifecycle/journal-record.js";
import { lifecycleOf, type SettleReason } from "../../core/lifecycle/task-cycle.js";
import type { MachineLink } from "../../link/link.js";
import { runningAgain } from "./relay-commands.js";
import type { RemoteFollow } from "./relay-follow.js";
import { stepRemote } from "./relay-machine.js";
import type { RelayRequests } from "./relay-requests.js";
import { awaitingSpawn, type RelayContext, type RelayLive, type RemoteRecord } from "./relay-types.js";

/** Settle reasons that are this daemon's verdict on a relayed cycle, not its machine's (relay-follow.ts settleHere). */
const OWN_VERDICTS = new Set<SettleReason["kind"]>(["remote_invalid", "remote_lost", "start_failed"]);

/**
 * A remote task found at start-up: registered from its record and result.json; a cycle recorded as settled is fed
 * to delivery again (the delivery id drops it when it was queued before the crash). An open cycle is read from the
 * machine again once its link answers (relayReattach); one whose settle record holds a verdict of this daemon's own
 * (REMOTE_INVALID, REMOTE_LOST, a request the machine refused) is settled with it at once, needing no machine.
 */
export async function relayRecover(
  ctx: RelayContext,
  requests: RelayRequests,
  follow: RemoteFollow,
  rec: RemoteRecord,
  journal: { cycle: number; settled: Set<number>; settleReasons: Map<number, SettleReason>; settling: Set<number> },
  events: readonly JournalRecord[],
): Promise<void> {
  const { sup } = ctx;
  // A follow-up's cycle is journaled (remote_cycle) before its record is rewritten, unsynced: after a power cut
  // task.json and result.json can still be the cycle's before, while the machine runs the journaled one.
  const behind = journal.cycle > rec.cycle;
  if (behind) {
    rec.cycle = journal.cycle;
    recordStatus(rec, { kind: "running_there" });
    delete rec.timing.settledAt;
  }
  const live = sup.register(rec);
  const stored = await sup.deps.store.readResult(rec.taskId).catch(() => undefined);
  if (stored) live.result = behind ? runningAgain(stored) : stored;
  // The listing follows the record (start-up built the index from the task.json it read).
  if (behind) await sup.deps.store.writeTask(rec, { sync: false });
  await requests.restore(live, events);
  if (awaitingSpawn(live)) {
    // The spawn was journaled, its answer never came: the reconcile sends it again (the phase stays queued).
  } else if (
    !behind &&
    journal.settled.has(rec.cycle) &&
    stored &&
    isSettledStatus(stored.status) &&
    // A synced settle record whose rewrite a power cut lost leaves result.json of the cycle before; as for a local
    // task (restoreResult), the record and the result must agree, or the settle is read from the machine again.
    stored.status === rec.status
  ) {
    const reason = journal.settleReasons.get(rec.cycle) ?? { kind: "remote", status: stored.status };
    await stepRemote(ctx, live, {
      type: "restored",
      found: { found: "settled", cycle: rec.cycle, reason, status: stored.status },
      childAlive: false,
    });
    sup.notifyStatus(live, stored, { settled: true });
  } else {
    // The cycle runs there (or settled there and is not recorded here yet): read again once the link is up.
    if (journal.settling.has(rec.cycle)) live.settleJournaled = rec.cycle;
    // Its settled status was journaled, its result.json not written yet: recorded once the result is read again.
    if (journal.settled.has(rec.cycle)) live.statusJournaled = rec.cycle;
    await stepRemote(ctx, live, {
      type: "restored",
      found: { found: "prompt_out", cycle: rec.cycle },
      childAlive: false,
    });
    // The journaled verdict is this daemon's own: carried out now (its settle record is not written twice).
    const reason = journal.settling.has(rec.cycle) ? journal.settleReasons.get(rec.cycle) : undefined;
    if (reason && OWN_VERDICTS.has(reason.kind))
      await follow.settleHere(live, { type: "settle_recovered", reason, journaled: true });
    // The machine refused the follow-up that started this cycle here, and the daemon stopped before that refusal's
    // settle: nothing runs there for this cycle (the machine names the one before), so it settles with the refusal.
    const refusal = journal.settling.has(rec.cycle) ? undefined : refusedFollowUp(events, rec.cycle);
    if (refusal) {
      const label = rec.remote!.label;
      await follow.settleHere(live, {
        type: "launch_failed",
        code: refusal.code,
        message:
          refusal.message ??
          `machine ${label} refused the follow-up that starts cycle ${rec.cycle} (${refusal.code}); read the task there (\`dsh-herdr logs ${rec.taskId}\`), then respond again`,
      });
    }
  }
  await live.journal({
    type: "recovered",
    plan: "remote",
    label: rec.remote!.label,
    phase: live.state.phase.name,
  });
}

/** The refusal (journaled) of the follow-up request that starts `cycle`, if the machine refused it. */
function refusedFollowUp(
  events: readonly JournalRecord[],
  cycle: number,
): { code: string; message?: string } | undefined {
  const req = events.findLast((e) => e.type === "remote_request" && e.method === "task.respond" && e.cycle === cycle);
  if (req?.type !== "remote_request") return undefined;
  const refused = events.find((e) => e.type === "remote_request_refused" && e.requestId === req.requestId);
  if (refused?.type !== "remote_request_refused") return undefined;
  return { code: refused.code, message: refused.message };
}

/**
 * After every remote task is registered: each machine with open ones is reattached in the background. Returns at
 * once (the socket serves); the tasks carry the "unreachable since" warning until their link answers.
 */
export function relayReattach(
  ctx: RelayContext,
  follow: RemoteFollow,
  m: { knows(label: string): boolean; link(label: string): MachineLink; since: number },
): void {
  const { sup } = ctx;
  const byLabel = new Map<string, RelayLive[]>();
  for (const l of sup.tasks.values()) {
    if (!l.rec.remote || lifecycleOf(l.state.phase)) continue;
    byLabel.set(l.rec.remote.label, [...(byLabel.get(l.rec.remote.label) ?? []), l]);
  }
  for (const [label, lives] of byLabel) {
    if (!m.knows(label)) {
      sup.deps.log.warn({ label }, "remote tasks of a machine no longer in config.json: left as they are");
      continue;
    }
    for (const live of lives)
      void follow.warnUnreachable(
        live,
        m.since,
        "not reattached yet since this daemon started; it reconnects on its own",
      );
    // Making the link starts it; its "up" runs the follow side's reattach and the requests' reconcile.
    const link = m.link(label);
    void link
      .ready()
      .catch((e: unknown) =>
        sup.deps.log.warn(
          { label, err: String(e) },
          "machine unreachable at start-up; its tasks keep their last status",
        ),
      );
  }
}
