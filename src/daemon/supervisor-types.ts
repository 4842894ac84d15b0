// What the daemon's task modules may ask of the supervisor, as a type: evidence.ts, settle.ts, task-runner.ts,
// pipeline.ts, task-commands.ts, child-prompt.ts, recovery and delivery import this, never supervisor.ts, so the
// modules form no import cycle (test/unit/import-cycles.test.ts). The class in supervisor.ts implements it and is
// the one module that imports them all.
import type { CrewReport } from "../core/crew-cycle.js";
import type { CycleEvent, SettleReason } from "../core/task-cycle.js";
import type { AgentResult, AgentStatus } from "../core/types.js";
import type { Runtime } from "../runtime/types.js";
import type { Admission } from "./admission.js";
import type { Live, SupervisorDeps } from "./live.js";
import type { TaskRecord } from "./record.js";
import type { Connection } from "./server-types.js";

/** `settled`: this result is a cycle's settled harvest (the one owner outcome of that cycle). */
export type StatusInfo = {
  settled: boolean;
  /** Start-up re-announcing a cycle that settled before the restart (its delivery may be missing). */
  recovered?: true;
};
export type StatusListener = (live: Live, result: AgentResult, info: StatusInfo) => void;

export type ChildEvent = {
  type: string;
  cycle?: number;
  stopReason?: string;
  errorMessage?: string;
  willRetry?: boolean;
  why?: string;
};
export type ChildReport = { cycle?: number; outcome: "completed" | "needs_input"; report: string; needs?: string };

export type NewTaskInput = Omit<
  TaskRecord,
  "token" | "name" | "sessionPath" | "resultPath" | "workdir" | "cycle" | "status" | "timing" | "createdAt"
> & { createdAt: number };

export interface Supervisor {
  readonly tasks: Map<string, Live>;
  readonly admission: Admission;
  readonly deps: SupervisorDeps;
  /** Set first thing at daemon stop: unfinished launches are then left to the next daemon's recovery. */
  stopped: boolean;
  onStatus(fn: StatusListener): () => void;
  notifyStatus(live: Live, result: AgentResult, info?: StatusInfo): void;
  authenticate(taskId: string, token: string): boolean;
  // evidence in
  childConnected(conn: Connection): void;
  childEvent(conn: Connection, ev: ChildEvent): Promise<{ ok: true }>;
  childReport(conn: Connection, p: ChildReport): Promise<{ ok: true }>;
  reportOf(live: Live): CrewReport | undefined;
  // the lifecycle and what carries its effects out
  dispatch(live: Live, ev: CycleEvent): Promise<void>;
  refresh(live: Live, opts?: { settled?: boolean; failed?: boolean }): Promise<void>;
  settleHarvest(live: Live, reason: SettleReason): Promise<void>;
  sendPrompt(live: Live): void;
  endChild(live: Live, why: string): Promise<void>;
  relaunch(live: Live): Promise<void>;
  journalWritten(live: Live, event: { type: string; [k: string]: unknown }): Promise<void>;
  journal(live: Live, event: { type: string; [k: string]: unknown }): Promise<void>;
  // spawn, watches, the timeout
  register(rec: TaskRecord): Live;
  run(live: Live, slot: Promise<{ queuedMs: number }>): Promise<void>;
  resume(live: Live): Promise<void>;
  markGone(live: Live): Promise<void>;
  startWatching(live: Live): void;
  stopWatching(live: Live): void;
  watchRuntime(live: Live, runtime: Runtime): void;
  armTimeout(live: Live): void;
  // owner commands
  abort(live: Live): Promise<boolean>;
  respond(live: Live, message: string, requestId?: string): Promise<{ cycle: number; queued: boolean }>;
  close(live: Live, closePane: boolean): Promise<AgentResult>;
  statusOf(live: Live): AgentStatus;
  isOpen(live: Live): boolean;
  newRecord(input: NewTaskInput, taskId: string): TaskRecord;
}
