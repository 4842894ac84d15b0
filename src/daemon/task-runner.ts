// Carries out the lifecycle machine's effects for one task: every event goes through `dispatch`, which takes the
// next phase from `step` (src/core/task-cycle.ts) at once and then performs the effects in their order (a journal
// record is written before the act it records). Timers, the runtime and the file watches live here, not in core.
import { step, type CycleEvent, type Effect, type JournalEntry } from "../core/task-cycle.js";
import { DshError } from "../core/errors.js";
import type { Live } from "./live.js";
import { pushSteer, steersMissed } from "./steer.js";
import type { Supervisor } from "./supervisor-types.js";

/** Feed one event to a task's machine. The phase changes synchronously; the returned promise ends with the effects. */
export function dispatch(sup: Supervisor, live: Live, ev: CycleEvent): Promise<void> {
  const before = live.state.phase;
  const { state, effects } = step(live.state, ev);
  live.state = state;
  // The settle's moment, before its slot is released: the next task admitted cannot start before it.
  if (effects.some((e) => e.type === "harvest_settled")) live.rec.timing.settledAt = Date.now();
  if (state.phase !== before)
    sup.deps.log.debug({ taskId: live.rec.taskId, event: ev.type, from: before.name, to: state.phase.name }, "phase");
  const done = run(sup, live, effects);
  live.effectsDone = Promise.all([live.effectsDone, done]).then(() => undefined);
  return done;
}

async function run(sup: Supervisor, live: Live, effects: Effect[]): Promise<void> {
  for (const e of effects) {
    try {
      await perform(sup, live, e);
    } catch (err) {
      sup.deps.log.error({ taskId: live.rec.taskId, effect: e.type, err: String(err) }, "lifecycle effect failed");
    }
  }
}

async function perform(sup: Supervisor, live: Live, e: Effect): Promise<void> {
  const { rec } = live;
  switch (e.type) {
    case "journal":
      if (e.entry.type === "settle") await sup.journalWritten(live, journalRecord(e.entry));
      else await sup.journal(live, journalRecord(e.entry));
      if (e.entry.type === "late_evidence") await noteLateEvidence(sup, live);
      return;
    case "push_prompt":
      sup.sendPrompt(live);
      return;
    case "arm_timeout":
      sup.armTimeout(live);
      return;
    case "cancel_timeout":
      if (live.timer) clearTimeout(live.timer);
      delete live.timer;
      return;
    case "arm_idle":
      armIdle(sup, live);
      return;
    case "cancel_idle":
      if (live.idleTimer) clearTimeout(live.idleTimer);
      delete live.idleTimer;
      return;
    case "resolve_readiness":
      live.readiness?.resolve();
      delete live.readiness;
      return;
    case "reject_readiness":
      live.readiness?.reject(new DshError("AGENT_STALLED", e.why));
      delete live.readiness;
      return;
    case "release_slot":
      sup.admission.cancel(rec.taskId, () => new DshError("BAD_STATE", `task ${rec.taskId} ended while queued`));
      sup.admission.release(rec.taskId);
      return;
    case "end_child":
      await endChild(sup, live, e.why);
      return;
    case "stop_turn":
      await stopTurn(sup, live, e.why);
      return;
    case "relaunch":
      delete live.runtimeState; // the parked child's exit is old news: a new one starts
      void sup.relaunch(live);
      return;
    case "refresh":
      await sup.refresh(live);
      return;
    case "set_lifecycle":
      rec.lifecycle = e.lifecycle;
      return;
    case "harvest_settled":
      await sup.settleHarvest(live, e.reason);
      return;
    case "push_steer":
      await pushSteer(sup, live, e.cycle, e.n);
      return;
    case "steers_missed":
      steersMissed(live, e.cycle, e.ns);
      return;
  }
}

/** The journal keeps the shapes recovery replays (settle{why,cycle}; interrupted{code}). */
function journalRecord(entry: JournalEntry): { type: string; [k: string]: unknown } {
  if (entry.type === "settle") return { type: "settle", why: entry.why, cycle: entry.cycle, reason: entry.reason };
  return { ...entry };
}

/** End the child's process (its pane goes too on tmux/Herdr; the session and output stay in the task dir). */
export async function endChild(sup: Supervisor, live: Live, why: string): Promise<void> {
  const { rec } = live;
  if (live.childEnded) return;
  live.childEnded = true;
  live.child?.push("child.abort", { reason: why });
  if (rec.handle)
    await sup.deps
      .runtimeFor(rec.runtime)
      .close(rec.handle)
      .catch(() => undefined);
}

/**
 * Stop the child's running turn, not the child: pi's abort through the child extension, else the runtime's interrupt
 * (Escape in a pane, the RPC abort headless). The session stays; a respond continues the conversation.
 */
async function stopTurn(sup: Supervisor, live: Live, why: string): Promise<void> {
  if (live.child && !live.child.closed) {
    live.child.push("child.abort", { reason: why });
    return;
  }
  if (live.rec.handle)
    await sup.deps
      .runtimeFor(live.rec.runtime)
      .sendKeys(live.rec.handle, ["Escape"])
      .catch((e: unknown) => sup.deps.log.warn({ taskId: live.rec.taskId, err: String(e) }, "could not stop the turn"));
}

function armIdle(sup: Supervisor, live: Live): void {
  const ms = sup.deps.config().idleChildMs;
  if (live.idleTimer) clearTimeout(live.idleTimer);
  delete live.idleTimer;
  if (!(ms > 0) || sup.stopped || live.childEnded) return;
  live.idleTimer = setTimeout(() => {
    delete live.idleTimer;
    if (!sup.stopped) void sup.dispatch(live, { type: "idle_expired" });
  }, ms);
  live.idleTimer.unref();
}

const LATE_WARNING =
  "result.md changed after the cycle settled; the settled result stands (respond to start a new cycle)";

/** A settled cycle is final: late evidence adds one warning to result.json and changes nothing else. */
async function noteLateEvidence(sup: Supervisor, live: Live): Promise<void> {
  const r = live.result;
  if (!r || r.warnings?.includes(LATE_WARNING)) return;
  live.rec.warnings = [...(live.rec.warnings ?? []), LATE_WARNING];
  live.result = { ...r, warnings: [...(r.warnings ?? []), LATE_WARNING] };
  await sup.deps.store.saveTask(live.rec, live.result, { sync: false });
}
