// One runner per task: it owns the task's Live state, its timers and its watches, and reaches the rest of the daemon
// only through its ports {runtime, git, store, clock, log} (plus the admission slot, the status listeners and the
// stop flag). Every event goes through `dispatch`, which takes the next phase from `step` (src/core/lifecycle/task-cycle.ts) at
// once and then performs the effects in their order (a journal record is written before the act it records).
// Timers are effects too: arm_timer/cancel_timer run through the clock port and come back as timer_fired.
// The work itself is in the modules beside it, which see the runner as a type (runner-types.ts): evidence.ts
// (evidence in), settle.ts (derivation, harvest, settle), child-prompt.ts (prompt delivery), task-commands.ts (owner
// commands) and pipeline.ts (spawn, launch).
import { setTimeout as sleep } from "node:timers/promises";
import type { CapLimits } from "../../core/budget.js";
import type { TimerHandle } from "../../core/clock.js";
import type { CrewReport } from "../../core/crew/crew-cycle.js";
import { journalRecord, type JournalRecord } from "../../core/lifecycle/journal-record.js";
import {
  LATE_RESULT_WARNING,
  step,
  type CycleEvent,
  type Effect,
  type StepResult,
  type TaskState,
  type TimerKind,
  type TimerLimits,
} from "../../core/lifecycle/task-cycle.js";
import type { AgentResult } from "../../core/types.js";
import { redactSecrets } from "../../core/redact.js";
import type { Runtime, RuntimeEvent } from "../../runtime/types.js";
import type { LandingOutcome } from "../../core/result/check-receipts.js";
import { sendPrompt, typePrompt } from "./child-prompt.js";
import { recordLanding } from "./land-record.js";
import { moveOwner } from "./owner-move.js";
import { childEvent, childJoined, childLeft, childReport, onFiles, onRuntime } from "./evidence.js";
import type { Live } from "./live.js";
import { admit, diagnoseStart, launch, start, type LaunchEnded } from "./pipeline.js";
import type { TaskRecord } from "./record.js";
import type { RecoveryStep, RemoteSettled, Runner, StatusInfo, SteerReply, TaskPorts } from "./runner-types.js";
import type { Connection } from "../server/server-types.js";
import {
  harvest,
  recordHarvest,
  refresh,
  reportOf,
  settleDiskNote,
  settleHarvest,
  type HarvestOpts,
} from "./settle.js";
import { pushSteer, steerFate, steersMissed, steerTaken, writeSteer } from "./steer.js";
import type { ChildEvent, ChildReport } from "./supervisor-types.js";
import { abortEvent, closeEvent, followUpWritten, nextCycle, slotRefused } from "./task-commands.js";
import { TaskFiles } from "../ports/watcher.js";

/**
 * The optional fields of `Live`, declared once (live.ts): the runner takes their types from there instead of listing
 * them again. Each starts undefined, so an empty class is an honest base for them; Partial keeps it honest: a
 * required field added to Live is missing from TaskRunner and fails to compile instead of starting undefined.
 */
const LiveFields = class {} as new () => Partial<Omit<Live, "rec" | "state" | "chain">>;

export class TaskRunner extends LiveFields implements Runner {
  // ---- the task's state (Live: its optional fields come from LiveFields) ----
  state: TaskState;
  chain: Promise<void> = Promise.resolve();
  setupRun?: { abort(): void; ended: Promise<unknown> };

  /** The timers the machine armed, one per kind. */
  private readonly timers = new Map<TimerKind, TimerHandle>();
  /** The runner's own timers (snapshot pacing, record retries, a runtime poll). */
  private readonly own = new Set<TimerHandle>();
  /** Called after each phase change (onPhase). */
  private readonly phaseWatchers = new Set<() => void>();

  constructor(
    public rec: TaskRecord,
    readonly ports: TaskPorts,
  ) {
    super();
    this.state = { phase: { name: "queued", cycle: rec.cycle }, childConnected: false };
  }

  // ---- the machine ----

  /** How long each of the task's timers runs: the record's timeout, the config's idle and readiness times. */
  limits(): TimerLimits {
    const c = this.ports.config();
    return { timeoutMs: this.rec.timeoutMs, idleMs: c.idleChildMs, readinessMs: c.readinessTimeoutMs };
  }

  /** Feed one event to the task's machine. The phase changes synchronously; the returned promise ends with the effects. */
  dispatch(ev: CycleEvent): Promise<void> {
    const r = this.apply(ev);
    const done = this.perform(r.effects);
    this.effectsDone = Promise.all([this.effectsDone, done]).then(() => undefined);
    return done;
  }

  /**
   * A relayed task (src/daemon/relay/relay-machine.ts): the same machine, whose effects mean only this here: the journal
   * (marked remote) and the settled record (`onSettled`). Timers, the slot and the child are the other daemon's.
   */
  async dispatchRemote(ev: CycleEvent, onSettled?: RemoteSettled): Promise<void> {
    const effects = this.apply(ev).effects;
    let held: JournalRecord | undefined;
    for (const [i, e] of effects.entries()) {
      // A settle's record is awaited until written: the commit log makes it durable behind us, before the settled
      // status record and the owner's outbox record that follow it (as for a local settle). When the settled record
      // comes next, onSettled writes the two in one append: one write on the way to the owner's push, not two.
      if (e.type === "journal" && e.entry.type === "settle") {
        const record = { ...journalRecord(e.entry), remote: true };
        const next = effects.slice(i + 1).find((x) => x.type === "journal" || x.type === "harvest_settled");
        if (onSettled && next?.type === "harvest_settled") held = record;
        else await this.journalWritten(record);
      } else if (e.type === "journal") await this.journal({ ...journalRecord(e.entry), remote: true });
      else if (e.type === "harvest_settled") await onSettled?.(e.reason, held);
    }
  }

  /** The one place a task's state changes: the machine's next state. */
  private apply(event: CycleEvent): StepResult {
    // A failure's message becomes the settle record, result.json, the log line and the owner's card: the task's
    // token (a launch's command line, a child's output) never rides along.
    const ev =
      "message" in event && typeof event.message === "string"
        ? { ...event, message: redactSecrets(event.message, [this.rec.token]) }
        : event;
    const before = this.state.phase;
    const r = step(this.state, ev, this.limits());
    this.state = r.state;
    // The settle's moment, before its slot is released: the next task admitted cannot start before it.
    if (r.effects.some((e) => e.type === "harvest_settled")) this.rec.timing.settledAt = this.ports.clock.now();
    if (r.state.phase !== before) {
      this.ports.log.debug(
        { taskId: this.rec.taskId, event: ev.type, from: before.name, to: r.state.phase.name },
        "phase",
      );
      for (const fn of this.phaseWatchers) fn();
    }
    return r;
  }

  onPhase(fn: () => void): () => void {
    this.phaseWatchers.add(fn);
    return () => this.phaseWatchers.delete(fn);
  }

  private async perform(effects: Effect[]): Promise<void> {
    for (const e of effects) {
      try {
        await this.performOne(e);
      } catch (err) {
        this.ports.log.error({ taskId: this.rec.taskId, effect: e.type, err: String(err) }, "lifecycle effect failed");
      }
    }
  }

  private async performOne(e: Effect): Promise<void> {
    switch (e.type) {
      case "journal":
        if (e.entry.type === "settle") {
          // The settle record is the verdict, the disk's state at that moment included (a full disk is named in
          // the ending's error even when a crash comes before the harvest and the space is back by the restart).
          const note = await settleDiskNote(this, e.entry.reason);
          this.settleDisk = { cycle: e.entry.cycle, ...(note ? { note } : {}) };
          const { cycle, why, reason } = e.entry;
          await this.journalWritten({ type: "settle", cycle, why, reason, disk: note ?? "ok" });
        } else await this.journal(journalRecord(e.entry));
        if (e.entry.type === "late_evidence") await this.noteLateEvidence();
        return;
      case "push_prompt":
        this.sendPrompt();
        return;
      case "type_prompt":
        typePrompt(this, e.cycle);
        return;
      case "arm_timer":
        this.armTimer(e.kind, e.ms);
        return;
      case "cancel_timer":
        this.cancelTimer(e.kind);
        return;
      case "release_slot":
        this.ports.slot.release();
        return;
      case "end_child":
        await this.endChild(e.why, e.keepPane === true);
        return;
      case "stop_turn":
        await this.stopTurn(e.why);
        return;
      case "relaunch":
        delete this.runtimeState; // the old child's exit is old news: a new one starts
        void launch(this, e.attempt).then((ended) => this.launchEnded(ended));
        return;
      case "diagnose_start":
        void diagnoseStart(this, e.why).then((failed) => failed && this.dispatch(failed));
        return;
      case "refresh":
        await this.refresh();
        return;
      case "harvest_settled":
        await settleHarvest(this, e.reason);
        return;
      case "push_steer":
        await pushSteer(this, e.cycle, e.n);
        return;
      case "steers_missed":
        steersMissed(this, e.cycle, e.ns);
        return;
    }
  }

  // ---- timers, through the clock port ----

  private armTimer(kind: TimerKind, ms: number): void {
    this.cancelTimer(kind);
    if (this.ports.stopped()) return; // a stopped daemon times nothing: the next one's recovery arms again
    const h = this.ports.clock.setTimer(ms, () => {
      if (this.timers.get(kind) !== h) return;
      this.timers.delete(kind);
      if (!this.ports.stopped()) void this.dispatch({ type: "timer_fired", kind });
    });
    this.timers.set(kind, h);
  }

  private cancelTimer(kind: TimerKind): void {
    this.ports.clock.clearTimer(this.timers.get(kind));
    this.timers.delete(kind);
  }

  /** The kinds of timer armed now (tests and `daemon stop`). */
  armedTimers(): TimerKind[] {
    return [...this.timers.keys()];
  }

  later(ms: number, fn: () => void): void {
    if (this.ports.stopped()) return;
    const h = this.ports.clock.setTimer(ms, () => {
      if (!this.own.delete(h) || this.ports.stopped()) return;
      fn();
    });
    this.own.add(h);
  }

  pendingTimers(): number {
    return this.timers.size + this.own.size;
  }

  // ---- journal and listeners ----

  journal(event: JournalRecord): Promise<void> {
    return this.ports.store.appendEvent(this.rec.taskId, event).catch((e: unknown) => this.journalFailed(e));
  }

  /**
   * A record that is awaited only until it is in the journal (a daemon crash keeps it) and made durable in the commit
   * log behind the caller: a settle's record (written before its harvest) and the settled status record after it.
   * The owner's outbox record goes through the same log after both, so it is never durable without them (a power cut
   * keeps a prefix of the log), and neither the push nor `task.wait` waits for an fsync of its own for them.
   */
  async journalWritten(...events: [JournalRecord, ...JournalRecord[]]): Promise<void> {
    try {
      const { durable } = await this.ports.store.appendEventsWritten(this.rec.taskId, events);
      durable.catch((e: unknown) => this.journalFailed(e));
    } catch (e) {
      this.journalFailed(e);
    }
  }

  private journalFailed(e: unknown): void {
    this.ports.log.warn({ taskId: this.rec.taskId, err: String(e) }, "journal append failed");
  }

  /** A status change (or a settled harvest) reaches every listener before it is recorded. */
  notify(result: AgentResult, info: StatusInfo = { settled: false }): void {
    this.ports.notify(result, info);
  }

  // ---- evidence, derivation, prompts ----

  refresh(opts: HarvestOpts = {}): Promise<void> {
    return refresh(this, opts, (next) => this.harvest(next));
  }

  /** One harvest, on the task's chain: the owners hear first, then the machine (a settle), then the record. */
  private async harvest(opts: HarvestOpts): Promise<void> {
    const h = await harvest(this, opts);
    if (!h) return;
    if (h.changed) this.notify(h.result, { settled: h.settling });
    if (h.harvested) void this.dispatch(h.harvested); // the settled status: what respond and abort are asked against
    await recordHarvest(this, h);
  }

  reportOf(): CrewReport | undefined {
    return reportOf(this);
  }

  sendPrompt(): void {
    sendPrompt(this);
  }

  /** The evidence modules find the events; the runner feeds them (not awaited: a watch callback waits for nothing). */
  private feed(ev: CycleEvent | undefined): void {
    if (ev) void this.dispatch(ev);
  }

  childConnected(conn: Connection): void {
    const hello = childJoined(this, conn);
    conn.onClose(() => {
      const left = childLeft(this, conn);
      if (!left) return; // not the task's child (any more)
      void this.dispatch(left);
      // While the extension was connected its agent_end was awaited; its session may already show the cycle settled
      // (read before the close was seen). Without the extension the session alone decides: re-read and decide now.
      if (this.state.phase.name === "running")
        void this.files?.readSession().then(() => this.state.phase.name === "running" && this.feed(onFiles(this)));
    });
    void this.dispatch(hello);
  }

  async childEvent(ev: ChildEvent): Promise<{ ok: true }> {
    const event = await childEvent(this, ev);
    if (event) await this.dispatch(event);
    // A respond waiting for its steer answers once the machine has recorded it taken.
    if (event?.type === "steer_taken") steerTaken(this, event.n);
    return { ok: true };
  }

  childReport(p: ChildReport): Promise<{ ok: true }> {
    return childReport(this, p);
  }

  /** End the child's process (its pane goes too on tmux/Herdr; the session and output stay in the task dir). */
  async endChild(why: string, keepPane = false): Promise<void> {
    const { rec } = this;
    if (this.childEnded) return;
    this.childEnded = true;
    this.unwatchRuntime(); // the daemon ended it: its exit is no news
    this.child?.push("child.abort", { reason: why });
    if (!rec.handle) return;
    const runtime = this.ports.runtimeFor(rec.runtime);
    // A stalled child's last words are read before its pane goes (a tmux close takes them): pi may have said why
    // it could not start, and diagnoseStart quotes it.
    if (why === "stalled") {
      // A pane keeps blank rows (and tmux's "Pane is dead" line) between and below the child's last words.
      const handle = rec.handle;
      const read = () => runtime.readOutput(handle, { lines: 200 }).catch(() => "");
      // A child that has just exited can still have its last lines in flight to its pane (tmux marks the pane dead
      // before it has read all the pty held): read again until two reads 100 ms apart agree, at most three times.
      let out = await read();
      for (let i = 0; i < 3; i++) {
        await sleep(100);
        const again = await read();
        if (again === out) break;
        out = again;
      }
      this.stalledOutput = out
        .split("\n")
        .filter((l) => l.trim() !== "" && !/^Pane is dead \(/.test(l))
        .slice(-5)
        .join("\n");
      if (rec.runtime === "herdr")
        this.stalledHerdrWord = await runtime.agentState?.(rec.handle).catch(() => undefined);
    }
    const ended = keepPane && runtime.end ? runtime.end(rec.handle) : runtime.close(rec.handle);
    await ended.catch((err: unknown) =>
      this.ports.log.warn({ taskId: rec.taskId, why, err: String(err) }, "child not ended"),
    );
  }

  /**
   * Stop the child's running turn, not the child: pi's abort through the child extension, else the runtime's
   * interrupt (Escape in a pane, the RPC abort headless). The session stays; a respond continues the conversation.
   */
  private async stopTurn(why: string): Promise<void> {
    if (this.child && !this.child.closed) {
      this.child.push("child.abort", { reason: why });
      return;
    }
    if (this.rec.handle)
      await this.ports
        .runtimeFor(this.rec.runtime)
        .sendKeys(this.rec.handle, ["Escape"])
        .catch((e: unknown) =>
          this.ports.log.warn({ taskId: this.rec.taskId, err: String(e) }, "could not stop the turn"),
        );
  }

  /** A settled cycle is final: late evidence adds one warning to result.json and changes nothing else. */
  private async noteLateEvidence(): Promise<void> {
    const r = this.result;
    if (!r || r.warnings?.includes(LATE_RESULT_WARNING)) return;
    this.rec.warnings = [...(this.rec.warnings ?? []), LATE_RESULT_WARNING];
    this.result = { ...r, warnings: [...(r.warnings ?? []), LATE_RESULT_WARNING] };
    await this.ports.store.saveTask(this.rec, this.result, { sync: false });
  }

  // ---- on-demand work: checks, landings, owner moves ----

  onChain<T>(op: () => Promise<T>): Promise<T> {
    const run = this.chain.then(op);
    this.chain = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  recordLanding(base: AgentResult, outcome: LandingOutcome, event: JournalRecord): Promise<AgentResult> {
    return recordLanding(this, base, outcome, event);
  }

  moveOwner(to: string): Promise<void> {
    return moveOwner(this, to);
  }

  // ---- spawn, commands ----

  /** Admission → baseline/worktree → prompt.md → launch (the readiness barrier is the machine's). In the background. */
  async run(slot: Promise<{ queuedMs: number }>, known?: Live["knownRepo"]): Promise<void> {
    if (known) this.knownRepo = known;
    const admitted = await admit(this, slot);
    if (admitted?.type !== "admitted") return this.launchEnded(admitted);
    void this.dispatch(admitted); // not awaited: the admission's records are written meanwhile
    await this.launchEnded(await start(this));
  }

  /** What a launch ended in, fed to the machine. */
  private async launchEnded(ended: LaunchEnded | undefined): Promise<void> {
    if (!ended) return;
    await this.dispatch(ended);
    if (ended.type !== "launch_returned") return;
    // A fast child said hello and took its prompt (perhaps even finished its cycle) while the launch was being
    // journaled: its status moves on now; a slower one is pushed its prompt on hello (the machine's barrier waits).
    const ph = this.state.phase.name;
    if (ph === "running" || ph === "settled") await this.refresh();
  }

  /** Abort the task; false when nothing is left to abort (closed, or ended on its own). */
  async abort(): Promise<boolean> {
    const ev = abortEvent(this);
    if (!ev) return false;
    await this.dispatch(ev);
    await this.chain;
    return true;
  }

  /**
   * A follow-up for a completed or blocked task: durable first (its text and the respond record), then the next
   * cycle starts, at once when a slot is free, else when one frees (the cycle is queued meanwhile). Returns at once.
   */
  async respond(message: string, caps?: CapLimits, requestId?: string): Promise<{ cycle: number; queued: boolean }> {
    const { cycle, slot, slotFree } = nextCycle(this, message, caps);
    // The phase moves before result.md does: a harvest the move triggers must read "working", not a settled cycle.
    const started = this.dispatch({ type: "respond" });
    await followUpWritten(this, message, cycle, requestId);
    await started;
    // With the extension away (a daemon restart), the machine waits readinessTimeoutMs for it, then types the prompt.
    const begin = () => void this.dispatch({ type: "slot_granted" }).then(() => this.refresh());
    if (slotFree) {
      await slot;
      begin();
    } else void slot.then(begin, (e: unknown) => void this.dispatch(slotRefused(e)));
    await this.refresh();
    return { cycle, queued: !slotFree };
  }

  async close(closePane: boolean): Promise<AgentResult> {
    const ev = closeEvent(this, closePane);
    if (ev) await this.dispatch(ev);
    await this.chain;
    return this.result!;
  }

  /** Steer the cycle in flight: the text durable, then the machine's steer, then pi's answer awaited a while. */
  async steer(message: string): Promise<SteerReply> {
    const s = await writeSteer(this, message);
    if (s === "again") return this.steer(message);
    if ("reply" in s) return s.reply;
    const done = this.dispatch(s.event);
    const accepted = this.state.lastSteer === s.n; // the phase moves synchronously: taken as a steer, or moot
    await done;
    return steerFate(this, s, accepted, message);
  }

  /** A recovered cycle that cannot finish: the child is gone. */
  markGone(): Promise<void> {
    this.runtimeState = "missing";
    this.childEnded = true;
    return this.dispatch({ type: "runtime_gone", how: "gone" });
  }

  /** A recovery's steps, in order, each awaited (a `feedWhen` event is fed when it comes, not awaited). */
  async restore(steps: RecoveryStep[]): Promise<void> {
    for (const s of steps) {
      if ("feed" in s) await this.dispatch(s.feed);
      else if ("feedWhen" in s) void s.feedWhen().then((ev) => this.dispatch(ev));
      else
        switch (s.do) {
          case "resume":
            await this.resume();
            break;
          case "refresh":
            await this.refresh();
            break;
          case "hold_slot":
            try {
              void this.ports.slot.acquire().catch(() => undefined);
            } catch {
              /* queue full: the cycle runs anyway */
            }
            break;
          case "watch_runtime":
            this.watchRuntime(s.runtime);
            break;
          case "child_ended":
            this.childEnded = true;
            break;
          case "set_prompt":
            this.prompt = s.prompt;
            break;
          case "mark_gone":
            await this.markGone();
            break;
          case "announce_settled":
            // The outbox record follows the settle's records by timing only, so a power cut can keep the result and
            // lose the record: the delivery service queues the cycle again unless the outbox has it.
            if (!this.result) await this.refresh();
            if (this.result) this.notify(this.result, { settled: true, recovered: true });
            break;
          case "start":
            void this.run(this.ports.slot.acquire());
            break;
          case "wait_chain":
            await this.chain;
            break;
        }
    }
  }

  // ---- watches ----

  startWatching(): void {
    if (this.files) return;
    const { rec } = this;
    this.files = new TaskFiles({
      taskDir: this.ports.store.taskPaths(rec.taskId).dir,
      sessionPath: rec.sessionPath,
      resultPath: rec.resultPath,
      onChange: (what) => this.feed(onFiles(this, what)),
      clock: this.ports.clock,
    });
    this.files.start();
  }

  stopWatching(): void {
    this.unwatchRuntime();
    void this.files?.stop();
    for (const kind of [...this.timers.keys()]) this.cancelTimer(kind);
  }

  /** Daemon stop: the watches and every timer end (a deferred snapshot is flushed by the caller). */
  stop(): void {
    this.setupRun?.abort();
    this.stopWatching();
    for (const h of this.own) this.ports.clock.clearTimer(h);
    this.own.clear();
  }

  async resume(): Promise<void> {
    this.startWatching();
    await this.files!.readSession();
    await this.files!.readResult();
    this.promptSentAt = this.rec.timing.promptedAt ?? 0;
  }

  watchRuntime(runtime: Runtime): void {
    const handle = this.rec.handle;
    if (!handle) return;
    this.unwatchRuntime();
    // An event is about the handle it was watched for: a parked child's old pane may report its exit after respond
    // launched a new child, and that must not end the new cycle.
    const ofThisHandle = (e: RuntimeEvent): void => {
      if (this.rec.handle === handle) this.feed(onRuntime(this, e));
    };
    if (runtime.watch) {
      this.unwatch = runtime.watch(handle, ofThisHandle);
      return;
    }
    // A runtime that cannot tell: asked once a second, through the clock port.
    let watching = true;
    const poll = () =>
      this.later(1000, () => {
        if (watching)
          void runtime.isAlive(handle).then((alive) => (alive ? poll() : watching && ofThisHandle({ type: "gone" })));
      });
    poll();
    this.unwatch = () => void (watching = false);
  }

  unwatchRuntime(): void {
    this.unwatch?.();
    delete this.unwatch;
  }
}

export type { Live };
