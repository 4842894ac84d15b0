// The task lifecycle as a pure state machine: one phase instead of a handful of flags, and `step(state, event)`
// returning the next phase and the effects to carry out, in the order they must happen ("journal, then act").
// The daemon (src/daemon/task-runner.ts) feeds it events and performs the effects; nothing here does I/O.
//
//   queued ──admitted──▶ launching ──prompt_accepted──▶ running ──agent_end / gone / timeout / ...──▶ settled
//      ▲                    │  ▲                                                                  │   │
//      │                    │  └──────────── respond (parked child: relaunch on its session) ◀────┘   │
//      └── respond (no free slot) ◀── settled ──respond (child alive)──▶ awaiting_prompt ──▶ running   │
//   any phase ──close──▶ closed                                                                      │
//   settled ──idle_expired──▶ settled{parked}  ◀───────────────────────────────────────────────────────┘

/** Why a cycle ended. The status and the error follow from it (settleVerdict); no free-form strings. */
export type SettleReason =
  /** The child extension's agent_end, with no retry to come. */
  | { kind: "agent_end"; stopReason?: string }
  /** No extension connected: the session file shows the cycle ended. */
  | { kind: "session_settled"; stopReason?: string }
  /** A second reportless normal ending (the protocol's terminal contract error). */
  | { kind: "contract_error" }
  /** pi did not run the prompt (no API key, no model, rejected input): pi's own words. */
  | { kind: "prompt_failed"; message: string }
  /** The child's process or pane ended before its cycle did. */
  | { kind: "runtime_gone"; how: "gone" | "exited" | "away" }
  /** No result within the task's timeoutMs. */
  | { kind: "timeout"; ms: number }
  /** The owner (or a person at the CLI) aborted the task. */
  | { kind: "owner_abort" }
  /** The task never got a child: launch failure, stall, queue timeout. */
  | { kind: "start_failed"; code: string; message: string }
  /** task.json was lost or unreadable while the daemon was down and could not be rebuilt. */
  | { kind: "record_lost"; message: string }
  /** The journal says the cycle settled before a crash; the harvest is redone from the evidence. */
  | { kind: "settled_before_crash" };

export type Phase =
  /** Waiting for a concurrency slot: the first launch (cycle 1) or a follow-up cycle. */
  | { name: "queued"; cycle: number; parked?: boolean }
  /** The runtime is starting the child (attempt 1 or the one retry after a stall). */
  | { name: "launching"; cycle: number; attempt: number }
  /** The child runs; this cycle's prompt is on its way (pushed, or waiting for the child's hello). */
  | { name: "awaiting_prompt"; cycle: number }
  /** pi took the cycle's prompt and works on it. */
  | { name: "running"; cycle: number }
  /** The cycle is over and final: only respond starts another. `parked`: its idle child was ended. */
  | { name: "settled"; cycle: number; reason: SettleReason; parked?: boolean }
  | { name: "closed" };

export type PhaseName = Phase["name"];

export interface TaskState {
  phase: Phase;
  /** The child's extension is connected now. */
  childConnected: boolean;
}

export type CycleEvent =
  | { type: "admitted" }
  | { type: "launch_returned" }
  | { type: "launch_failed"; code: string; message: string }
  | { type: "child_hello" }
  | { type: "child_left" }
  | { type: "prompt_accepted"; cycle: number }
  | { type: "prompt_failed"; cycle: number; message: string }
  | { type: "agent_end"; cycle?: number; stopReason?: string; willRetry: boolean }
  | { type: "contract_error" }
  /** The session file alone shows the cycle ended (used when no extension is connected). */
  | { type: "session_settled"; stopReason?: string; retryMayFollow: boolean; fresh: boolean }
  /** result.md, the session or the runtime state changed. */
  | { type: "evidence_changed"; what: "session" | "result" | "runtime_state" }
  | { type: "runtime_gone"; how: "gone" | "exited" }
  | { type: "timeout_fired"; ms: number }
  | { type: "idle_expired" }
  /** A follow-up was made durable: the next cycle waits for a slot (slot_granted starts it). */
  | { type: "respond" }
  | { type: "slot_granted" }
  | { type: "abort" }
  | { type: "close"; closePane: boolean; headless: boolean }
  | { type: "record_lost"; message: string }
  /** Recovery found the running cycle ended (journaled settle, or the session ended it while the daemon was away). */
  | { type: "settle_recovered"; reason: SettleReason };

export type Effect =
  | { type: "journal"; entry: JournalEntry }
  | { type: "push_prompt"; cycle: number }
  | { type: "arm_timeout" }
  | { type: "cancel_timeout" }
  | { type: "arm_idle" }
  | { type: "cancel_idle" }
  | { type: "resolve_readiness" }
  | { type: "reject_readiness"; why: string }
  | { type: "release_slot" }
  | { type: "end_child"; why: string }
  /** Relaunch pi on the task's session file for the queued follow-up (a parked task). */
  | { type: "relaunch" }
  /** Rebuild the live result from the evidence (no diff). */
  | { type: "refresh" }
  /** The settled harvest: diff, the AgentResult with the verdict's status, record, and the one owner outcome. */
  | { type: "harvest_settled"; reason: SettleReason };

/** What the journal (events.jsonl) records about the lifecycle; replayed by recovery. */
export type JournalEntry =
  | { type: "prompt_accepted"; cycle: number }
  | { type: "prompt_failed"; cycle: number; error: string }
  | { type: "settle"; cycle: number; why: SettleReason["kind"]; reason: SettleReason }
  | { type: "late_evidence"; cycle: number; what: string }
  | { type: "parked"; cycle: number }
  | { type: "interrupted"; code?: string };

export interface StepResult {
  state: TaskState;
  effects: Effect[];
}

const same = (state: TaskState): StepResult => ({ state, effects: [] });

/** The cycle a phase belongs to (closed has none). */
export function cycleOf(p: Phase): number | undefined {
  return p.name === "closed" ? undefined : p.cycle;
}

export const isSettled = (p: Phase): p is Extract<Phase, { name: "settled" }> => p.name === "settled";
/** A cycle is in flight: between admission and settle. */
export const isInFlight = (p: Phase): boolean =>
  p.name === "launching" || p.name === "awaiting_prompt" || p.name === "running";
/** The cycle's prompt has not been taken yet. */
export const promptPending = (p: Phase): boolean =>
  p.name === "launching" || p.name === "awaiting_prompt" || (p.name === "queued" && p.cycle > 1);

/** Settle the current cycle: the order is the durability order (journal first, then the acts it records). */
function settle(state: TaskState, reason: SettleReason): StepResult {
  const cycle = cycleOf(state.phase) ?? 1;
  const endChild = endsChild(reason);
  const effects: Effect[] = [
    { type: "journal", entry: { type: "settle", cycle, why: reason.kind, reason } },
    { type: "cancel_timeout" },
    { type: "reject_readiness", why: reason.kind },
    { type: "release_slot" },
  ];
  if (endChild) effects.push({ type: "end_child", why: reason.kind });
  effects.push({ type: "harvest_settled", reason });
  // An idle child of a cycle that may get a follow-up is ended later (parked) unless it is ended now.
  if (!endChild) effects.push({ type: "arm_idle" });
  return { state: { ...state, phase: { name: "settled", cycle, reason } }, effects };
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
        return { state: next, effects: [{ type: "push_prompt", cycle: p.cycle }] };
      return same(next);
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
      if (p.name === "settled") {
        // The owner's abort of a finished cycle: the task ends as interrupted (a TUI-only card; it asked).
        if (p.reason.kind === "owner_abort") return same(state);
        return {
          state: { ...state, phase: { ...p, reason: { kind: "owner_abort" } } },
          effects: [
            { type: "journal", entry: { type: "interrupted" } },
            { type: "cancel_idle" },
            { type: "end_child", why: "aborted" },
            { type: "harvest_settled", reason: { kind: "owner_abort" } },
          ],
        };
      }
      return withFirst({ type: "journal", entry: { type: "interrupted" } }, settle(state, { kind: "owner_abort" }));

    case "close": {
      const wasInFlight = isInFlight(p);
      const effects: Effect[] = [
        { type: "cancel_timeout" },
        { type: "cancel_idle" },
        { type: "reject_readiness", why: "closed" },
        { type: "release_slot" },
      ];
      if (ev.closePane || wasInFlight || ev.headless) effects.push({ type: "end_child", why: "closed" });
      effects.push({ type: "refresh" });
      return { state: { ...state, phase: { name: "closed" } }, effects };
    }

    case "settle_recovered":
      if (!isInFlight(p)) return same(state);
      return settle(state, ev.reason);

    case "record_lost":
      if (p.name === "settled") return same(state);
      return settle(state, { kind: "record_lost", message: ev.message });
  }
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

/** The status a settle reason fixes outright (else the evidence decides), and the error it carries. */
export interface SettleVerdict {
  status?: "failed" | "interrupted" | "gone";
  error?: { code: string; message: string };
  /** The error replaces one the cycle already carries (else an earlier error stands). */
  replacesError?: boolean;
}

/** `where`: the task's session path, for the fix in the message. */
export function settleVerdict(reason: SettleReason, where = "the task's session"): SettleVerdict {
  switch (reason.kind) {
    case "prompt_failed":
      return {
        status: "failed",
        error: {
          code: "PROMPT_FAILED",
          message: `pi did not run the prompt: ${reason.message.replace(/[.\s]+$/, "")}; fix the model or its credentials (dsh-herdr doctor), then spawn again`,
        },
      };
    case "timeout":
      // The timeout is why the cycle ended: its error replaces whatever the child reported before it was stopped.
      return {
        status: "interrupted",
        replacesError: true,
        error: {
          code: "TIMEOUT",
          message: `no result within timeoutMs (${reason.ms} ms); the child was stopped. Inspect ${where}, then spawn again with a larger timeout or a smaller task`,
        },
      };
    case "owner_abort":
      return { status: "interrupted" };
    case "contract_error":
      return { status: "failed" };
    case "start_failed":
      return { status: "failed", error: { code: reason.code, message: reason.message } };
    case "record_lost":
      return { status: "failed", error: { code: "RECORD_LOST", message: reason.message } };
    case "runtime_gone":
      return { status: "gone" };
    case "agent_end":
    case "session_settled":
      // An abort nobody asked for (a signal, a closed pane, Escape in the TUI) is no completion.
      if (reason.stopReason === "aborted") {
        return {
          status: "failed",
          error: {
            code: "AGENT_ABORTED",
            message: `pi aborted the cycle without being asked (a signal, a closed pane or an interrupt in its TUI); inspect ${where}, then respond or spawn again`,
          },
        };
      }
      return {};
    case "settled_before_crash":
      return {};
  }
}

/** An ending the owner asked for (its abort): the only one that reaches it as a TUI-only card. */
export const ownerRequested = (reason: SettleReason): boolean => reason.kind === "owner_abort";
