// What a task's modules (evidence.ts, settle.ts, persist.ts, child-prompt.ts, task-commands.ts, pipeline.ts, the
// recovery steps) see of the task they act on: its runner, as a type. The class is src/daemon/task/task-runner.ts; it is
// the one module that imports them all, so they form no import cycle (test/unit/import-cycles.test.ts). A runner
// reaches the rest of the daemon only through its ports: no module takes the supervisor to act on one task.
import type { CapLimits } from "../../core/budget.js";
import type { Clock } from "../../core/clock.js";
import type { CrewReport } from "../../core/crew/crew-cycle.js";
import type { JournalRecord } from "../../core/lifecycle/journal-record.js";
import type { CycleEvent, SettleReason, TimerKind } from "../../core/lifecycle/task-cycle.js";
import type { LandingOutcome } from "../../core/result/check-receipts.js";
import type { AgentResult } from "../../core/types.js";
import type { Runtime } from "../../runtime/types.js";
import type { Config } from "../../store/config.js";
import type { TaskStore } from "../../store/task-store.js";
import type { Slot } from "./admission.js";
import type { GitPort } from "../ports/git-port.js";
import type { Live } from "./live.js";
import type { Connection, Logger } from "../server/server-types.js";

/** `settled`: this result is a cycle's settled harvest (the one owner outcome of that cycle). */
export type StatusInfo = {
  settled: boolean;
  /** Start-up re-announcing a cycle that settled before the restart (its delivery may be missing). */
  recovered?: true;
};

/** This task's concurrency slot in the daemon's admission (keyed by the task id). */
export interface SlotPort {
  /** Reserve a slot now or join the queue; throws CONCURRENCY_LIMIT synchronously when the queue is full. */
  acquire(): Promise<Slot>;
  holds(): boolean;
  /** Give the slot back, or leave the queue. */
  release(): void;
}

/** What a task runner is given: the runtime, git, the store, the clock, the log, and the daemon's few shared services. */
export interface TaskPorts {
  runtimeFor(kind: Live["rec"]["runtime"]): Runtime;
  git: GitPort;
  store: TaskStore;
  clock: Clock;
  log: Logger;
  config(): Config;
  /** What every child is started with. */
  env: { home: string; socketPath: string; childExtensionPath: string; childEnv: Record<string, string> };
  slot: SlotPort;
  /** The supervisor's status listeners (owner delivery, subscriptions, task.wait, the failure log), for this task. */
  notify(result: AgentResult, info: StatusInfo): void;
  /** The daemon is stopping: launches, retries and timers are left to the next daemon's recovery. */
  stopped(): boolean;
  /** How many tasks the daemon holds (live snapshots are paced by it). */
  taskCount(): number;
  /** The daemon's tasks (the settle's sibling check merges this task's work with its open isolated siblings'). */
  tasks(): Iterable<Runner>;
}

/** A task's runner as its modules see it: the task's state (Live) and what acts on it. */
export interface Runner extends Live {
  readonly ports: TaskPorts;
  /** Feed one event to the task's machine (src/core/lifecycle/task-cycle.ts) and carry out its effects. */
  dispatch(ev: CycleEvent): Promise<void>;
  /** Rebuild the live result (no diff); serialized per task. */
  refresh(opts?: { settled?: boolean; reason?: SettleReason }): Promise<void>;
  notify(result: AgentResult, info?: StatusInfo): void;
  journal(event: JournalRecord): Promise<void>;
  /** Awaited until the record is in the journal (a daemon crash keeps it); made durable in the commit log behind. */
  journalWritten(...events: [JournalRecord, ...JournalRecord[]]): Promise<void>;
  /** The validated crew_report of the current cycle: as the child sent it, else read back from its session. */
  reportOf(): CrewReport | undefined;
  sendPrompt(): void;
  endChild(why: string, keepPane?: boolean): Promise<void>;
  startWatching(): void;
  /** Stop the file and runtime watches and every timer (a close, an abort, a failed start, daemon stop). */
  stopWatching(): void;
  watchRuntime(runtime: Runtime): void;
  unwatchRuntime(): void;
  /** Re-read a recovered task's files from the start and watch them again. */
  resume(): Promise<void>;
  /** The task's child extension connected (after its hello). */
  childConnected(conn: Connection): void;
  childEvent(ev: ChildEvent): Promise<{ ok: true }>;
  childReport(p: ChildReport): Promise<{ ok: true }>;
  /**
   * Admission → baseline/worktree → prompt.md → launch. Runs in the background. `known`: the repository its spawn
   * already looked up (and the worktree it started making), so the launch does not ask git again.
   */
  run(slot: Promise<{ queuedMs: number }>, known?: Live["knownRepo"]): Promise<void>;
  /**
   * `op` behind the task's harvests and earlier on-demand work (its chain); what is queued after waits for it. Its
   * failure is the caller's and does not stop the chain.
   */
  onChain<T>(op: () => Promise<T>): Promise<T>;
  /** What task.check / task.land found or made, applied to the task (land-record.ts); answers the new result. */
  recordLanding(base: AgentResult, outcome: LandingOutcome, event: JournalRecord): Promise<AgentResult>;
  /** owner.move: the task's record, result and journal name the owner `to`, behind its chain (owner-move.ts). */
  moveOwner(to: string): Promise<void>;
  /** The owner's commands (task-commands.ts): each asks the machine first. */
  abort(): Promise<boolean>;
  /**
   * `caps`: spend caps given again with the respond (else a reached cap is raised by its original amount).
   * `requestId`: a relaying daemon's idempotency key, journaled with the respond record (src/daemon/methods/request-memo.ts).
   */
  respond(message: string, caps?: CapLimits, requestId?: string): Promise<{ cycle: number; queued: boolean }>;
  close(closePane: boolean): Promise<AgentResult>;
  /** Steer the cycle in flight with a message (steer.ts): a respond while the cycle runs. */
  steer(message: string): Promise<SteerReply>;
  /** A recovered cycle that cannot finish: the child is gone. */
  markGone(): Promise<void>;
  /** Carry out a recovery's steps in order (src/daemon/recover/recover-apply.ts decides them), each awaited. */
  restore(steps: RecoveryStep[]): Promise<void>;
  /** A relayed task's event: only the journal and the settled record mean something here (src/remote). */
  dispatchRemote(ev: CycleEvent, onSettled?: RemoteSettled): Promise<void>;
  /** `fn` after each change of the task's phase (the worktree setup ends its command on a close or abort); returns its off. */
  onPhase(fn: () => void): () => void;
  /** The machine's timers armed now. */
  armedTimers(): TimerKind[];
  /**
   * A timer of the runner's own (a paced snapshot, a retried record, a runtime poll) through the clock port: cleared
   * at daemon stop (stop()), and it never fires once the daemon stops.
   */
  later(ms: number, fn: () => void): void;
  /** The worktree setup running now (outside the task's chain): ended by stop(), awaited by the daemon's stop. */
  setupRun?: { abort(): void; ended: Promise<unknown> };
  /** Daemon stop: the watches, every timer of the task and a running worktree setup end. */
  stop(): void;
  /** Timers of any kind pending now (the machine's and the runner's own). */
  pendingTimers(): number;
}

/**
 * One step of taking a task back after a restart, in order: an event for the task's machine, or an act on the task
 * outside it. Recovery decides them from what it read; the runner (restore) carries them out.
 */
export type RecoveryStep =
  /** Fed to the machine; awaited with its effects. */
  | { feed: CycleEvent }
  /**
   * Started at this step and fed when it resolves, not awaited: a slot queued behind the cap must not hold start-up.
   * The event never rejects (a refusal is an event too).
   */
  | { feedWhen: () => Promise<CycleEvent> }
  /** Re-read the task's files from the start and watch them again. */
  | { do: "resume" }
  /** Rebuild the live result. */
  | { do: "refresh" }
  /** A running or pending cycle holds its slot again (over the cap if the config shrank meanwhile: it already runs). */
  | { do: "hold_slot" }
  | { do: "watch_runtime"; runtime: Runtime }
  /** The child is known to have ended (nothing to watch). */
  | { do: "child_ended" }
  /** The prompt the cycle is to send (or has sent). */
  | { do: "set_prompt"; prompt: { cycle: number; text: string } }
  /** The cycle cannot finish: its child is gone. */
  | { do: "mark_gone" }
  /** The settled result stands and is announced again (refreshed first when none is held): its delivery may be lost. */
  | { do: "announce_settled" }
  /** Start the task from the beginning (admission, worktree, launch), in the background. */
  | { do: "start" }
  /** Wait until the work the events queued (a settle's harvest) is done. */
  | { do: "wait_chain" };

/**
 * A relayed task's settled cycle recorded (src/daemon/relay/relay-follow.ts settleWith). `settleRecord`: the cycle's settle
 * record, not written yet, when nothing comes between it and the settled record: the callback writes it first, in
 * the same append as its settled status record.
 */
export type RemoteSettled = (reason: SettleReason, settleRecord?: JournalRecord) => Promise<void>;

/** What a steer's respond answers (steer.ts). */
export interface SteerReply {
  cycle: number;
  /** The message went into the cycle in flight (no new cycle). */
  steered?: true;
  /** Not taken by pi yet (the cycle is queued or starting, or the child is away): it joins the run when it can. */
  pending?: true;
  /** The cycle ended before pi took the message: it started the next cycle as a follow-up instead. */
  late?: true;
  queued?: true;
}

export type ChildEvent = {
  type: string;
  cycle?: number;
  stopReason?: string;
  errorMessage?: string;
  willRetry?: boolean;
  why?: string;
  /** steer_taken / steer_missed: which steer of the cycle. */
  n?: number;
};
export type ChildReport = { cycle?: number; outcome: "completed" | "needs_input"; report: string; needs?: string };

/**
 * What a task module is handed: some of the task's state and acts (`K`) and some of its ports (`P`), never the whole
 * of either (test/unit/runner-ports.test.ts). The runner, which has them all, fits every such port.
 */
export type TaskPort<K extends Exclude<keyof Runner, "ports">, P extends keyof TaskPorts = never> = Pick<Runner, K> & {
  readonly ports: Pick<TaskPorts, P>;
};
