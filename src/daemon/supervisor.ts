// The supervisor: one task's life from spawn to close. Evidence (child events, session file, result.md,
// runtime state) feeds one derivation; every status change rewrites result.json, is journaled and pushed.
import { randomBytes } from "node:crypto";
import { rename } from "node:fs/promises";
import { join } from "node:path";
import { DshError } from "../core/errors.js";
import { CONTRACT_ERROR_MESSAGE, sessionReport, withReportAsFinalText, type CrewReport } from "../core/crew-cycle.js";
import { agentName } from "../core/ids.js";
import type { AgentResult, AgentStatus, DiffEvidence, HerdrStatus, RuntimeKind } from "../core/types.js";
import type { Runtime, RuntimeEvent } from "../runtime/types.js";
import type { Config } from "../store/config.js";
import { unsynced, type TaskStore } from "../store/task-store.js";
import { writeAtomic } from "../store/fsio.js";
import { Admission } from "./admission.js";
import { assemble, diffFor } from "./harvest.js";
import { followUpPath, type TaskRecord } from "./record.js";
import type { Connection, Logger } from "./server.js";
import { TaskFiles } from "./watcher.js";
import { runPipeline } from "./pipeline.js";

export interface SupervisorDeps {
  home: string;
  store: TaskStore;
  config(): Config;
  runtimeFor(kind: RuntimeKind): Runtime;
  socketPath: string;
  childExtensionPath: string;
  /** Extra env for every child (tests: HOME, PI_CODING_AGENT_DIR, PI_OFFLINE). */
  childEnv: Record<string, string>;
  log: Logger;
}

export interface Live {
  rec: TaskRecord;
  files?: TaskFiles;
  child?: Connection;
  cycleRunning: boolean;
  promptPending?: { cycle: number; text: string };
  /** The last prompt pushed and to which connection: a prompt goes to each child connection at most once. */
  promptPushed?: { child: Connection; prompt: { cycle: number; text: string } };
  promptSentAt?: number;
  readiness?: { resolve(): void; reject(e: Error): void };
  lastStopReason?: string;
  runtimeState?: HerdrStatus | "missing";
  unwatch?: () => void;
  timer?: NodeJS.Timeout;
  diff?: DiffEvidence;
  result?: AgentResult;
  chain: Promise<void>;
  /** A settled harvest is queued: live snapshots before it would only repeat it without the diff. */
  settling?: boolean;
  /** The one refresh waiting behind the running one; later requests join it (it reads the newest evidence). */
  queued?: { settled?: boolean; failed?: boolean; done?: Promise<void> };
  /** The crew_report the child extension accepted, with the cycle it ended. */
  report?: CrewReport & { cycle: number };
  /** errorMessage of the child's last agent_end, for a session file that does not show it yet. */
  lastErrorMessage?: string;
}

type Listener = (live: Live, result: AgentResult) => void;

export class Supervisor {
  readonly tasks = new Map<string, Live>();
  readonly admission: Admission;
  private readonly listeners = new Set<Listener>();

  constructor(readonly deps: SupervisorDeps) {
    this.admission = new Admission(() => deps.config());
  }

  onStatus(fn: Listener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  authenticate(taskId: string, token: string): boolean {
    const live = this.tasks.get(taskId);
    return live !== undefined && live.rec.token === token && live.rec.lifecycle === undefined;
  }

  // ---- evidence in ----

  childConnected(conn: Connection): void {
    const live = this.tasks.get(conn.taskId ?? "");
    if (!live) return;
    live.child = conn;
    conn.onClose(() => {
      if (live.child === conn) delete live.child;
    });
    if (live.promptPending) this.sendPrompt(live);
  }

  sendPrompt(live: Live): void {
    const p = live.promptPending;
    const child = live.child;
    if (!p || !child || (live.promptPushed?.child === child && live.promptPushed.prompt === p)) return;
    live.promptPushed = { child, prompt: p };
    live.promptSentAt = Date.now();
    // The record first, then the effect: a crash in between leaves a prompt that looks sent and is never sent again
    // (recovery repeats no prompt it finds journaled), rather than one the child got but the journal never saw.
    void this.journal(live, { type: "prompt_sent", cycle: p.cycle, bytes: p.text.length }).then(() => {
      if (live.child === child && live.promptPending === p) child.push("child.prompt", p);
    });
  }

  /** No child extension came back for a follow-up: type it into the runtime instead (once, journaled first). */
  private typeFollowUpLater(live: Live, p: { cycle: number; text: string }): void {
    const t = setTimeout(() => {
      if (live.promptPending !== p || live.child || !live.rec.handle || live.rec.lifecycle) return;
      delete live.promptPending;
      live.promptSentAt = Date.now();
      live.cycleRunning = true;
      const handle = live.rec.handle;
      void this.journal(live, { type: "prompt_sent", cycle: p.cycle, bytes: p.text.length, via: "runtime" })
        .then(() => this.deps.runtimeFor(live.rec.runtime).sendText(handle, p.text))
        .catch((e: unknown) => this.deps.log.warn({ taskId: live.rec.taskId, err: String(e) }, "follow-up not typed"));
    }, this.deps.config().readinessTimeoutMs);
    t.unref();
  }

  async childEvent(conn: Connection, ev: { type: string; cycle?: number; stopReason?: string; errorMessage?: string; willRetry?: boolean; why?: string }): Promise<{ ok: true }> {
    const live = this.tasks.get(conn.taskId ?? "");
    if (!live || live.rec.lifecycle) return { ok: true };
    if (ev.type === "prompt_accepted" && live.promptPending && ev.cycle === live.promptPending.cycle) {
      // Confirms the push: recovery re-pushes only unconfirmed prompts (the extension runs a cycle once).
      void this.journal(live, { type: "prompt_accepted", cycle: ev.cycle });
      delete live.promptPending;
      live.rec.timing.promptedAt = live.promptSentAt ?? Date.now();
      live.cycleRunning = true;
      live.readiness?.resolve();
      delete live.readiness;
      this.refresh(live);
    } else if (ev.type === "agent_end" && live.cycleRunning && live.promptPending === undefined) {
      if (ev.stopReason !== undefined) live.lastStopReason = ev.stopReason;
      if (ev.errorMessage !== undefined) live.lastErrorMessage = ev.errorMessage;
      await live.files?.readSession();
      await live.files?.readResult();
      // pi may retry a retryable error; the next agent_end (or the process exit) decides then. The extension knows
      // the child's retry settings; without it, the session's own guess stands.
      if (ev.willRetry ?? live.files?.facts()?.retryMayFollow) return { ok: true };
      this.settleCycle(live, `agent_end ${ev.stopReason ?? ""}`.trim());
    } else if (ev.type === "prompt_failed") {
      void this.journal(live, { type: "prompt_failed", cycle: ev.cycle, error: ev.errorMessage });
    } else if (ev.type === "finalize_prompt") {
      // A reportless normal ending: the child sent itself the one finalization follow-up; the cycle goes on.
      void this.journal(live, { type: "finalize_prompt", cycle: ev.cycle, why: ev.why });
    } else if (ev.type === "contract_error" && live.cycleRunning && live.promptPending === undefined) {
      live.rec.error = { code: "CONTRACT_ERROR", message: CONTRACT_ERROR_MESSAGE };
      void this.journal(live, { type: "contract_error", cycle: ev.cycle, why: ev.why });
      await live.files?.readSession();
      this.settleCycle(live, "contract error", { failed: true });
    }
    return { ok: true };
  }

  /** The validated crew_report of the current cycle: as the child sent it, else read back from its session. */
  reportOf(live: Live): CrewReport | undefined {
    const r = live.report;
    if (r && r.cycle === live.rec.cycle) return r.needs !== undefined ? { outcome: r.outcome, report: r.report, needs: r.needs } : { outcome: r.outcome, report: r.report };
    return sessionReport(live.files?.facts());
  }

  async childReport(conn: Connection, p: { cycle?: number; outcome: "completed" | "needs_input"; report: string; needs?: string }): Promise<{ ok: true }> {
    const live = this.tasks.get(conn.taskId ?? "");
    if (!live) return { ok: true };
    // Kept before any await: the agent_end that follows on the same connection may settle the cycle next.
    live.report = { cycle: p.cycle ?? live.rec.cycle, outcome: p.outcome, report: p.report, ...(p.needs !== undefined ? { needs: p.needs } : {}) };
    await this.journal(live, { type: "report", cycle: p.cycle, outcome: p.outcome });
    await live.files?.readResult();
    return { ok: true };
  }

  private onFiles(live: Live): void {
    if (live.rec.lifecycle || live.promptPending) return;
    const f = live.files?.facts();
    // Without a connected extension, the session alone can settle a cycle that moved after its prompt.
    if (!live.child && live.cycleRunning && f?.cycleSettled && !f.retryMayFollow && this.freshSession(live)) {
      this.settleCycle(live, "session settled");
      return;
    }
    this.refresh(live);
  }

  private onRuntime(live: Live, e: RuntimeEvent): void {
    if (e.type === "state") {
      live.runtimeState = e.state;
      this.refresh(live);
      return;
    }
    if (live.runtimeState === "missing") return;
    live.runtimeState = "missing";
    void this.journal(live, { type: "runtime_" + e.type, ...(e.type === "exited" ? { exit: e.exit } : {}) });
    if (live.readiness) {
      live.readiness.reject(new DshError("AGENT_STALLED", `the child exited before it took its prompt (${e.type})`));
      delete live.readiness;
      return;
    }
    if (live.rec.lifecycle) return;
    // A child that ends after its cycle settled leaves the settled result as it was.
    if (live.cycleRunning || live.rec.status === "starting") this.settleCycle(live, "runtime " + e.type);
  }

  // ---- derivation and harvest ----

  private freshSession(live: Live): boolean {
    const f = live.files?.facts();
    const since = live.promptSentAt ?? live.rec.timing.promptedAt;
    if (!f || since === undefined) return false;
    return (f.lastTimestampMs ?? 0) >= since - 1000 || (live.files?.sessionMtimeMs ?? 0) >= since;
  }

  private runtimeRaw(live: Live): HerdrStatus | "missing" {
    if (live.runtimeState === "missing") return "missing";
    if (live.runtimeState === "blocked") return "blocked";
    return live.cycleRunning || live.promptPending ? "working" : "idle";
  }

  /** Rebuild the live result (no diff); serialized per task. */
  refresh(live: Live, opts: { settled?: boolean; failed?: boolean } = {}): Promise<void> {
    // At most one refresh waits per task: a burst of session lines costs one harvest, not one per line.
    const waiting = live.queued;
    if (waiting?.done) {
      if (opts.settled) waiting.settled = true;
      if (opts.failed) waiting.failed = true;
      return waiting.done;
    }
    const next: NonNullable<Live["queued"]> = { ...opts };
    live.queued = next;
    const run = live.chain.then(() => {
      if (live.queued === next) delete live.queued;
      return this.harvest(live, next);
    });
    live.chain = run.catch((e: unknown) => this.deps.log.error({ taskId: live.rec.taskId, err: String(e) }, "harvest failed"));
    next.done = live.chain;
    return live.chain;
  }

  private async harvest(live: Live, opts: { settled?: boolean; failed?: boolean }): Promise<void> {
    const { rec } = live;
    if (live.settling && !opts.settled) return;
    if (opts.settled) delete live.settling;
    const { store } = this.deps;
    if (opts.settled && rec.workdir) {
      const d = await diffFor(rec, store.taskPaths(rec.taskId).diffPatch, this.deps.config().patchCapBytes);
      if (d.diff) live.diff = d.diff;
      if (d.warning) rec.warnings = [...(rec.warnings ?? []).filter((w) => !w.startsWith("diff not harvested")), d.warning];
    }
    const sessionFacts = live.files?.facts();
    const facts = sessionFacts && withReportAsFinalText(sessionFacts);
    const result = assemble({
      rec,
      runtime: this.runtimeRaw(live),
      ...(rec.runtime === "herdr" && live.runtimeState && live.runtimeState !== "missing" ? { herdrStatus: live.runtimeState } : {}),
      ...(facts ? { facts } : {}),
      ...(live.lastStopReason ? { eventStopReason: live.lastStopReason } : {}),
      ...(live.files?.result ? { resultMd: live.files.result } : {}),
      sessionChangedAfterPrompt: this.freshSession(live),
      ...(live.diff ? { diff: live.diff } : {}),
      settled: opts.settled === true,
      ...(opts.failed ? { failed: true } : {}),
    });
    const changed = result.status !== live.result?.status || opts.settled === true;
    live.result = result;
    rec.status = result.status;
    rec.updatedAt = Date.now();
    if (live.files) rec.sessionOffset = live.files.sessionOffset;
    // Owners hear first; then the record. fsync only on a transition (a live snapshot is rebuilt from the session
    // and journal after a crash), and not for `starting`: nothing runs before the launch, which is journaled durably.
    if (changed) for (const fn of this.listeners) fn(live, result);
    const sync = changed && result.status !== "starting";
    await store.saveTask(rec, result, { sync });
    if (changed) {
      const ev = { type: "status", status: result.status, cycle: rec.cycle, ...(opts.settled ? { settled: true } : {}), sessionOffset: rec.sessionOffset };
      await this.journal(live, sync ? ev : unsynced(ev));
    }
  }

  settleCycle(live: Live, why: string, opts: { failed?: boolean } = {}): void {
    live.cycleRunning = false;
    delete live.promptPending;
    if (live.timer) clearTimeout(live.timer);
    delete live.timer;
    live.rec.timing.settledAt = Date.now();
    const failure = live.rec.error || live.rec.lifecycle ? undefined : this.failureOf(live, why);
    if (failure) live.rec.error = failure;
    live.settling = true;
    this.admission.release(live.rec.taskId);
    void this.journal(live, { type: "settle", why, cycle: live.rec.cycle });
    void this.refresh(live, { settled: true, ...opts });
  }

  /** Why a cycle that settles without a report failed, so the owner's error delivery and the card can say so. */
  private failureOf(live: Live, why: string): { code: "AGENT_ERROR" | "PANE_GONE"; message: string } | undefined {
    if (this.reportOf(live)) return undefined;
    const f = live.files?.facts();
    const where = `inspect the session (${live.rec.sessionPath})`;
    if ((f?.lastStopReason ?? live.lastStopReason) === "error") {
      const msg = f?.lastErrorMessage ?? live.lastErrorMessage ?? "no error message";
      return { code: "AGENT_ERROR", message: `the child's model call failed: ${msg}; ${where}, check the model and provider, then respond or spawn again` };
    }
    if (why.startsWith("runtime ") || why.startsWith("gone ")) {
      return { code: "PANE_GONE", message: `the child's process or pane ended before its cycle finished (${why}); ${where}, then spawn again` };
    }
    return undefined;
  }

  journal(live: Live, event: { type: string; [k: string]: unknown }): Promise<void> {
    return this.deps.store.appendEvent(live.rec.taskId, event).catch((e: unknown) => {
      this.deps.log.warn({ taskId: live.rec.taskId, err: String(e) }, "journal append failed");
    });
  }

  // ---- spawn pipeline ----

  register(rec: TaskRecord): Live {
    const live: Live = { rec, cycleRunning: false, chain: Promise.resolve() };
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
  markGone(live: Live): void {
    live.runtimeState = "missing";
    this.settleCycle(live, "gone while the daemon was away");
  }

  startWatching(live: Live): void {
    if (live.files) return;
    const { rec } = live;
    live.files = new TaskFiles({
      taskDir: this.deps.store.taskPaths(rec.taskId).dir,
      sessionPath: rec.sessionPath,
      resultPath: rec.resultPath,
      onChange: () => this.onFiles(live),
    });
    live.files.start();
  }

  stopWatching(live: Live): void {
    live.unwatch?.();
    delete live.unwatch;
    void live.files?.stop();
    if (live.timer) clearTimeout(live.timer);
    delete live.timer;
  }

  watchRuntime(live: Live, runtime: Runtime): void {
    const handle = live.rec.handle;
    if (!handle) return;
    live.unwatch?.();
    if (runtime.watch) {
      live.unwatch = runtime.watch(handle, (e) => this.onRuntime(live, e));
      return;
    }
    const iv = setInterval(() => {
      void runtime.isAlive(handle).then((alive) => !alive && this.onRuntime(live, { type: "gone" }));
    }, 1000);
    live.unwatch = () => clearInterval(iv);
  }

  armTimeout(live: Live): void {
    if (live.timer) clearTimeout(live.timer);
    const ms = live.rec.timeoutMs;
    live.timer = setTimeout(() => {
      void this.interrupt(live, { code: "TIMEOUT", message: `no result within timeoutMs (${ms} ms); the child was stopped. Inspect the session, then spawn again with a larger timeoutMs or a smaller task` });
    }, ms);
  }

  // ---- owner actions ----

  async interrupt(live: Live, error?: { code: string; message: string }): Promise<void> {
    const { rec } = live;
    if (rec.lifecycle) return;
    rec.lifecycle = "interrupted";
    if (error) rec.error = error;
    this.admission.cancel(rec.taskId, new DshError("BAD_STATE", "aborted while queued"));
    live.readiness?.reject(new DshError("BAD_STATE", "aborted"));
    live.child?.push("child.abort", { reason: error?.code ?? "aborted" });
    if (rec.handle) await this.deps.runtimeFor(rec.runtime).close(rec.handle).catch(() => undefined);
    this.stopWatching(live);
    await this.journal(live, { type: "interrupted", ...(error ? { code: error.code } : {}) });
    this.settleCycle(live, error?.code ?? "aborted");
    await live.chain;
  }

  async respond(live: Live, message: string): Promise<number> {
    const { rec } = live;
    if (rec.status !== "completed" && rec.status !== "blocked") {
      throw new DshError("BAD_STATE", `task ${rec.taskId} is ${rec.status}; task.respond needs a completed or blocked task (wait for it with task.wait, or spawn a new task)`);
    }
    await this.admission.acquire(rec.taskId);
    rec.cycle += 1;
    delete rec.timing.settledAt;
    delete live.lastStopReason;
    delete live.lastErrorMessage;
    // Pending before result.md moves: a harvest the move triggers must read "working", not a settled cycle.
    const pending = { cycle: rec.cycle, text: message };
    live.promptPending = pending;
    const dir = this.deps.store.taskPaths(rec.taskId).dir;
    // The new cycle must earn its own result.md: keep the old one beside it for the record.
    await rename(rec.resultPath, join(dir, `result.cycle${rec.cycle - 1}.md`)).catch(() => undefined);
    await live.files?.readResult();
    // The follow-up and its record are durable before any child sees it: a restarted daemon sends it (once) if no
    // prompt_sent follows, and never a second time if one does.
    await writeAtomic(followUpPath(dir, rec.cycle), message);
    await this.journal(live, { type: "respond", cycle: rec.cycle, bytes: message.length });
    this.armTimeout(live);
    // With the extension away (a daemon restart), wait for it to reconnect: hello pushes the pending prompt.
    if (live.child) this.sendPrompt(live);
    else this.typeFollowUpLater(live, pending);
    await this.refresh(live);
    return rec.cycle;
  }

  async close(live: Live, closePane: boolean): Promise<AgentResult> {
    const { rec } = live;
    if (rec.lifecycle !== "closed") {
      const wasRunning = live.cycleRunning || live.promptPending !== undefined;
      rec.lifecycle = "closed";
      this.admission.cancel(rec.taskId, new DshError("BAD_STATE", "closed while queued"));
      if (wasRunning) live.child?.push("child.abort", { reason: "closed" });
      if (rec.handle && (closePane || wasRunning)) await this.deps.runtimeFor(rec.runtime).close(rec.handle).catch(() => undefined);
      this.stopWatching(live);
      live.child?.push("child.abort", { reason: "closed" });
      this.admission.release(rec.taskId);
      live.cycleRunning = false;
      await this.journal(live, { type: "closed", closePane });
      await this.refresh(live);
    }
    await live.chain;
    return live.result!;
  }

  statusOf(live: Live): AgentStatus {
    return live.result?.status ?? live.rec.status;
  }

  isOpen(live: Live): boolean {
    return live.rec.lifecycle === undefined;
  }

  newRecord(input: Omit<TaskRecord, "token" | "name" | "sessionPath" | "resultPath" | "workdir" | "cycle" | "status" | "timing" | "createdAt"> & { createdAt: number }, taskId: string): TaskRecord {
    const paths = this.deps.store.taskPaths(taskId);
    return {
      ...input,
      taskId,
      status: "starting",
      name: agentName(input.role, input.model, taskId),
      token: randomBytes(24).toString("hex"),
      workdir: input.cwd,
      sessionPath: join(paths.dir, "session.jsonl"),
      resultPath: paths.resultMd,
      cycle: 1,
      timing: { createdAt: input.createdAt },
    };
  }
}
