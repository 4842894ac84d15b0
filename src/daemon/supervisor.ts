// The supervisor: one task's life from spawn to close. Evidence (child events, session file, result.md,
// runtime state) feeds one derivation; every status change rewrites result.json, is journaled and pushed.
// This class owns the task map, the listeners and the watches; the work is in evidence.ts (evidence in),
// settle.ts (derivation, harvest, settle), child-prompt.ts (prompt delivery), task-commands.ts (owner commands)
// and pipeline.ts (spawn).
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { CrewReport } from "../core/crew-cycle.js";
import { agentName } from "../core/ids.js";
import { PI_DEFAULT_MODEL } from "../core/model-choice.js";
import type { AgentResult, AgentStatus } from "../core/types.js";
import type { Runtime, RuntimeEvent } from "../runtime/types.js";
import { Admission } from "./admission.js";
import { sendPrompt } from "./child-prompt.js";
import { childConnected, childEvent, childReport, onFiles, onRuntime } from "./evidence.js";
import type { Live, SupervisorDeps } from "./live.js";
import { relaunch, runPipeline } from "./pipeline.js";
import type { TaskRecord } from "./record.js";
import type { Connection } from "./server.js";
import { refresh, reportOf, settleHarvest } from "./settle.js";
import { abort, close, respond, timeOut } from "./task-commands.js";
import { dispatch, endChild } from "./task-runner.js";
import type { CycleEvent, SettleReason } from "../core/task-cycle.js";
import type {
  ChildEvent,
  ChildReport,
  NewTaskInput,
  StatusInfo,
  StatusListener,
  Supervisor as SupervisorPort,
} from "./supervisor-types.js";
import { TaskFiles } from "./watcher.js";

export type { Live, SupervisorDeps } from "./live.js";
export type { StatusInfo } from "./supervisor-types.js";
type Listener = StatusListener;

/** The one module that wires the task modules together (they see it only as supervisor-types.ts's Supervisor). */
export class Supervisor implements SupervisorPort {
  readonly tasks = new Map<string, Live>();
  readonly admission: Admission;
  /** Set first thing at daemon stop: unfinished launches are then left to the next daemon's recovery. */
  stopped = false;
  private readonly listeners = new Set<Listener>();

  constructor(readonly deps: SupervisorDeps) {
    this.admission = new Admission(() => deps.config());
  }

  onStatus(fn: Listener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** A status change (or a settled harvest) reaches every listener before it is recorded. */
  notifyStatus(live: Live, result: AgentResult, info: StatusInfo = { settled: false }): void {
    for (const fn of this.listeners) fn(live, result, info);
  }

  authenticate(taskId: string, token: string): boolean {
    const live = this.tasks.get(taskId);
    return live !== undefined && live.rec.token === token && live.rec.lifecycle === undefined;
  }

  // ---- evidence in (evidence.ts, child-prompt.ts) ----

  childConnected(conn: Connection): void {
    childConnected(this, conn);
  }

  sendPrompt(live: Live): void {
    sendPrompt(this, live);
  }

  childEvent(conn: Connection, ev: ChildEvent): Promise<{ ok: true }> {
    return childEvent(this, conn, ev);
  }

  childReport(conn: Connection, p: ChildReport): Promise<{ ok: true }> {
    return childReport(this, conn, p);
  }

  /** The validated crew_report of the current cycle: as the child sent it, else read back from its session. */
  reportOf(live: Live): CrewReport | undefined {
    return reportOf(live);
  }

  // ---- derivation and settle (settle.ts) ----

  /** Rebuild the live result (no diff); serialized per task. */
  refresh(live: Live, opts: { settled?: boolean; failed?: boolean } = {}): Promise<void> {
    return refresh(this, live, opts);
  }

  /** Feed a lifecycle event to the task's machine (src/core/task-cycle.ts). */
  dispatch(live: Live, ev: CycleEvent): Promise<void> {
    return dispatch(this, live, ev);
  }

  settleHarvest(live: Live, reason: SettleReason): Promise<void> {
    return settleHarvest(this, live, reason);
  }

  endChild(live: Live, why: string): Promise<void> {
    return endChild(this, live, why);
  }

  relaunch(live: Live): Promise<void> {
    return relaunch(this, live);
  }

  /**
   * A record that is awaited only until it is in the journal (a daemon crash keeps it) and made durable in the commit
   * log behind the caller: a settle's record (written before its harvest) and the settled status record after it.
   * The owner's outbox record goes through the same log after both, so it is never durable without them (a power cut
   * keeps a prefix of the log), and neither the push nor `task.wait` waits for an fsync of its own for them.
   */
  async journalWritten(live: Live, event: { type: string; [k: string]: unknown }): Promise<void> {
    try {
      const { durable } = await this.deps.store.appendEventWritten(live.rec.taskId, event);
      durable.catch((e: unknown) => this.journalFailed(live, e));
    } catch (e) {
      this.journalFailed(live, e);
    }
  }

  journal(live: Live, event: { type: string; [k: string]: unknown }): Promise<void> {
    return this.deps.store.appendEvent(live.rec.taskId, event).catch((e: unknown) => this.journalFailed(live, e));
  }

  private journalFailed(live: Live, e: unknown): void {
    this.deps.log.warn({ taskId: live.rec.taskId, err: String(e) }, "journal append failed");
  }

  // ---- spawn pipeline ----

  register(rec: TaskRecord): Live {
    const live: Live = {
      rec,
      state: { phase: { name: "queued", cycle: rec.cycle }, childConnected: false },
      chain: Promise.resolve(),
    };
    this.tasks.set(rec.taskId, live);
    return live;
  }

  /** Admission → baseline/worktree → prompt.md → launch with the readiness barrier. Runs in the background. */
  run(live: Live, slot: Promise<{ queuedMs: number }>): Promise<void> {
    return runPipeline(this, live, slot);
  }

  /** Re-read a recovered task's files from the start and watch them again. */
  async resume(live: Live): Promise<void> {
    this.startWatching(live);
    await live.files!.readSession();
    await live.files!.readResult();
    live.promptSentAt = live.rec.timing.promptedAt ?? 0;
  }

  /** A recovered cycle that cannot finish: the child is gone. */
  markGone(live: Live): Promise<void> {
    live.runtimeState = "missing";
    live.childEnded = true;
    return this.dispatch(live, { type: "runtime_gone", how: "gone" });
  }

  // ---- watches and the timeout ----

  startWatching(live: Live): void {
    if (live.files) return;
    const { rec } = live;
    live.files = new TaskFiles({
      taskDir: this.deps.store.taskPaths(rec.taskId).dir,
      sessionPath: rec.sessionPath,
      resultPath: rec.resultPath,
      onChange: (what) => onFiles(this, live, what),
    });
    live.files.start();
  }

  stopWatching(live: Live): void {
    live.unwatch?.();
    delete live.unwatch;
    void live.files?.stop();
    if (live.timer) clearTimeout(live.timer);
    delete live.timer;
    if (live.idleTimer) clearTimeout(live.idleTimer);
    delete live.idleTimer;
  }

  watchRuntime(live: Live, runtime: Runtime): void {
    const handle = live.rec.handle;
    if (!handle) return;
    live.unwatch?.();
    // An event is about the handle it was watched for: a parked child's old pane may report its exit after respond
    // launched a new child, and that must not end the new cycle.
    const ofThisHandle = (e: RuntimeEvent): void => {
      if (live.rec.handle === handle) onRuntime(this, live, e);
    };
    if (runtime.watch) {
      live.unwatch = runtime.watch(handle, ofThisHandle);
      return;
    }
    const iv = setInterval(() => {
      void runtime.isAlive(handle).then((alive) => !alive && ofThisHandle({ type: "gone" }));
    }, 1000);
    live.unwatch = () => clearInterval(iv);
  }

  armTimeout(live: Live): void {
    if (live.timer) clearTimeout(live.timer);
    live.timer = setTimeout(() => {
      delete live.timer;
      if (!this.stopped) void timeOut(this, live);
    }, live.rec.timeoutMs);
  }

  // ---- owner commands (task-commands.ts) ----

  /** Abort a task; false when nothing is left to abort (closed, or ended on its own). */
  abort(live: Live): Promise<boolean> {
    return abort(this, live);
  }

  respond(live: Live, message: string, requestId?: string): Promise<{ cycle: number; queued: boolean }> {
    return respond(this, live, message, requestId);
  }

  close(live: Live, closePane: boolean): Promise<AgentResult> {
    return close(this, live, closePane);
  }

  statusOf(live: Live): AgentStatus {
    return live.result?.status ?? live.rec.status;
  }

  isOpen(live: Live): boolean {
    return live.state.phase.name !== "closed" && live.rec.lifecycle === undefined;
  }

  newRecord(input: NewTaskInput, taskId: string): TaskRecord {
    const paths = this.deps.store.taskPaths(taskId);
    return {
      ...input,
      taskId,
      status: "starting",
      name: agentName(input.role, input.model ?? PI_DEFAULT_MODEL, taskId),
      token: randomBytes(24).toString("hex"),
      workdir: input.cwd,
      sessionPath: join(paths.dir, "session.jsonl"),
      resultPath: paths.resultMd,
      cycle: 1,
      timing: { createdAt: input.createdAt },
    };
  }
}
