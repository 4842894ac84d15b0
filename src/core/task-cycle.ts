// The task lifecycle as a pure state machine: one phase instead of a handful of flags, and `step(state, event)`
// returning the next phase and the effects to carry out, in the order they must happen ("journal, then act").
// The daemon (src/daemon/task-runner.ts) feeds it events and performs the effects; nothing here does I/O.
//
//   queued ──admitted──▶ launching ──prompt_accepted──▶ running ──agent_end / gone / timeout / ...──▶ settled
//      ▲                    │  ▲                                                                  │   │
//      │                    │  └──────────── respond (parked child: relaunch on its session) ◀────┘   │
//      └── respond (no free slot) ◀── settled ──respond (child alive)──▶ awaiting_prompt ──▶ running   │
//   any phase ──close──▶ closed;  settled ──abort──▶ closed (the verdict stands);  in flight ──abort──▶ settled (interrupted)
//   running ──cap_reached──▶ settled (blocked: the turn stopped, the child kept; respond raises the cap)
//   settled ──idle_expired──▶ settled{parked}  ◀───────────────────────────────────────────────────────┘
//   in flight or queued ──steer──▶ the same phase (the message joins the running turn through the child; a steer pi
//   has not taken when the cycle settles is missed). respondAs(phase, status) says whether a respond steers or follows up.
import {
  cycleOf,
  isInFlight,
  type CycleEvent,
  type Effect,
  type JournalEntry,
  type Phase,
  type SettleReason,
  type StepResult,
  type TaskState,
} from "./cycle-phase.js";
import { settleVerdict } from "./settle-verdict.js";

// The public import path for the lifecycle stays this module.
export * from "./cycle-phase.js";
export * from "./settle-verdict.js";

const same = (state: TaskState): StepResult => ({ state, effects: [] });

/**
 * Settle the current cycle: the order is the durability order (journal first, then the acts it records).
 * `journaled`: recovery found this settle's record already in the journal (it is the verdict; never written twice).
 */
function settle(state: TaskState, reason: SettleReason, journaled = false): StepResult {
  const cycle = cycleOf(state.phase) ?? 1;
  const endChild = endsChild(reason);
  // Steers pi never took: the settle is the verdict (recorded first), and they were not part of it.
  const missed = (state.steers ?? []).filter((s) => s.cycle === cycle).map((s) => s.n);
  const effects: Effect[] = [
    ...(journaled ? [] : [{ type: "journal", entry: { type: "settle", cycle, why: reason.kind, reason } } as Effect]),
    // A spend cap: the spending stops first (pi's abort of the turn; the child and its session stay).
    ...(reason.kind === "cap" ? [{ type: "stop_turn", why: `${reason.cap} cap` } as Effect] : []),
    ...missed.map((n): Effect => ({ type: "journal", entry: { type: "steer_missed", cycle, n } })),
    { type: "cancel_timeout" },
    { type: "reject_readiness", why: reason.kind },
    { type: "release_slot" },
  ];
  if (settleVerdict(reason).status === "interrupted") effects.push({ type: "set_lifecycle", lifecycle: "interrupted" });
  if (endChild) effects.push({ type: "end_child", why: reason.kind });
  if (missed.length > 0) effects.push({ type: "steers_missed", cycle, ns: missed });
  effects.push({ type: "harvest_settled", reason });
  // An idle child of a cycle that may get a follow-up is ended later (parked) unless it is ended now.
  if (!endChild) effects.push({ type: "arm_idle" });
  return { state: { ...withoutSteers(state), phase: { name: "settled", cycle, reason } }, effects };
}

/** The state with no pending steer (a settle or a close: nothing is pushed any more). */
function withoutSteers(state: TaskState): TaskState {
  if (state.steers === undefined) return state;
  const { steers: _dropped, ...rest } = state;
  return rest;
}

/**
 * Close the task: journaled first, then the lifecycle override, the timers and the slot; the child is ended when
 * asked (`endChild`). A settled cycle's verdict, summary and diff stand in the closed result.
 */
function closeTask(state: TaskState, entry: Extract<JournalEntry, { type: "closed" }>, endChild: boolean): StepResult {
  const effects: Effect[] = [
    { type: "journal", entry },
    { type: "set_lifecycle", lifecycle: "closed" },
    { type: "cancel_timeout" },
    { type: "cancel_idle" },
    { type: "reject_readiness", why: "closed" },
    { type: "release_slot" },
  ];
  if (endChild) effects.push({ type: "end_child", why: entry.via === "abort" ? "aborted" : "closed" });
  effects.push({ type: "refresh" });
  return { state: { ...withoutSteers(state), phase: { name: "closed" } }, effects };
}

/**
 * Endings that leave nothing to continue: the child is ended, its pane may stay. A gone runtime ends nothing: its
 * child is already gone, so there is nothing to end (and nothing idle to park later either).
 */
function endsChild(reason: SettleReason): boolean {
  if (reason.kind === "runtime_gone") return false;
  const v = settleVerdict(reason);
  return v.status === "failed" || v.status === "interrupted" || v.status === "gone";
}

/** Statuses with nothing left to abort: the cycle ended on its own and its child is ended. */
const ENDED = new Set(["failed", "gone", "interrupted", "closed"]);

/** An abort has something to act on: an open cycle, or a settled one that may still get a follow-up. */
export function mayAbort(p: Phase, status: string): boolean {
  return p.name !== "closed" && !(p.name === "settled" && ENDED.has(status));
}

/** A follow-up may start: the cycle settled completed or blocked (the protocol's two successful outcomes). */
export function mayRespond(p: Phase, status: string): p is Extract<Phase, { name: "settled" }> {
  return p.name === "settled" && (status === "completed" || status === "blocked");
}

/**
 * What a `respond` is: a steer of the cycle in flight (queued, launching, its prompt on the way, or running: the
 * message joins the running turn and the cycle goes on), a follow-up of a cycle that settled completed or blocked
 * (a new cycle), or neither (undefined: failed, gone, interrupted, closed).
 */
export function respondAs(p: Phase, status: string): "steer" | "follow_up" | undefined {
  if (mayRespond(p, status)) return "follow_up";
  if (p.name === "queued" || isInFlight(p)) return "steer";
  return undefined;
}

/** The pending steers pushed, in order (to a child that just said hello). */
function pushSteers(state: TaskState): Effect[] {
  return (state.steers ?? []).map((s): Effect => ({ type: "push_steer", cycle: s.cycle, n: s.n }));
}

export function step(state: TaskState, ev: CycleEvent): StepResult {
  const p = state.phase;
  if (p.name === "closed") return same(state); // closed is final: every later event is moot
  switch (ev.type) {
    case "admitted":
      if (p.name !== "queued") return same(state);
      return { state: { ...state, phase: { name: "launching", cycle: p.cycle, attempt: 1 } }, effects: [] };

    case "launch_returned":
      // The prompt may already be taken (a fast child said hello during the launch call): keep that phase.
      if (p.name === "launching")
        return {
          state: { ...state, phase: { name: "awaiting_prompt", cycle: p.cycle } },
          effects: [
            { type: "arm_timeout" },
            ...(state.childConnected ? [{ type: "push_prompt", cycle: p.cycle } as Effect] : []),
          ],
        };
      if (p.name === "running") return { state, effects: [{ type: "arm_timeout" }] };
      return same(state);

    case "launch_failed":
      if (!isInFlight(p) && p.name !== "queued") return same(state);
      return settle(state, { kind: "start_failed", code: ev.code, message: ev.message });

    case "child_hello": {
      const next = { ...state, childConnected: true };
      if (p.name === "launching" || p.name === "awaiting_prompt")
        return { state: next, effects: [{ type: "push_prompt", cycle: p.cycle }, ...pushSteers(state)] };
      return { state: next, effects: pushSteers(state) };
    }
    case "child_left":
      return same({ ...state, childConnected: false });

    case "prompt_accepted":
      if ((p.name !== "launching" && p.name !== "awaiting_prompt") || ev.cycle !== p.cycle) return same(state);
      return {
        state: { ...state, phase: { name: "running", cycle: p.cycle } },
        effects: [
          { type: "journal", entry: { type: "prompt_accepted", cycle: p.cycle } },
          { type: "resolve_readiness" },
          { type: "refresh" },
        ],
      };

    case "prompt_failed":
      if (!isInFlight(p) || ev.cycle !== p.cycle) return same(state);
      return withFirst(
        { type: "journal", entry: { type: "prompt_failed", cycle: p.cycle, error: ev.message } },
        settle(state, { kind: "prompt_failed", message: ev.message }),
      );

    case "agent_end":
      if (p.name !== "running" || (ev.cycle !== undefined && ev.cycle !== p.cycle)) return same(state);
      if (ev.willRetry) return same(state); // pi retries: the next agent_end (or the exit) decides
      return settle(state, {
        kind: "agent_end",
        ...(ev.stopReason !== undefined ? { stopReason: ev.stopReason } : {}),
      });

    case "contract_error":
      if (p.name !== "running") return same(state);
      return settle(state, { kind: "contract_error" });

    case "session_settled": {
      // Only without an extension: with one, its agent_end (which knows pi's retry settings) decides.
      if (p.name !== "running" || state.childConnected || ev.retryMayFollow || !ev.fresh)
        return { state, effects: [{ type: "refresh" }] };
      const reason: SettleReason = {
        kind: "session_settled",
        ...(ev.stopReason !== undefined ? { stopReason: ev.stopReason } : {}),
      };
      return settle(state, reason);
    }

    case "evidence_changed":
      // A settled cycle is final: later evidence is recorded, never re-judged.
      if (p.name === "settled")
        return {
          state,
          effects:
            ev.what === "result"
              ? [{ type: "journal", entry: { type: "late_evidence", cycle: p.cycle, what: ev.what } }]
              : [],
        };
      return { state, effects: [{ type: "refresh" }] };

    case "runtime_gone":
      if (p.name === "launching" || (p.name === "awaiting_prompt" && p.cycle === 1)) {
        // The readiness barrier decides (one relaunch, then AGENT_STALLED).
        return {
          state,
          effects: [{ type: "reject_readiness", why: `the child exited before it took its prompt (${ev.how})` }],
        };
      }
      if (p.name === "running" || p.name === "awaiting_prompt")
        return settle(state, { kind: "runtime_gone", how: ev.how });
      if (p.name === "settled" && !p.parked)
        return { state: { ...state, phase: { ...p, parked: true } }, effects: [{ type: "cancel_idle" }] };
      return same(state);

    case "timeout_fired":
      if (!isInFlight(p)) return same(state);
      return withFirst(
        { type: "journal", entry: { type: "interrupted", code: "TIMEOUT" } },
        settle(state, { kind: "timeout", ms: ev.ms }),
      );

    case "idle_expired":
      if (p.name !== "settled" || p.parked) return same(state);
      return {
        state: { ...state, phase: { ...p, parked: true } },
        effects: [
          { type: "journal", entry: { type: "parked", cycle: p.cycle } },
          { type: "end_child", why: "idle" },
        ],
      };

    case "respond": {
      if (p.name !== "settled") return same(state);
      const cycle = p.cycle + 1;
      return {
        state: { ...state, phase: { name: "queued", cycle, ...(p.parked ? { parked: true } : {}) } },
        effects: [{ type: "cancel_idle" }],
      };
    }

    case "slot_granted":
      if (p.name !== "queued" || p.cycle === 1) return same(state);
      return startFollowUp(state, p.cycle, p.parked === true);

    case "abort":
      // The abort of a finished cycle closes the task and ends its child: the cycle's verdict stands (a completed
      // cycle is not relabelled interrupted). Only an in-flight cycle is interrupted.
      if (p.name === "settled") return closeTask(state, { type: "closed", closePane: false, via: "abort" }, true);
      return withFirst({ type: "journal", entry: { type: "interrupted" } }, settle(state, { kind: "owner_abort" }));

    case "close":
      return closeTask(
        state,
        { type: "closed", closePane: ev.closePane },
        ev.closePane || isInFlight(p) || ev.headless,
      );

    case "restored":
      return restore(state, ev.phase, ev.childAlive);

    case "steer": {
      // Only a cycle in flight (or queued for one) is steered; a settled one takes a follow-up (respondAs).
      if (p.name !== "queued" && !isInFlight(p)) return same(state);
      const ref = { cycle: p.cycle, n: ev.n };
      if (ev.n <= (state.lastSteer ?? 0)) return same(state); // fed twice: numbers only grow
      return {
        state: { ...state, steers: [...(state.steers ?? []), ref], lastSteer: ev.n },
        effects: [
          { type: "journal", entry: { type: "steered", ...ref, bytes: ev.bytes } },
          ...(state.childConnected ? [{ type: "push_steer", ...ref } as Effect] : []),
        ],
      };
    }

    case "steer_taken": {
      const pending = state.steers ?? [];
      const left = pending.filter((s) => !(s.cycle === ev.cycle && s.n === ev.n));
      if (left.length === pending.length) return same(state); // a repeated answer, or a steer already missed
      return {
        state: left.length > 0 ? { ...state, steers: left } : withoutSteers(state),
        effects: [{ type: "journal", entry: { type: "steer_taken", cycle: ev.cycle, n: ev.n } }],
      };
    }

    case "steers_restored": {
      const base = ev.last > 0 ? { ...state, lastSteer: Math.max(ev.last, state.lastSteer ?? 0) } : state;
      return same(ev.steers.length > 0 ? { ...base, steers: ev.steers } : withoutSteers(base));
    }

    case "remote_started":
      // A new cycle on the other machine: the first one, or a follow-up of a settled one. A repeat is moot.
      if ((p.name === "queued" && ev.cycle === p.cycle) || (p.name === "settled" && ev.cycle === p.cycle + 1))
        return { state: { ...state, phase: { name: "running", cycle: ev.cycle } }, effects: [{ type: "cancel_idle" }] };
      return same(state);

    case "remote_settled":
      // Only the running cycle settles, once: a repeat after a reconnect, or a result of another cycle, is moot.
      if (p.name !== "running" || ev.cycle !== p.cycle) return same(state);
      return settle(state, { kind: "remote", status: ev.status }, ev.journaled === true);

    case "cap_reached":
      // Only a running cycle spends; a cap seen before the prompt runs or after the settle is moot.
      if (p.name !== "running") return same(state);
      return settle(state, { kind: "cap", cap: ev.cap, limit: ev.limit, spent: ev.spent, step: ev.step });

    case "settle_recovered":
      if (!isInFlight(p)) return same(state);
      return settle(state, ev.reason, ev.journaled === true);

    case "record_lost":
      if (p.name === "settled") return same(state);
      return settle(state, { kind: "record_lost", message: ev.message });
  }
}

/** A restarted daemon's task, back in the phase recovery found: arm what that phase needs. */
function restore(state: TaskState, phase: Phase, childAlive: boolean): StepResult {
  const effects: Effect[] = [];
  if (phase.name === "settled" && !phase.parked && childAlive) effects.push({ type: "arm_idle" });
  if (phase.name === "running" || phase.name === "awaiting_prompt") effects.push({ type: "arm_timeout" });
  // Pending steers stay only with the cycle in flight they belong to.
  const cycle = cycleOf(phase);
  const steers =
    phase.name === "queued" || isInFlight(phase) ? (state.steers ?? []).filter((s) => s.cycle === cycle) : [];
  const base = steers.length > 0 ? { ...state, steers } : withoutSteers(state);
  return { state: { ...base, phase }, effects };
}

function withFirst(e: Effect, r: StepResult): StepResult {
  return { ...r, effects: [e, ...r.effects] };
}

function startFollowUp(state: TaskState, cycle: number, parked: boolean): StepResult {
  if (parked)
    return {
      state: { ...state, phase: { name: "launching", cycle, attempt: 1 } },
      effects: [{ type: "cancel_idle" }, { type: "relaunch" }],
    };
  return {
    state: { ...state, phase: { name: "awaiting_prompt", cycle } },
    effects: [
      { type: "cancel_idle" },
      { type: "arm_timeout" },
      ...(state.childConnected ? [{ type: "push_prompt", cycle } as Effect] : []),
    ],
  };
}
