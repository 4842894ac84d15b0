// Derivation and settle: evidence → one AgentResult per refresh (serialized per task, at most one waiting), the
// settled harvest with the baseline diff, and why a reportless cycle failed.
import { sessionReport, withReportAsFinalText, type CrewReport } from "../core/crew-cycle.js";
import { statfs } from "node:fs/promises";
import { isSettledStatus } from "../core/derive.js";
import { closedResult } from "../core/agent-result.js";
import { isInFlight, promptPending, settleVerdict, type SettleReason } from "../core/task-cycle.js";
import type { AgentResult, CapReached, HerdrStatus } from "../core/types.js";
import { assemble, diffFor } from "./harvest.js";
import { settleChecks } from "./land-methods.js";
import { deferSnapshot, persist, snapshotWritten } from "./persist.js";
import type { Live } from "./live.js";
import type { Supervisor } from "./supervisor-types.js";

/** The session moved after the prompt was sent (a second of slack for the child's clock). */
export function freshSession(live: Live): boolean {
  const f = live.files?.facts();
  const since = live.promptSentAt ?? live.rec.timing.promptedAt;
  if (!f || since === undefined) return false;
  return (f.lastTimestampMs ?? 0) >= since - 1000 || (live.files?.sessionMtimeMs ?? 0) >= since;
}

function runtimeRaw(live: Live): HerdrStatus | "missing" {
  if (live.runtimeState === "missing") return "missing";
  if (capOf(live)) return "blocked"; // paused at a spend cap: the settle reason fixes blocked
  if (live.runtimeState === "blocked") return "blocked";
  return isInFlight(live.state.phase) || live.state.phase.name === "queued" ? "working" : "idle";
}

/** The spend cap the current cycle settled on (its settle reason), if it did. */
function capOf(live: Live): CapReached | undefined {
  const p = live.state.phase;
  if (p.name !== "settled" || p.reason.kind !== "cap" || p.cycle !== live.rec.cycle) return undefined;
  return { cap: p.reason.cap, limit: p.reason.limit, spent: p.reason.spent, step: p.reason.step };
}

/** The validated crew_report of the current cycle: as the child sent it, else read back from its session. */
export function reportOf(live: Live): CrewReport | undefined {
  const r = live.report;
  if (r && r.cycle === live.rec.cycle)
    return r.needs !== undefined
      ? { outcome: r.outcome, report: r.report, needs: r.needs }
      : { outcome: r.outcome, report: r.report };
  return sessionReport(live.files?.facts());
}

/** Rebuild the live result (no diff); serialized per task. */
export function refresh(
  sup: Supervisor,
  live: Live,
  opts: { settled?: boolean; failed?: boolean } = {},
): Promise<void> {
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
    return harvest(sup, live, next);
  });
  live.chain = run.catch((e: unknown) =>
    sup.deps.log.error({ taskId: live.rec.taskId, err: String(e) }, "harvest failed"),
  );
  next.done = live.chain;
  return live.chain;
}

async function harvest(sup: Supervisor, live: Live, opts: { settled?: boolean; failed?: boolean }): Promise<void> {
  const { rec } = live;
  // A settled cycle is final: only its own settled harvest (or a close) writes its result.
  if (live.state.phase.name === "settled" && !opts.settled && live.result) return;
  const { store } = sup.deps;
  if (
    opts.settled &&
    rec.error &&
    (rec.error.code === "PANE_GONE" || rec.error.code === "AGENT_ERROR") &&
    !rec.error.message.includes("is full (")
  ) {
    const note = await diskFullNote(live, sup.deps.home);
    if (note) {
      rec.error = { code: rec.error.code, message: `${rec.error.message}; ${note}` };
      rec.warnings = [...(rec.warnings ?? []), note];
    }
  }
  if (opts.settled && rec.workdir) {
    const d = await diffFor(rec, store.taskPaths(rec.taskId).diffPatch, sup.deps.config().patchCapBytes);
    if (d.diff) live.diff = d.diff;
    if (d.warning)
      rec.warnings = [...(rec.warnings ?? []).filter((w) => !w.startsWith("diff not harvested")), d.warning];
  }
  const keepsSettled = closesSettled(live);
  let result = keepsSettled ? closedResult(live.result!) : assembleNow(live, opts);
  // A cycle that settles completed: its checks run in the worktree (the child is idle, the diff is taken already)
  // and the work's landability is measured, then the result is built again, so the settled result and the owner's
  // delivery carry the receipts (src/daemon/land-methods.ts).
  if (opts.settled && result.status === "completed" && (rec.checks?.length || rec.worktree)) {
    await settleChecks(sup, live);
    result = assembleNow(live, opts);
  }
  const changed = result.status !== live.result?.status || opts.settled === true;
  live.result = result;
  if (opts.settled) live.settledCycle = rec.cycle;
  rec.status = result.status;
  rec.updatedAt = Date.now();
  // The session offset the record pins is the one its result was built from: a close that keeps the settled result
  // keeps the settled offset (lines the ended child wrote after it are not in that result).
  if (live.files && !keepsSettled) rec.sessionOffset = live.files.sessionOffset;
  // Owners hear first; then the record. fsync only what an owner acts on: a settled cycle, or a status that waits
  // for an answer (blocked). A status while a cycle runs (starting, running, working) flips with every tool call of
  // every task and is derived again from the session after a crash or a power cut, so it is written unsynced: with
  // 1,000 tasks streaming those fsyncs were hundreds a second, and start-up fsynced one per recovered task.
  if (changed) sup.notifyStatus(live, result, { settled: opts.settled === true });
  const sync = changed && (opts.settled === true || isSettledStatus(result.status));
  if (!changed && !live.rec.lifecycle) {
    // Same status, newer details (a session line): owners read it from memory (task.get, pushes), so the record
    // on disk is rewritten at most every SNAPSHOT_EVERY_MS per task instead of once per line; a burst of 100
    // tasks streaming lines otherwise fills the thread pool with writes that the settle path then waits behind.
    deferSnapshot(sup, live);
    return;
  }
  snapshotWritten(live);
  const ev = changed
    ? {
        type: "status",
        status: result.status,
        cycle: rec.cycle,
        ...(opts.settled ? { settled: true } : {}),
        sessionOffset: rec.sessionOffset,
      }
    : undefined;
  await persist(sup, live, result, sync, ev);
}

/** The evidence as it is now → the live result (the settled harvest's too). */
function assembleNow(live: Live, opts: { settled?: boolean; failed?: boolean }): AgentResult {
  const { rec } = live;
  const sessionFacts = live.files?.facts();
  const facts = sessionFacts && withReportAsFinalText(sessionFacts);
  const p = live.state.phase;
  return assemble({
    rec,
    runtime: runtimeRaw(live),
    ...(rec.runtime === "herdr" && live.runtimeState && live.runtimeState !== "missing"
      ? { herdrStatus: live.runtimeState }
      : {}),
    ...(facts ? { facts } : {}),
    ...(live.lastStopReason ? { eventStopReason: live.lastStopReason } : {}),
    ...(live.files?.result ? { resultMd: live.files.result } : {}),
    sessionChangedAfterPrompt: freshSession(live),
    ...(live.diff ? { diff: live.diff } : {}),
    ...(capOf(live) ? { cap: capOf(live)! } : {}),
    settled: opts.settled === true,
    ...(opts.failed ? { failed: true } : {}),
    // The first cycle runs once pi started its run (agent_start, or the session moved after the prompt): a prompt
    // handed to pi may still be refused (no API key), and no `running` is pushed for a prompt pi never ran.
    awaitingFirstPrompt:
      p.name !== "closed" &&
      p.cycle === 1 &&
      (p.name === "queued" ||
        promptPending(p) ||
        (p.name === "running" && (live.agentStartedCycle ?? 0) < 1 && !freshSession(live))),
  });
}

/** The task closed after its current cycle settled: the closed result is that settled result (late files unread). */
function closesSettled(live: Live): boolean {
  return (
    live.state.phase.name === "closed" &&
    live.settledCycle === live.rec.cycle &&
    live.result !== undefined &&
    isSettledStatus(live.result.status)
  );
}

/**
 * A child that died or failed while its disk was full: say so, since pi's own error (if any) rarely does. Checks the
 * task dir (the session is written there) and the workdir. Below 64 KiB free counts as full.
 */
async function diskFullNote(live: Live, home: string): Promise<string | undefined> {
  for (const dir of [home, live.rec.workdir]) {
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
 * interrupt, a prompt pi did not run fails, ...), else the evidence decides. A failed ending ends the child too.
 */
export async function settleHarvest(sup: Supervisor, live: Live, reason: SettleReason): Promise<void> {
  const { rec } = live;
  rec.timing.settledAt ??= Date.now();
  const verdict = settleVerdict(reason, `the session (${rec.sessionPath})`);
  if (verdict.error && (!rec.error || verdict.replacesError)) rec.error = verdict.error;
  else if (!rec.error && !rec.lifecycle) {
    const failure = failureOf(live, reason);
    if (failure) rec.error = failure;
  }
  if (verdict.status === "failed")
    rec.error ??= {
      code: "AGENT_ERROR",
      message: `the cycle failed (${reason.kind}); inspect the session (${rec.sessionPath})`,
    };
  // The verdict fixes the status where it can: a child the machine judged gone reads as gone, also after a restart
  // (a fresh daemon has no runtime event of its own to say so).
  if (verdict.status === "gone") live.runtimeState = "missing";
  await refresh(sup, live, { settled: true, ...(verdict.status === "failed" ? { failed: true } : {}) });
  const status = live.result?.status;
  if (status === "failed" || status === "interrupted") await sup.endChild(live, status);
}

/** Why a cycle that settles without a report failed, so the owner's error delivery and the card can say so. */
function failureOf(
  live: Live,
  reason: SettleReason,
): { code: "AGENT_ERROR" | "PANE_GONE"; message: string } | undefined {
  if (reportOf(live)) return undefined;
  const f = live.files?.facts();
  const where = `inspect the session (${live.rec.sessionPath})`;
  if ((f?.lastStopReason ?? live.lastStopReason) === "error") {
    const msg = f?.lastErrorMessage ?? live.lastErrorMessage ?? "no error message";
    return {
      code: "AGENT_ERROR",
      message: `the child's model call failed: ${msg}; ${where}, check the model and provider, then respond or spawn again`,
    };
  }
  if (reason.kind === "runtime_gone") {
    const how = reason.how === "away" ? "gone while the daemon was away" : `runtime ${reason.how}`;
    return {
      code: "PANE_GONE",
      message: `the child's process or pane ended before its cycle finished (${how}); ${where}, then spawn again`,
    };
  }
  return undefined;
}
