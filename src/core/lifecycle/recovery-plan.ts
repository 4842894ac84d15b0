// What a restarted daemon does with each open task, decided from what it finds: task.json, the journal replayed
// (events.jsonl) and the evidence (is a child alive, did the session end its cycle meanwhile). Pure: the daemon
// gathers the inputs (src/daemon/recover/recover.ts) and carries the plan out. Effects the journal shows are never
// repeated (a sent prompt is not sent again); effects it does not show are done now.
import type { FoundCycle, SettleReason } from "./task-cycle.js";

export interface RecoveryInput {
  /** The record's cycle after the journal's follow-ups are applied. */
  cycle: number;
  /** The record's status is a settled one and the journal has that cycle's settled harvest. */
  harvested: boolean;
  closed?: { closePane: boolean };
  interrupted?: { code?: string };
  /** A child was launched (journaled handle, or found and adopted). */
  launched: boolean;
  /** The launched child still runs (meaningless when !launched). */
  alive: boolean;
  /** The cycle's prompt went out (prompt_sent, or the record's promptedAt for cycle 1). */
  prompted: boolean;
  /** The child confirmed the cycle's prompt (prompt_accepted, or typed into the runtime). */
  accepted: boolean;
  /** The journal has this cycle's settle (its harvest may not have run). */
  settling: boolean;
  /** The session shows the cycle ended after its prompt, with no retry to come. */
  endedMeanwhile: boolean;
  /** The reason the journal's settle record of this cycle gives: the verdict, carried out as it was judged. */
  settleReason?: SettleReason;
  /** The record's status (a harvested cycle's settled status: what respond and abort are asked against). */
  status?: string;
}

export type RecoveryPlan =
  | { kind: "finish_close"; closePane: boolean }
  | { kind: "finish_abort"; timeout: boolean }
  /** Never launched and never settled: nothing ran, so starting it again repeats nothing. */
  | { kind: "start_again" }
  /**
   * A follow-up whose prompt never went out and whose child does not run (a parked child's relaunch the crash cut
   * short, or a child that ended before it took the follow-up): relaunch pi on the task's session, then prompt it.
   */
  | { kind: "relaunch_follow_up"; cycle: number }
  /** Settled and harvested: the stored result stands; a live child is watched (the owner may respond). */
  | { kind: "keep_settled"; found: FoundCycle }
  /** Launched, prompt not (confirmed) out and the child lives: push it on hello (the child runs a cycle once). */
  | { kind: "push_prompt"; found: FoundCycle }
  /** The child ended before it took its prompt. */
  | { kind: "failed_before_prompt" }
  /**
   * The cycle ran and ended (before the crash, or while the daemon was away): settle it now. `journaled`: the journal
   * holds this settle's record and reason (the verdict); else the session's ending is judged from the evidence.
   */
  | { kind: "settle"; found: FoundCycle; reason: SettleReason; journaled: boolean }
  /** The cycle ran and its child is gone. */
  | { kind: "gone"; found: FoundCycle }
  /** The cycle runs on: watch it again. */
  | { kind: "resume_running"; found: FoundCycle };

export function planRecovery(i: RecoveryInput): RecoveryPlan {
  if (i.closed) return { kind: "finish_close", closePane: i.closed.closePane };
  if (i.interrupted) return { kind: "finish_abort", timeout: i.interrupted.code === "TIMEOUT" };
  const cycle = i.cycle;
  // The settle record is the verdict: a reason read from it is kept; evidence read after it is late evidence.
  const journaled: SettleReason = i.settleReason ?? { kind: "settled_before_crash" };
  // A settled cycle is final whatever else is missing (a launch that stalled leaves no handle): its owner was told
  // the verdict, so it is never started again. Looked at before anything that would launch.
  if (i.harvested)
    return {
      kind: "keep_settled",
      found: {
        found: "settled",
        cycle,
        reason: journaled,
        ...(i.alive ? {} : { childEnded: true }),
        ...(i.status !== undefined ? { status: i.status } : {}),
      },
    };
  const running: FoundCycle = { found: "prompt_out", cycle };
  if (i.settling) return { kind: "settle", found: running, reason: journaled, journaled: i.settleReason !== undefined };
  // A follow-up nobody prompted yet, with no child to take it: its session holds the earlier cycles, so pi is
  // relaunched on it (starting the task again would drop the worktree's work; failing it would lose the follow-up).
  if (cycle > 1 && !i.prompted && !(i.launched && i.alive)) return { kind: "relaunch_follow_up", cycle };
  if (!i.launched) return { kind: "start_again" };
  const unconfirmed = i.prompted && !i.accepted;
  if (!i.prompted || (unconfirmed && i.alive)) {
    if (!i.alive) return { kind: "failed_before_prompt" };
    return { kind: "push_prompt", found: { found: "prompt_pending", cycle } };
  }
  // The cycle's prompt went out: it runs (or ran while the daemon was away). Never prompt it again.
  if (i.endedMeanwhile)
    return { kind: "settle", found: running, reason: { kind: "settled_before_crash" }, journaled: false };
  if (!i.alive) return { kind: "gone", found: running };
  return { kind: "resume_running", found: running };
}
