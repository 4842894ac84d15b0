// The task lifecycle as a pure state machine: one phase instead of a handful of flags, and `step(state, event)`
// returning the next phase and the effects to carry out, in the order they must happen ("journal, then act").
// The daemon (src/daemon/task/task-runner.ts) feeds it events and performs the effects; nothing here does I/O.
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
//   launching/awaiting_prompt (barrier) ──readiness timer or exit──▶ launching{attempt 2} ──again──▶ diagnose → settled
// Timers are effects (arm_timer/cancel_timer{kind}) carried out through the daemon's clock port; their firing comes
// back as timer_fired{kind}. What a task's state allows (respond, abort) is asked of this module too.
import {
  cycleOf,
  DEFAULT_LIMITS,
  inBarrier,
  isInFlight,
  phaseFound,
  type CycleEvent,
  type Effect,
  type JournalEntry,
  type Phase,
  type SettleReason,
  type StepResult,
  type TaskState,
  type TimerKind,
  type TimerLimits,
} from "./cycle-phase.js";
import { settleVerdict } from "./settle-verdict.js";

// The public import path for the lifecycle stays this module.
export * from "./cycle-phase.js";
export * from "./settle-verdict.js";

const same = (state: TaskState): StepResult => ({ state, effects: [] });
const cancel = (...kinds: TimerKind[]): Effect[] => kinds.map((kind) => ({ type: "cancel_timer", kind }) as Effect);
const arm = (kind: TimerKind, ms: number): Effect[] => (ms > 0 ? [{ type: "arm_timer", kind, ms }] : []);

/**
 * Settle the current cycle: the order is the durability order (journal first, then the acts it records).
 * `journaled`: recovery found this settle's record already in the journal (it is the verdict; never written twice).
 */
function settle(state: TaskState, reason: SettleReason, limits: TimerLimits, journaled = false): StepResult {
  const cycle = cycleOf(state.phase) ?? 1;
  const endChild = endsChild(reason);
  // Steers pi never took: the settle is the verdict (recorded first), and they were not part of it.
  const missed = (state.steers ?? []).filter((s) => s.cycle === cycle).map((s) => s.n);
  const effects: Effect[] = [
    ...(journaled ? [] : [{ type: "journal", entry: { type: "settle", cycle, why: reason.kind, reason } } as Effect]),
    ...missed.map((n): Effect => ({ type: "journal", entry: { type: "steer_missed", cycle, n } })),
    // A spend cap: the spending stops first of the acts (pi's abort of the turn; the child and its session stay),
    // after the records (journal before act).
    ...(reason.kind === "cap" ? [{ type: "stop_turn", why: `${reason.cap} cap` } as Effect] : []),
    ...cancel("timeout", "readiness", "follow_up"),
    { type: "release_slot" },
  ];
  if (endChild) effects.push({ type: "end_child", why: reason.kind });
  if (missed.length > 0) effects.push({ type: "steers_missed", cycle, ns: missed });
  effects.push({ type: "harvest_settled", reason });
  // An idle child of a cycle that may get a follow-up is ended later (parked) unless it is ended now (or gone).
  const noChild = endChild || reason.kind === "runtime_gone";
  if (!noChild) effects.push(...arm("idle", limits.idleMs));
  return {
    state: { ...withoutSteers(state), phase: { name: "settled", cycle, reason, ...(noChild ? { parked: true } : {}) } },
    effects,
  };
}

/** The state with no pending steer (a settle or a close: nothing is pushed any more). */
function withoutSteers(state: TaskState): TaskState {
  if (state.steers === undefined) return state;
  const { steers: _dropped, ...rest } = state;
  return rest;
}

/**
 * Close the task: journaled first, then the timers and the slot; the child is ended when asked (`endChild`). A
 * settled cycle's verdict, summary and diff stand in the closed result.
 */
function closeTask(state: TaskState, entry: Extract<JournalEntry, { type: "closed" }>, endChild: boolean): StepResult {
  const effects: Effect[] = [
    { type: "journal", entry },
    ...cancel("timeout", "idle", "readiness", "follow_up"),
    { type: "release_slot" },
  ];
  if (endChild)
    effects.push({
      type: "end_child",
      why: entry.via === "abort" ? "aborted" : "closed",
      ...(entry.via !== "abort" && !entry.closePane ? { keepPane: true } : {}),
    });
  effects.push({ type: "refresh" });
  const settled = state.phase.name === "settled";
  return { state: { ...withoutSteers(state), phase: { name: "closed", ...(settled ? { settled } : {}) } }, effects };
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

/**
 * The readiness barrier failed: the launched child showed no sign of life in time (or exited before it took its
 * prompt). The first stall ends that child and launches again (attempt 2); the second gives up: why pi could not
 * start is read from its output (diagnose_start), which comes back as launch_failed and settles the cycle.
 */
function stall(state: TaskState, why: string): StepResult {
  const p = state.phase as Extract<Phase, { name: "launching" | "awaiting_prompt" }>;
  const attempt = p.attempt ?? 1;
  const effects: Effect[] = [
    { type: "journal", entry: { type: "stalled", cycle: p.cycle, attempt, error: why } },
    ...cancel("readiness", "timeout", "follow_up"),
    { type: "end_child", why: "stalled" },
  ];
  if (attempt < 2)
    return {
      state: { ...state, childConnected: false, phase: { name: "launching", cycle: p.cycle, attempt: attempt + 1 } },
      effects: [...effects, { type: "relaunch", attempt: attempt + 1 }],
    };
  return {
    state: { ...state, childConnected: false, phase: { name: "launching", cycle: p.cycle, attempt, stalled: true } },
    effects: [...effects, { type: "diagnose_start", why }],
  };
}

/** Statuses with nothing left to abort: the cycle ended on its own and its child is ended. */
const ENDED = new Set(["failed", "gone", "interrupted", "closed"]);

/** The status a settled phase's harvest recorded, else the one the caller read. */
const statusOf = (p: Phase, status?: string): string | undefined =>
  p.name === "settled" && p.status !== undefined ? p.status : status;

/** An abort has something to act on: an open cycle, or a settled one that may still get a follow-up. */
export function mayAbort(p: Phase, status?: string): boolean {
  const s = statusOf(p, status);
  return p.name !== "closed" && !(p.name === "settled" && s !== undefined && ENDED.has(s));
}

/** A follow-up may start: the cycle settled completed or blocked (the protocol's two successful outcomes). */
export function mayRespond(p: Phase, status?: string): p is Extract<Phase, { name: "settled" }> {
  const s = statusOf(p, status);
  return p.name === "settled" && (s === "completed" || s === "blocked");
}

/**
 * What a `respond` is: a steer of the cycle in flight (queued, launching, its prompt on the way, or running: the
 * message joins the running turn and the cycle goes on), a follow-up of a cycle that settled completed or blocked
 * (a new cycle), or neither (undefined: failed, gone, interrupted, closed).
 */
export function respondAs(p: Phase, status?: string): "steer" | "follow_up" | undefined {
  if (mayRespond(p, status)) return "follow_up";
  if (p.name === "queued" || isInFlight(p)) return "steer";
  return undefined;
}

/** The pending steers pushed, in order (to a child that just said hello). */
function pushSteers(state: TaskState): Effect[] {
  return (state.steers ?? []).map((s): Effect => ({ type: "push_steer", cycle: s.cycle, n: s.n }));
}

export type Command = "abort" | "respond" | "close";

/** What the owner's commands may do in this state (the machine's answer; the daemon's commands only ask). */
export function commandAllowed(state: TaskState, cmd: Command, status?: string): boolean {
  if (cmd === "abort") return mayAbort(state.phase, status);
  if (cmd === "respond") return mayRespond(state.phase, status);
  return true; // close: always (a closed task answers with its stored result)
}

/**
 * The lifecycle override the status derivation honours (docs/result-contract.md), read from the phase: `closed`
 * once closed, `interrupted` for a cycle the verdict interrupted (a timeout, the owner's abort). Nothing else.
 */
export function lifecycleOf(p: Phase): "closed" | "interrupted" | undefined {
  if (p.name === "closed") return "closed";
  if (p.name === "settled" && settleVerdict(p.reason).status === "interrupted") return "interrupted";
  return undefined;
}

/** The task was closed after its cycle settled: the closed result is that settled result (late files unread). */
export function closedAfterSettle(p: Phase): boolean {
  return p.name === "closed" && p.settled === true;
}

/** A launch that returns now is wanted (else the runner ends its child: closed or aborted while it launched). */
export function launchWanted(p: Phase): boolean {
  return p.name !== "closed" && !(p.name === "settled" && p.reason.kind === "owner_abort");
}

export function step(state: TaskState, ev: CycleEvent, limits: TimerLimits = DEFAULT_LIMITS): StepResult {
  const p = state.phase;
  if (p.name === "closed") return same(state); // closed is final: every later event is moot
  switch (ev.type) {
    case "admitted":
      if (p.name !== "queued") return same(state);
      return { state: { ...state, phase: { name: "launching", cycle: p.cycle, attempt: 1 } }, effects: [] };

    case "launch_returned":
      // The prompt may already be taken (a fast child said hello during the launch call): keep that phase.
      if (p.name === "launching" && !p.stalled)
        return {
          state: { ...state, phase: { name: "awaiting_prompt", cycle: p.cycle, attempt: p.attempt } },
          effects: [
            ...arm("readiness", limits.readinessMs),
            ...arm("timeout", limits.timeoutMs),
            ...(state.childConnected ? [{ type: "push_prompt", cycle: p.cycle } as Effect] : []),
          ],
        };
      if (p.name === "running") return { state, effects: arm("timeout", limits.timeoutMs) };
      return same(state);

    case "launch_failed":
      if (!isInFlight(p) && p.name !== "queued") return same(state);
      return settle(state, { kind: "start_failed", code: ev.code, message: ev.message }, limits);

    case "child_hello": {
      const next = { ...state, childConnected: true };
      if ((p.name === "launching" && !p.stalled) || p.name === "awaiting_prompt")
        return {
          state: next,
          effects: [...cancel("follow_up"), { type: "push_prompt", cycle: p.cycle }, ...pushSteers(state)],
        };
      return { state: next, effects: pushSteers(state) };
    }
    case "child_left":
      return same({ ...state, childConnected: false });

    case "prompt_accepted":
      if (!((p.name === "launching" && !p.stalled) || p.name === "awaiting_prompt") || ev.cycle !== p.cycle)
        return same(state);
      return {
        state: { ...state, phase: { name: "running", cycle: p.cycle } },
        effects: [
          { type: "journal", entry: { type: "prompt_accepted", cycle: p.cycle } },
          ...cancel("readiness", "follow_up"),
          { type: "refresh" },
        ],
      };

    case "prompt_failed":
      if (!isInFlight(p) || ev.cycle !== p.cycle) return same(state);
      return withFirst(
        { type: "journal", entry: { type: "prompt_failed", cycle: p.cycle, error: ev.message } },
        settle(state, { kind: "prompt_failed", message: ev.message }, limits),
      );

    case "agent_end":
      if (p.name !== "running" || (ev.cycle !== undefined && ev.cycle !== p.cycle)) return same(state);
      if (ev.willRetry) return same(state); // pi retries: the next agent_end (or the exit) decides
      return settle(
        state,
        { kind: "agent_end", ...(ev.stopReason !== undefined ? { stopReason: ev.stopReason } : {}) },
        limits,
      );

    case "contract_error":
      if (p.name !== "running") return same(state);
      return settle(state, { kind: "contract_error" }, limits);

    case "session_settled": {
      // Only without an extension: with one, its agent_end (which knows pi's retry settings) decides.
      if (p.name !== "running" || state.childConnected || ev.retryMayFollow || !ev.fresh)
        return { state, effects: [{ type: "refresh" }] };
      const reason: SettleReason = {
        kind: "session_settled",
        ...(ev.stopReason !== undefined ? { stopReason: ev.stopReason } : {}),
      };
      return settle(state, reason, limits);
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
      // Before the child took its prompt the readiness barrier decides (one relaunch, then the start's diagnosis).
      if (inBarrier(p)) return stall(state, `the child exited before it took its prompt (${ev.how})`);
      if (p.name === "running" || p.name === "awaiting_prompt")
        return settle(state, { kind: "runtime_gone", how: ev.how }, limits);
      if (p.name === "settled" && !p.parked)
        return { state: { ...state, phase: { ...p, parked: true } }, effects: cancel("idle") };
      return same(state);

    case "timer_fired":
      switch (ev.kind) {
        case "timeout":
          return timedOut(state, limits.timeoutMs, limits);
        case "idle":
          return idle(state);
        case "readiness":
          if (!inBarrier(p)) return same(state); // taken, settled or cancelled meanwhile: a stale timer
          return stall(state, `no hello and prompt acceptance within readinessTimeoutMs (${limits.readinessMs} ms)`);
        case "follow_up":
          // A follow-up for a child whose extension never came back: typed into the runtime, which takes it at once.
          if (p.name !== "awaiting_prompt" || p.attempt !== undefined || state.childConnected) return same(state);
          return {
            state: { ...state, phase: { name: "running", cycle: p.cycle } },
            effects: [{ type: "type_prompt", cycle: p.cycle }, { type: "refresh" }],
          };
      }
      return same(state);

    case "timeout_fired":
      return timedOut(state, ev.ms, limits);

    case "idle_expired":
      return idle(state);

    case "harvested": {
      if (p.name !== "settled" || p.cycle !== ev.cycle || p.status !== undefined) return same(state);
      const phase = { ...p, status: ev.status };
      // The evidence failed the cycle (result.md said failed, pi's final error): nothing to continue, end its child.
      if ((ev.status === "failed" || ev.status === "interrupted") && !p.parked)
        return {
          state: { ...state, phase: { ...phase, parked: true } },
          effects: [...cancel("idle"), { type: "end_child", why: ev.status }],
        };
      return { state: { ...state, phase }, effects: [] };
    }

    case "respond": {
      if (!mayRespond(p)) return same(state);
      const cycle = p.cycle + 1;
      return {
        state: { ...state, phase: { name: "queued", cycle, ...(p.parked ? { parked: true } : {}) } },
        effects: cancel("idle"),
      };
    }

    case "slot_granted":
      if (p.name !== "queued" || p.cycle === 1) return same(state);
      return startFollowUp(state, p.cycle, p.parked === true, limits);

    case "abort":
      // The abort of a finished cycle closes the task and ends its child: the cycle's verdict stands (a completed
      // cycle is not relabelled interrupted). Only an in-flight cycle is interrupted.
      if (p.name === "settled") return closeTask(state, { type: "closed", closePane: false, via: "abort" }, true);
      return withFirst(
        { type: "journal", entry: { type: "interrupted" } },
        settle(state, { kind: "owner_abort" }, limits),
      );

    case "close":
      // A closed task's child is always ended (an idle pi holds hundreds of MB); closePane says whether its pane
      // goes too.
      return closeTask(state, { type: "closed", closePane: ev.closePane }, true);

    case "restored":
      return restore(state, phaseFound(ev.found), ev.childAlive, limits);

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
        return { state: { ...state, phase: { name: "running", cycle: ev.cycle } }, effects: cancel("idle") };
      return same(state);

    case "remote_settled":
      // Only the running cycle settles, once: a repeat after a reconnect, or a result of another cycle, is moot.
      if (p.name !== "running" || ev.cycle !== p.cycle) return same(state);
      return settle(state, { kind: "remote", status: ev.status }, { ...limits, idleMs: 0 }, ev.journaled === true);

    case "remote_invalid":
    case "remote_lost":
      // This daemon's own verdict on the running cycle (the machine's word refused, or the task gone there): once.
      if (p.name !== "running" || ev.cycle !== p.cycle) return same(state);
      return settle(
        state,
        ev.type === "remote_invalid"
          ? { kind: "remote_invalid", field: ev.field, message: ev.message }
          : { kind: "remote_lost", message: ev.message },
        { ...limits, idleMs: 0 },
      );

    case "cap_reached":
      // Only a running cycle spends; a cap seen before the prompt runs or after the settle is moot.
      if (p.name !== "running") return same(state);
      return settle(state, { kind: "cap", cap: ev.cap, limit: ev.limit, spent: ev.spent, step: ev.step }, limits);

    case "settle_recovered":
      if (!isInFlight(p)) return same(state);
      return settle(state, ev.reason, limits, ev.journaled === true);

    case "record_lost":
      if (p.name === "settled") return same(state);
      return settle(state, { kind: "record_lost", message: ev.message }, limits);
  }
}

function timedOut(state: TaskState, ms: number, limits: TimerLimits): StepResult {
  if (!isInFlight(state.phase)) return same(state);
  return withFirst(
    { type: "journal", entry: { type: "interrupted", code: "TIMEOUT" } },
    settle(state, { kind: "timeout", ms }, limits),
  );
}

function idle(state: TaskState): StepResult {
  const p = state.phase;
  if (p.name !== "settled" || p.parked) return same(state);
  return {
    state: { ...state, phase: { ...p, parked: true } },
    effects: [
      { type: "journal", entry: { type: "parked", cycle: p.cycle } },
      { type: "end_child", why: "idle" },
    ],
  };
}

/** A restarted daemon's task, back in the phase recovery found: arm what that phase needs. */
function restore(state: TaskState, phase: Phase, childAlive: boolean, limits: TimerLimits): StepResult {
  const effects: Effect[] = [];
  if (phase.name === "settled" && !phase.parked && childAlive) effects.push(...arm("idle", limits.idleMs));
  if (phase.name === "running" || phase.name === "awaiting_prompt") effects.push(...arm("timeout", limits.timeoutMs));
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

function startFollowUp(state: TaskState, cycle: number, parked: boolean, limits: TimerLimits): StepResult {
  if (parked)
    return {
      state: { ...state, phase: { name: "launching", cycle, attempt: 1 } },
      effects: [...cancel("idle"), { type: "relaunch", attempt: 1 }],
    };
  return {
    state: { ...state, phase: { name: "awaiting_prompt", cycle } },
    effects: [
      ...cancel("idle"),
      ...arm("timeout", limits.timeoutMs),
      // With the extension away (a daemon restart), wait for it to reconnect: hello pushes the prompt; if it never
      // comes back within readinessTimeoutMs the follow-up is typed into the runtime instead.
      ...(state.childConnected ? [{ type: "push_prompt", cycle } as Effect] : arm("follow_up", limits.readinessMs)),
    ],
  };
}
