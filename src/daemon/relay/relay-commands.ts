// The owner's commands on a remote task, forwarded to its machine's daemon: respond (a new cycle there, as an
// idempotent request: relay-requests.ts), abort (the remote settles the cycle; its settle reaches us as for any
// other), close (closed there, then here; a task the machine lost or whose word was refused closes here alone).
import { recordStatus, statusFor, nextActionFor } from "../../core/result/derive.js";
import { closedResult } from "../../core/result/agent-result.js";
import { givenCaps, type CapLimits } from "../../core/budget.js";
import { DshError, isDshError } from "../../core/errors.js";
import { mayAbort, mayRespond } from "../../core/lifecycle/task-cycle.js";
import type { AgentResult } from "../../core/types.js";
import type { RemoteFollow } from "./relay-follow.js";
import { verdictHere } from "./relay-follow.js";
import { fetchPart } from "./relay-fetch.js";
import { stepRemote } from "./relay-machine.js";
import { newRequestId, type RelayRequests, type RemoteRequest, type RespondAnswer } from "./relay-requests.js";
import { checkRemoteResult, isRemoteViolation, REMOTE_RESULT_MAX_BYTES } from "./remote-check.js";
import { awaitingSpawn, localize, settledHere, type RelayContext, type RelayLive } from "./relay-types.js";

export async function relayRespond(
  ctx: RelayContext,
  requests: RelayRequests,
  live: RelayLive,
  message: string,
  caps: CapLimits = {},
): Promise<{ cycle: number; queued: boolean }> {
  const pending = requests.pendingOf(live);
  // A retry while a follow-up is journaled and not answered joins it: one cycle, whatever the retry said.
  if (pending?.method === "task.respond") return (await requests.call(live)) as RespondAnswer;
  if (pending || awaitingSpawn(live))
    throw new DshError(
      "BAD_STATE",
      `task ${live.rec.taskId} is still being spawned on machine ${live.rec.remote!.label}; wait for it (\`dsh-herdr wait ${live.rec.taskId}\`)`,
    );
  const phase = live.state.phase;
  const status = live.result?.status ?? live.rec.status;
  if (!mayRespond(phase, status))
    throw new DshError(
      "BAD_STATE",
      `task ${live.rec.taskId} is ${status}; respond needs a completed or blocked task (wait for it, or spawn a new task)`,
    );
  await ctx.ready(live.rec.remote!.label); // unreachable now: the error, nothing journaled
  const req: RemoteRequest = {
    requestId: newRequestId(),
    method: "task.respond",
    // A raise of the spend caps goes with it: the caps count there, where the child spends.
    params: { taskId: live.rec.remote!.taskId, message, ...givenCaps(caps) },
    cycle: phase.cycle + 1,
  };
  await requests.begin(live, req);
  return (await requests.call(live)) as RespondAnswer;
}

/** The machine answered the follow-up (now, or at a reconcile): its cycle starts here too (unless it did). */
export async function adoptFollowUp(
  ctx: RelayContext,
  follow: RemoteFollow,
  live: RelayLive,
  req: RemoteRequest,
  a: RespondAnswer,
): Promise<void> {
  await startFollowUp(ctx, live, a.cycle);
  // The answer's record carries the request id: a restarted daemon knows it was answered.
  await live.journal({ type: "respond", cycle: a.cycle, remote: true, requestId: req.requestId });
  await follow.refresh(live);
}

/**
 * A follow-up whose answer did not come (the link dropped, the machine did not answer): it is journaled and goes
 * again until answered, so its cycle starts here now, as a local follow-up's does (the task reads running and
 * `wait` waits for that cycle); the reconcile's answer finds it started.
 */
export async function followUpUnanswered(ctx: RelayContext, live: RelayLive, req: RemoteRequest): Promise<void> {
  await startFollowUp(ctx, live, req.cycle);
}

/** The last result, read again as its next cycle's start: running, waited for, without the last cycle's error. */
export function runningAgain(last: AgentResult): AgentResult {
  const status = statusFor({ kind: "running_there" });
  const result: AgentResult = { ...last, status, nextAction: nextActionFor(status) };
  delete result.error;
  return result;
}

async function startFollowUp(ctx: RelayContext, live: RelayLive, cycle: number): Promise<void> {
  const p = live.state.phase;
  if (p.name === "closed" || p.cycle >= cycle) return; // started here already (or even settled)
  live.rec.cycle = cycle;
  delete live.rec.timing.settledAt;
  await live.journal({ type: "remote_cycle", cycle });
  await stepRemote(ctx, live, { type: "remote_started", cycle });
  if (live.result && live.state.phase.name === "running") {
    const result = runningAgain(live.result);
    live.result = result;
    recordStatus(live.rec, { kind: "result", status: result.status });
    ctx.sup.notifyStatus(live, result, { settled: false });
    await ctx.sup.deps.store.saveTask(live.rec, result, { sync: false });
  } else await ctx.sup.deps.store.writeTask(live.rec);
}

export async function relayAbort(ctx: RelayContext, live: RelayLive): Promise<boolean> {
  if (!mayAbort(live.state.phase, live.result?.status ?? live.rec.status)) return false;
  if (live.state.phase.name !== "running" || awaitingSpawn(live)) {
    // A settled cycle (or a spawn not answered yet): as for a local task, the abort closes the task there and
    // here; a settled verdict stands.
    await relayClose(ctx, live, false);
    return true;
  }
  const link = await ctx.ready(live.rec.remote!.label);
  const r = await link.request("task.abort", { taskIds: [live.rec.remote!.taskId] });
  // The abort settles the remote cycle; its settle reaches us (one delivery, as for a local abort).
  return Array.isArray(r?.aborted_ids) && r.aborted_ids.includes(live.rec.remote!.taskId);
}

/**
 * Close there, then here. The remote's closed result is checked like any; one too large for a frame is read in
 * pages. A task the machine lost (REMOTE_LOST), whose word was refused (REMOTE_INVALID) or that it never spawned
 * closes here with this daemon's own result, whatever the machine says (or if it cannot be reached).
 */
export async function relayClose(ctx: RelayContext, live: RelayLive, closePane: boolean): Promise<AgentResult> {
  const { label, taskId: remoteId } = live.rec.remote!;
  const ours = settledHere(live) || awaitingSpawn(live);
  let result: AgentResult | undefined;
  try {
    if (awaitingSpawn(live)) throw new DshError("TASK_NOT_FOUND", "never spawned there");
    const link = await ctx.ready(label);
    let raw: unknown;
    try {
      raw = await link.request("task.close", { taskId: remoteId, closePane });
    } catch (e) {
      // Closed there, its closed result too large for one frame: read it in pages.
      if (!isDshError(e) || e.code !== "FRAME_TOO_LARGE") throw e;
      const f = await fetchPart(link, remoteId, "result", REMOTE_RESULT_MAX_BYTES, 30_000);
      raw = JSON.parse(f.bytes.toString("utf8")) as unknown;
    }
    // Closed here whatever the remote's result says of its status.
    result = closedResult(localize(ctx.sup, live, checkRemoteResult(raw, { remoteTaskId: remoteId, settled: true })));
  } catch (e) {
    if (!ours && !isRemoteViolation(e) && !(isDshError(e) && e.code === "TASK_NOT_FOUND")) throw e;
    if (!ours)
      ctx.sup.deps.log.warn({ taskId: live.rec.taskId, label, err: String(e) }, "remote close not taken; closed here");
  }
  result ??= closedResult(live.result ?? verdictHere(live, "closed", undefined, ctx.sup.deps.clock.now()));
  if (ours && live.result) result = closedResult(live.result); // our verdict stands, not the machine's last word
  // The machine journals the close (the other machine's daemon ended its child); the phase says closed.
  await stepRemote(ctx, live, { type: "close", closePane, headless: false });
  recordStatus(live.rec, { kind: "result", status: result.status });
  live.result = result;
  await ctx.sup.deps.store.saveTask(live.rec, result, { sync: true });
  ctx.sup.notifyStatus(live, result, { settled: false });
  return result;
}
