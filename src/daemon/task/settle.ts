// Derivation and settle: evidence → one AgentResult per refresh (serialized per task, at most one waiting), built by
// core's resultFromPin from what the harvest read (its pin); the settled harvest with the baseline diff, whose pin
// (result.md's copy and digest, the report, pi's stop reason, the diff digest, the warnings) is journaled in its
// status record so the result can be rebuilt from the task dir alone (`dsh-herdr verify`).
import { createHash } from "node:crypto";
import { readFile, statfs } from "node:fs/promises";
import { sessionReport, type CrewReport } from "../../core/crew/crew-cycle.js";
import { isSettledStatus, recordStatus } from "../../core/result/derive.js";
import { closedResult } from "../../core/result/agent-result.js";
import { parseYaml } from "../../core/result/result-md.js";
import {
  pinnedResultFile,
  resultFromPin,
  resultMdOf,
  type HarvestPin,
  type PinnedEvidence,
} from "../../core/lifecycle/harvest-pin.js";
import {
  closedAfterSettle,
  isInFlight,
  lifecycleOf,
  promptPending,
  settleError,
  settleVerdict,
  type CycleEvent,
  type SettleReason,
} from "../../core/lifecycle/task-cycle.js";
import type { AgentResult, HerdrStatus } from "../../core/types.js";
import { agentAsked, diffFor, taskFields, validateAgentResult } from "./harvest.js";
import { settleChecks } from "./settle-checks.js";
import { deferSnapshot, persist, snapshotWritten, type PersistPort } from "./persist.js";
import { landFieldsOf } from "./record.js";
import type { Runner, TaskPort } from "./runner-types.js";

/** The session moved after the prompt was sent (a second of slack for the child's clock). */
export function freshSession(r: Pick<Runner, "files" | "promptSentAt" | "rec">): boolean {
  const f = r.files?.facts();
  const since = r.promptSentAt ?? r.rec.timing.promptedAt;
  if (!f || since === undefined) return false;
  return (f.lastTimestampMs ?? 0) >= since - 1000 || (r.files?.sessionMtimeMs ?? 0) >= since;
}

function runtimeRaw(r: Pick<Runner, "runtimeState" | "state">): HerdrStatus | "missing" {
  if (r.runtimeState === "missing") return "missing";
  if (r.runtimeState === "blocked") return "blocked";
  return isInFlight(r.state.phase) || r.state.phase.name === "queued" ? "working" : "idle";
}

/** What the cycle's report is read from: the one the child sent, else its session. */
type ReportPort = Pick<Runner, "report" | "rec" | "files">;

/** The validated crew_report of the current cycle: as the child sent it, else read back from its session. */
export function reportOf(r: ReportPort): CrewReport | undefined {
  const rep = r.report;
  if (rep && rep.cycle === r.rec.cycle)
    return rep.needs !== undefined
      ? { outcome: rep.outcome, report: rep.report, needs: rep.needs }
      : { outcome: rep.outcome, report: rep.report };
  return sessionReport(r.files?.facts());
}

export type HarvestOpts = { settled?: boolean; reason?: SettleReason };

/** What serializing a task's harvests touches: its chain and the one harvest waiting on it. */
type RefreshPort = TaskPort<"queued" | "onChain" | "rec", "log">;

/**
 * Run `harvest` (the runner's: build, tell, record) on the task's chain: one at a time per task, at most one waiting.
 */
export function refresh(
  r: RefreshPort,
  opts: HarvestOpts,
  harvest: (opts: HarvestOpts) => Promise<void>,
): Promise<void> {
  // At most one refresh waits per task: a burst of session lines costs one harvest, not one per line.
  const waiting = r.queued;
  if (waiting?.done) {
    if (opts.settled) waiting.settled = true;
    if (opts.reason) waiting.reason = opts.reason;
    return waiting.done;
  }
  const next: NonNullable<Runner["queued"]> = { ...opts };
  r.queued = next;
  const done = r
    .onChain(() => {
      if (r.queued === next) delete r.queued;
      return harvest(next);
    })
    .catch((e: unknown) => r.ports.log.error({ taskId: r.rec.taskId, err: String(e) }, "harvest failed"));
  next.done = done;
  return done;
}

/** What a harvest reads of its task: the evidence, the phase, the record it updates, the settle's checks. */
export type HarvestPort = TaskPort<
  | "rec"
  | "state"
  | "result"
  | "journal"
  | "settleDisk"
  | "diff"
  | "settledCycle"
  | "files"
  | "report"
  | "promptSentAt"
  | "agentStartedCycle"
  | "runtimeState"
  | "lastStopReason"
  | "lastErrorMessage",
  "clock" | "config" | "env" | "git" | "log" | "store" | "tasks"
>;

/** A harvest built, for the runner: the owners hear its result, the machine its settle, then recordHarvest writes it. */
export interface Harvest {
  result: AgentResult;
  /** The status moved, or the cycle settled: the owners hear it and the record is journaled. */
  changed: boolean;
  settling: boolean;
  /** A settled harvest's event: the machine keeps the settled status (what respond and abort are asked against). */
  harvested?: Extract<CycleEvent, { type: "harvested" }>;
  /** A final pin (a settled harvest, the close of a running cycle): it goes into the journal with the status. */
  pinned?: { pin: HarvestPin; raw?: { text: string } | { refused: string } };
}

/**
 * Build the task's result from what it holds now (a settled harvest: with the diff, the disk note and the checks)
 * and set it on the runner and the record; nothing when a settled cycle's result stands.
 */
export async function harvest(r: HarvestPort, opts: HarvestOpts): Promise<Harvest | undefined> {
  const { rec } = r;
  // A settled cycle is final: only its own settled harvest (or a close) writes its result.
  if (r.state.phase.name === "settled" && !opts.settled && r.result) return undefined;
  const { store } = r.ports;
  const settling = opts.settled === true;
  let diskNote: string | undefined;
  if (settling && opts.reason) {
    // A child that died or failed while its disk was full: say so, since pi's own error (if any) rarely does. The
    // settle record pinned it when it was written (settleDiskNote); else (a settle journaled by an older daemon) the
    // disk is asked now.
    const pinned = r.settleDisk?.cycle === rec.cycle ? r.settleDisk : undefined;
    diskNote = pinned ? pinned.note : await settleDiskNote(r, opts.reason);
    if (diskNote && !rec.warnings?.includes(diskNote)) rec.warnings = [...(rec.warnings ?? []), diskNote];
  }
  if (settling && rec.workdir) {
    const d = await diffFor(r.ports.git, rec, store.taskPaths(rec.taskId).diffPatch, r.ports.config().patchCapBytes);
    if (d.diff) r.diff = d.diff;
    if (d.warning)
      rec.warnings = [...(rec.warnings ?? []).filter((w) => !w.startsWith("diff not harvested")), d.warning];
  }
  const keepsSettled = closesSettled(r);
  // A settled harvest and the close of a running cycle are final: their pin goes into the journal.
  const pinned = !keepsSettled && (settling || r.state.phase.name === "closed");
  const build = () => {
    const b = pinNow(r, opts, diskNote);
    const result = resultFromPin(taskFields(rec), b.pin, b.ev);
    validateAgentResult(result);
    return { ...b, result };
  };
  let built = keepsSettled ? undefined : build();
  let result = built?.result ?? closedResult(r.result!);
  // A cycle that settles completed: its checks run in the worktree (the child is idle, the diff is taken already)
  // and the work's landability is measured, then the result is built again, so the settled result and the owner's
  // delivery carry the receipts (src/daemon/methods/land-methods.ts).
  if (settling && result.status === "completed" && (rec.checks?.length || rec.worktree)) {
    await settleChecks(r);
    built = build();
    result = built.result;
  }
  if (settling) {
    // The error the settle judged is the record's (task.json), beside the result it went into.
    if (result.error) rec.error = result.error;
    else delete rec.error;
  }
  const changed = result.status !== r.result?.status || settling;
  r.result = result;
  if (settling) r.settledCycle = rec.cycle;
  recordStatus(rec, { kind: "result", status: result.status });
  rec.updatedAt = r.ports.clock.now();
  // The session offset the record pins is the one its result was built from: a close that keeps the settled result
  // keeps the settled offset (lines the ended child wrote after it are not in that result).
  if (r.files && !keepsSettled) rec.sessionOffset = r.files.sessionOffset;
  return {
    result,
    changed,
    settling,
    ...(settling ? { harvested: { type: "harvested" as const, cycle: rec.cycle, status: result.status } } : {}),
    ...(pinned && built ? { pinned: { pin: built.pin, ...(built.raw ? { raw: built.raw } : {}) } } : {}),
  };
}

/**
 * Write a harvest's record, after the owners and the machine heard it. fsync only what an owner acts on: a settled
 * cycle, or a status that waits for an answer (blocked). A status while a cycle runs (starting, running, working)
 * flips with every tool call of every task and is derived again from the session after a crash or a power cut, so
 * it is written unsynced: with 1,000 tasks streaming those fsyncs were hundreds a second, and start-up fsynced one
 * per recovered task.
 */
export async function recordHarvest(r: PersistPort, h: Harvest): Promise<void> {
  const { rec } = r;
  const { result, changed, settling, pinned } = h;
  const sync = changed && (settling || isSettledStatus(result.status));
  if (!changed && !lifecycleOf(r.state.phase)) {
    // Same status, newer details (a session line): owners read it from memory (task.get, pushes), so the record
    // on disk is rewritten at most every SNAPSHOT_EVERY_MS per task instead of once per line; a burst of 100
    // tasks streaming lines otherwise fills the thread pool with writes that the settle path then waits behind.
    deferSnapshot(r);
    return;
  }
  snapshotWritten(r);
  // The digests and result.md's copy go with the record (after the owners heard: they are not in the result).
  const copy = pinned ? await digest(r, pinned.pin, pinned.raw) : undefined;
  const ev = changed
    ? {
        type: "status" as const,
        status: result.status,
        cycle: rec.cycle,
        ...(settling ? { settled: true } : {}),
        sessionOffset: rec.sessionOffset,
        ...(pinned ? { pin: pinned.pin } : {}),
      }
    : undefined;
  await persist(r, result, sync, ev, copy ? [copy] : undefined);
}

/** What a settle's error is judged from, as the runner holds it now. */
function evidenceOf(r: ReportPort & Pick<Runner, "lastStopReason" | "lastErrorMessage">) {
  const f = r.files?.facts();
  const stopReason = f?.lastStopReason ?? r.lastStopReason;
  const errorMessage = f?.lastErrorMessage ?? r.lastErrorMessage;
  return {
    hasReport: reportOf(r) !== undefined,
    ...(stopReason !== undefined ? { stopReason } : {}),
    ...(errorMessage !== undefined ? { errorMessage } : {}),
    sessionPath: r.rec.sessionPath,
  };
}

/** The harvest's inputs as the runner holds them now: the pin, and the evidence it stands for. */
function pinNow(
  r: Pick<
    Runner,
    | "rec"
    | "state"
    | "files"
    | "report"
    | "promptSentAt"
    | "agentStartedCycle"
    | "runtimeState"
    | "lastStopReason"
    | "lastErrorMessage"
    | "diff"
  >,
  opts: HarvestOpts,
  diskNote: string | undefined,
): { pin: HarvestPin; ev: PinnedEvidence; raw?: { text: string } | { refused: string } } {
  const { rec } = r;
  const p = r.state.phase;
  const settled = opts.settled === true;
  const facts = r.files?.facts();
  const failed = settled && opts.reason !== undefined && settleVerdict(opts.reason).status === "failed";
  // The first cycle runs once pi started its run (agent_start, or the session moved after the prompt): a prompt
  // handed to pi may still be refused (no API key), and no `running` is pushed for a prompt pi never ran.
  const awaitingFirstPrompt =
    p.name !== "closed" &&
    p.cycle === 1 &&
    (p.name === "queued" ||
      promptPending(p) ||
      (p.name === "running" && (r.agentStartedCycle ?? 0) < 1 && !freshSession(r)));
  const lifecycle = lifecycleOf(p) ?? (awaitingFirstPrompt && !failed && !settled ? "starting" : undefined);
  const report = reportOf(r);
  const raw = r.files?.resultRaw;
  const pin: HarvestPin = {
    agent: agentAsked(rec),
    timing: { ...rec.timing },
    runtime: runtimeRaw(r),
    ...(rec.runtime === "herdr" && r.runtimeState && r.runtimeState !== "missing"
      ? { herdrStatus: r.runtimeState }
      : {}),
    ...(lifecycle ? { lifecycle } : {}),
    settled,
    fresh: freshSession(r),
    ...(r.lastStopReason !== undefined ? { stopReason: r.lastStopReason } : {}),
    ...(r.lastErrorMessage !== undefined ? { errorText: r.lastErrorMessage } : {}),
    ...(report ? { report } : {}),
    ...(r.diff ? { diff: r.diff } : {}),
    ...(diskNote ? { diskNote } : {}),
    ...(rec.error && !(settled && opts.reason) ? { error: rec.error } : {}),
    ...(rec.warnings?.length ? { warnings: [...rec.warnings] } : {}),
    ...(facts?.restarts ? { sessionRestarts: facts.restarts } : {}),
    ...(facts ? { session: true as const } : {}),
  };
  const ev: PinnedEvidence = {
    ...(facts ? { session: facts } : {}),
    ...(raw ? { resultMd: r.files!.result ?? resultMdOf(raw, parseYaml) } : {}),
    ...(settled && opts.reason ? { reason: opts.reason } : {}),
    ...landFieldsOf(rec),
  };
  return { pin, ev, ...(raw ? { raw } : {}) };
}

const sha256 = (data: string | Buffer) => createHash("sha256").update(data).digest("hex");

/** A pin that goes into the journal: result.md's text copied beside it (named and hashed), diff.patch's digest. */
async function digest(
  r: TaskPort<"rec", "store">,
  pin: HarvestPin,
  raw: { text: string } | { refused: string } | undefined,
): Promise<{ name: string; data: string } | undefined> {
  const patch = await readFile(r.ports.store.taskPaths(r.rec.taskId).diffPatch).catch(() => undefined);
  if (patch) pin.diffSha256 = sha256(patch);
  if (!raw) return undefined;
  if ("refused" in raw) {
    pin.resultMd = { refused: raw.refused };
    return undefined;
  }
  const name = pinnedResultFile(r.rec.cycle);
  pin.resultMd = { file: name, sha256: sha256(raw.text) };
  return { name, data: raw.text };
}

/**
 * The machine closed the task after its cycle settled (closedAfterSettle): the closed result is that settled result,
 * when the runner holds it (a restarted daemon holds it once result.json is that cycle's harvest).
 */
function closesSettled(r: Pick<Runner, "state" | "settledCycle" | "rec" | "result">): boolean {
  return (
    closedAfterSettle(r.state.phase) &&
    r.settledCycle === r.rec.cycle &&
    r.result !== undefined &&
    isSettledStatus(r.result.status)
  );
}

/**
 * The disk note a settle with this reason pins in its record: asked of the disk only when the ending's error would
 * be PANE_GONE or AGENT_ERROR (the endings a full disk causes).
 */
/** What a settle's disk note is judged from: the evidence, and the directories on disk. */
type DiskNotePort = ReportPort & TaskPort<"lastStopReason" | "lastErrorMessage", "env">;

export async function settleDiskNote(r: DiskNotePort, reason: SettleReason): Promise<string | undefined> {
  const code = settleError(reason, evidenceOf(r))?.code;
  return code === "PANE_GONE" || code === "AGENT_ERROR" ? diskFullNote(r) : undefined;
}

/**
 * The disk holding the task dir (the session is written there) or the workdir is full (below 64 KiB free): the note
 * a PANE_GONE or AGENT_ERROR ending then carries.
 */
async function diskFullNote(r: TaskPort<"rec", "env">): Promise<string | undefined> {
  for (const dir of [r.ports.env.home, r.rec.workdir]) {
    if (!dir) continue;
    const fs = await statfs(dir).catch(() => undefined);
    if (fs && fs.bavail * fs.bsize < 64 * 1024) {
      return `the disk holding ${dir} is full (${Math.floor((fs.bavail * fs.bsize) / 1024)} KiB free), so free space first`;
    }
  }
  return undefined;
}

/**
 * The settled harvest of a cycle the machine settled: the reason fixes the status where it can (timeout and abort
 * interrupt, a prompt pi did not run fails, ...), else the evidence decides; the error is judged in core
 * (settleError) from the pinned evidence. Whether the child ends is the machine's (harvested).
 */
export async function settleHarvest(
  r: TaskPort<"rec" | "runtimeState" | "refresh", "clock">,
  reason: SettleReason,
): Promise<void> {
  r.rec.timing.settledAt ??= r.ports.clock.now();
  // The verdict fixes the status where it can: a child the machine judged gone reads as gone, also after a restart
  // (a fresh daemon has no runtime event of its own to say so).
  if (settleVerdict(reason).status === "gone") r.runtimeState = "missing";
  await r.refresh({ settled: true, reason });
}

export type { AgentResult };
