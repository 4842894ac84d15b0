// The lifecycle's vocabulary: a task's phase, the events that move it, the effects it asks for and what the journal
// records. The machine that moves between phases is src/core/lifecycle/task-cycle.ts.
import { CAP_NAMES, type CapHit } from "../budget.js";

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
  | { kind: "settled_before_crash" }
  /** The other machine's daemon settled the cycle of a relayed task with this status (its result is the evidence). */
  | { kind: "remote"; status: string }
  /**
   * A relayed task's machine sent what the contract refuses (src/daemon/relay/remote-check.ts): this daemon's verdict, the
   * cycle failed with REMOTE_INVALID; `field` names what broke it, `message` says so whole.
   */
  | { kind: "remote_invalid"; field: string; message: string }
  /** A relayed task's machine no longer knows the task (its home wiped, the task gc'd there): gone, REMOTE_LOST. */
  | { kind: "remote_lost"; message: string }
  /** A spend cap (spawn --max-cost, --max-output-tokens, --max-turns) was reached: the turn is stopped, the task asks. */
  | ({ kind: "cap" } & CapHit);

export type Phase =
  /** Waiting for a concurrency slot: the first launch (cycle 1) or a follow-up cycle. */
  | { name: "queued"; cycle: number; parked?: boolean }
  /**
   * The runtime is starting the child: attempt 1, or 2 (the one retry after a stall). `stalled`: the second attempt
   * stalled too; the cycle waits only for why pi could not start (diagnose_start → launch_failed).
   */
  | { name: "launching"; cycle: number; attempt: number; stalled?: true }
  /**
   * The child runs; this cycle's prompt is on its way (pushed, or waiting for the child's hello). `attempt`: the child
   * was launched for this cycle, so the readiness barrier holds (no hello and acceptance in time: a stall).
   */
  | { name: "awaiting_prompt"; cycle: number; attempt?: number }
  /** pi took the cycle's prompt and works on it. */
  | { name: "running"; cycle: number }
  /**
   * The cycle is over and final: only respond starts another. `parked`: its child was ended (idle, or a failed
   * cycle). `status`: the settled harvest's status (the verdict the evidence gave), once it is recorded.
   */
  | { name: "settled"; cycle: number; reason: SettleReason; parked?: boolean; status?: string }
  /** `settled`: closed after its cycle settled, whose verdict, summary and diff then stand in the closed result. */
  | { name: "closed"; settled?: true };

/** What the daemon times for a task, each one timer at most, armed and cancelled by the machine's effects. */
export type TimerKind =
  /** The task's timeoutMs: a cycle that runs longer is interrupted (TIMEOUT). */
  | "timeout"
  /** idleChildMs: a settled cycle's idle child is ended (parked) unless a follow-up comes. */
  | "idle"
  /** readinessTimeoutMs after a launch: no hello and prompt acceptance by then is a stall (one retry). */
  | "readiness"
  /** readinessTimeoutMs after a follow-up started with no extension connected: the follow-up is typed instead. */
  | "follow_up";

/** How long each timer runs (from the config and the task's record); the machine puts them in arm_timer. */
export interface TimerLimits {
  timeoutMs: number;
  /** 0: idle children are never parked. */
  idleMs: number;
  readinessMs: number;
}

export const DEFAULT_LIMITS: TimerLimits = { timeoutMs: 900_000, idleMs: 600_000, readinessMs: 30_000 };

export type PhaseName = Phase["name"];

/**
 * What recovery (or a replay of the journal) found of a task's current cycle: the facts it read, never a phase. The
 * machine chooses the phase from them (phaseFound).
 */
export type FoundCycle =
  /** The cycle's prompt went out, or the cycle was in flight when it was cut short: it runs. */
  | { found: "prompt_out"; cycle: number }
  /** Launched, its prompt not taken yet: it waits for the child to take it. */
  | { found: "prompt_pending"; cycle: number }
  /** A follow-up is journaled and none of it went out: it waits for a slot. `childEnded`: pi is relaunched for it. */
  | { found: "follow_up"; cycle: number; childEnded?: boolean }
  /**
   * The cycle settled: its settle reason as the journal gives it (none: it settled before the crash), the status its
   * harvest recorded, and whether its child was ended.
   */
  | { found: "settled"; cycle: number; reason?: SettleReason; status?: string; childEnded?: boolean };

/** The phase a found cycle is in. */
export function phaseFound(f: FoundCycle): Phase {
  switch (f.found) {
    case "prompt_out":
      return { name: "running", cycle: f.cycle };
    case "prompt_pending":
      return { name: "awaiting_prompt", cycle: f.cycle };
    case "follow_up":
      return { name: "queued", cycle: f.cycle, ...(f.childEnded ? { parked: true } : {}) };
    case "settled":
      return {
        name: "settled",
        cycle: f.cycle,
        reason: f.reason ?? { kind: "settled_before_crash" },
        ...(f.childEnded ? { parked: true } : {}),
        ...(f.status !== undefined ? { status: f.status } : {}),
      };
  }
}

export interface TaskState {
  phase: Phase;
  /** The child's extension is connected now. */
  childConnected: boolean;
  /**
   * Steers of the cycle in flight that pi has not taken yet (journaled, their text on disk): pushed to the child
   * when it (re)connects, missed when the cycle ends first. Absent: none.
   */
  steers?: SteerRef[];
  /** The highest steer number this task has seen: numbers only grow, so a steer fed twice is journaled once. */
  lastSteer?: number;
}

/** A steer: a message for the cycle in flight (`respond` to a running task), the n-th of its task. */
export interface SteerRef {
  cycle: number;
  n: number;
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
  /** A timer the machine armed ran out (the clock port calls back; a stale one is moot). */
  | { type: "timer_fired"; kind: TimerKind }
  /** The task's timeout ran out (timer_fired{kind:"timeout"} with the ms it ran). */
  | { type: "timeout_fired"; ms: number }
  /** The idle timer ran out (timer_fired{kind:"idle"}). */
  | { type: "idle_expired" }
  /** The settled harvest of `cycle` is recorded with this status: the machine keeps it (commands ask it). */
  | { type: "harvested"; cycle: number; status: string }
  /** A follow-up was made durable: the next cycle waits for a slot (slot_granted starts it). */
  | { type: "respond" }
  | { type: "slot_granted" }
  | { type: "abort" }
  | { type: "close"; closePane: boolean; headless: boolean }
  | { type: "record_lost"; message: string }
  /**
   * Recovery found the running cycle ended: `journaled` when the journal holds its settle record (that record is the
   * verdict and is not written twice), else the session ended it while the daemon was away.
   */
  | { type: "settle_recovered"; reason: SettleReason; journaled?: boolean }
  /**
   * A restarted daemon (or verify, replaying the journal) hands the machine what it found of the task's cycle
   * (src/core/lifecycle/recovery-plan.ts); the machine chooses the phase from it and arms what that phase needs (the idle timer
   * of a settled child that still runs, a running cycle's timeout).
   */
  | { type: "restored"; found: FoundCycle; childAlive: boolean }
  /** A relayed task: the other machine's daemon took the cycle (the spawn, or a follow-up) and runs it. */
  | { type: "remote_started"; cycle: number }
  /**
   * A relayed task: the other machine's daemon settled the cycle with this status. `journaled`: this cycle's settle
   * record is in the journal already (a restart between it and the recorded result).
   */
  | { type: "remote_settled"; cycle: number; status: string; journaled?: boolean }
  /**
   * A relayed task: what its machine said of the running cycle breaks the contract (a result that is no AgentResult,
   * another task's, "settled" while running, a path not its own, over the bound). The cycle settles failed here.
   */
  | { type: "remote_invalid"; cycle: number; field: string; message: string }
  /** A relayed task: its machine says it has no such task. The cycle settles gone here. */
  | { type: "remote_lost"; cycle: number; message: string }
  /** The running cycle's usage reached a spend cap (seen as its session grew). */
  | ({ type: "cap_reached" } & CapHit)
  /**
   * A message for the cycle in flight, its text durable (the daemon wrote it before this event): it joins the
   * running turn through the child; the cycle goes on (no new cycle, no settle).
   */
  | { type: "steer"; n: number; bytes: number }
  /** pi took the steer into its running turn (the child's answer). */
  | { type: "steer_taken"; cycle: number; n: number }
  /** Recovery: the steers the journal shows pending (sent, not taken, not missed), before the phase is restored. */
  | { type: "steers_restored"; steers: SteerRef[]; last: number };

export type Effect =
  | { type: "journal"; entry: JournalEntry }
  /** Push the cycle's prompt to the connected extension (prompt_sent journaled first). */
  | { type: "push_prompt"; cycle: number }
  /** No extension came back for a follow-up: type it into the runtime (prompt_sent{via:"runtime"} journaled first). */
  | { type: "type_prompt"; cycle: number }
  /** Start a timer through the clock port (one per kind: arming again restarts it). */
  | { type: "arm_timer"; kind: TimerKind; ms: number }
  | { type: "cancel_timer"; kind: TimerKind }
  | { type: "release_slot" }
  /** `keepPane`: a close that keeps the pane to read (the child ends all the same). */
  | { type: "end_child"; why: string; keepPane?: boolean }
  /** Stop the child's running turn (pi's abort): the child and its session stay, for a follow-up. */
  | { type: "stop_turn"; why: string }
  /** Launch pi again on the task's session file: a parked task's follow-up, or the one retry after a stall. */
  | { type: "relaunch"; attempt: number }
  /** The launch stalled twice: read why pi could not start (its last output) and feed launch_failed. */
  | { type: "diagnose_start"; why: string }
  /** Rebuild the live result from the evidence (no diff). */
  | { type: "refresh" }
  /** The settled harvest: diff, the AgentResult with the verdict's status, record, and the one owner outcome. */
  | { type: "harvest_settled"; reason: SettleReason }
  /** Push a steer's text to the connected child (it joins pi's running turn, once: the child knows what it took). */
  | { type: "push_steer"; cycle: number; n: number }
  /** The cycle ended before pi took these steers: whoever sent them learns it (before the harvest). */
  | { type: "steers_missed"; cycle: number; ns: number[] };

/** What the journal (events.jsonl) records about the lifecycle; replayed by recovery. */
export type JournalEntry =
  | { type: "prompt_accepted"; cycle: number }
  | { type: "prompt_failed"; cycle: number; error: string }
  | { type: "settle"; cycle: number; why: SettleReason["kind"]; reason: SettleReason }
  | { type: "late_evidence"; cycle: number; what: string }
  | { type: "parked"; cycle: number }
  /** A launch attempt showed no sign of life (or its child exited before it took its prompt). */
  | { type: "stalled"; cycle: number; attempt: number; error: string }
  | { type: "interrupted"; code?: string }
  /** The task is closed (`via: "abort"`: the abort of a settled cycle, whose verdict stands). */
  | { type: "closed"; closePane: boolean; via?: "abort" }
  /** A steer of the cycle: its text is `steer.<cycle>.<n>.md`; journaled before it is pushed. */
  | { type: "steered"; cycle: number; n: number; bytes: number }
  | { type: "steer_taken"; cycle: number; n: number }
  /** The cycle ended before pi took the steer (journaled after the cycle's settle record). */
  | { type: "steer_missed"; cycle: number; n: number };

export interface StepResult {
  state: TaskState;
  effects: Effect[];
}

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
  (p.name === "launching" && !p.stalled) || p.name === "awaiting_prompt" || (p.name === "queued" && p.cycle > 1);
/** The readiness barrier holds: the child was launched for this cycle and has not taken its prompt. */
export const inBarrier = (p: Phase): boolean =>
  (p.name === "launching" && !p.stalled) || (p.name === "awaiting_prompt" && p.attempt !== undefined);

/** A settle reason read back from the journal, checked field by field; undefined when it is not one. */
export function parseSettleReason(v: unknown): SettleReason | undefined {
  if (typeof v !== "object" || v === null) return undefined;
  const r = v as Record<string, unknown>;
  const str = (k: string) => typeof r[k] === "string";
  const stop = str("stopReason") ? { stopReason: r.stopReason as string } : {};
  switch (r.kind) {
    case "agent_end":
    case "session_settled":
      return { kind: r.kind, ...stop };
    case "contract_error":
    case "owner_abort":
    case "settled_before_crash":
      return { kind: r.kind };
    case "prompt_failed":
      return str("message") ? { kind: "prompt_failed", message: r.message as string } : undefined;
    case "record_lost":
      return str("message") ? { kind: "record_lost", message: r.message as string } : undefined;
    case "start_failed":
      return str("code") && str("message")
        ? { kind: "start_failed", code: r.code as string, message: r.message as string }
        : undefined;
    case "runtime_gone":
      return r.how === "gone" || r.how === "exited" || r.how === "away"
        ? { kind: "runtime_gone", how: r.how }
        : undefined;
    case "timeout":
      return typeof r.ms === "number" ? { kind: "timeout", ms: r.ms } : undefined;
    case "remote":
      return str("status") ? { kind: "remote", status: r.status as string } : undefined;
    case "remote_invalid":
      return str("field") && str("message")
        ? { kind: "remote_invalid", field: r.field as string, message: r.message as string }
        : undefined;
    case "remote_lost":
      return str("message") ? { kind: "remote_lost", message: r.message as string } : undefined;
    case "cap": {
      const num = (k: string) => typeof r[k] === "number" && Number.isFinite(r[k]);
      if (!(CAP_NAMES as readonly unknown[]).includes(r.cap) || !num("limit") || !num("spent") || !num("step"))
        return undefined;
      return {
        kind: "cap",
        cap: r.cap as CapHit["cap"],
        limit: r.limit as number,
        spent: r.spent as number,
        step: r.step as number,
      };
    }
    default:
      return undefined;
  }
}
