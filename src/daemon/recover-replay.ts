// The journal (events.jsonl) replayed: what happened to a task beyond its last task.json, and the pre-launch facts
// (worktree, baseline) put back into a record that predates them. task.json is rewritten only when a status is
// harvested, so the journal is what says what was in flight at a crash.
import { parseSettleReason, type SettleReason } from "../core/task-cycle.js";
import type { RuntimeHandle } from "../runtime/types.js";
import type { TaskEvent } from "../store/task-store.js";
import { gitMaybe } from "./git-port.js";
import type { TaskRecord } from "./record.js";

/** What the journal says happened to a task, beyond its last task.json. */
export interface Replay {
  /** The last launched handle (task.json may predate it). */
  handle?: RuntimeHandle;
  /** Cycle → when its prompt went out (prompt_sent: journaled just before the push or the typing). */
  prompted: Map<number, number>;
  /** Cycles whose prompt the child confirmed (prompt_accepted), or that were typed into the runtime. */
  accepted: Set<number>;
  /** Highest cycle the journal knows of (respond / prompt_sent; a relayed task's remote_cycle). */
  cycle: number;
  /** Cycles whose settle was journaled (harvest may not have run). */
  settling: Set<number>;
  /** Each journaled settle's reason: the verdict a restarted daemon carries out, never re-judged from evidence. */
  settleReasons: Map<number, SettleReason>;
  /** What each settle record pinned about the disk (a record from an older daemon pins nothing: absent). */
  settleDisk: Map<number, { note?: string }>;
  /** Cycles whose settled status was journaled (harvested). */
  settled: Set<number>;
  interrupted?: { code?: string };
  closed?: { closePane: boolean };
  worktree?: string;
  worktreeBranch?: string;
  /** The baseline record; its dirty list when it was short enough to journal, else only the count. */
  baseline?: { head: string | null; dirty: number; dirtyAtStart?: string[] };
  /** The worktree setup's commit (the baseline) and its parent, when setup changed what git sees. */
  setupCommit?: { from: string; commit: string };
  /** The process group of a worktree setup that started and has no record of its end (the daemon died during it). */
  setupGroup?: number;
  /** Launch attempts that stalled (the next launch is attempt stalled + 1). */
  stalled: number;
  /** The last launch stalled and no launch was journaled after it: any handle task.json holds is that dead one. */
  handleStalled?: boolean;
  /** The last launched child was parked (ended) and no launch was journaled after it: its handle is a dead one. */
  handleParked?: boolean;
  /** Steers journaled (`steered`) that pi neither took nor missed, in order; and the highest steer number used. */
  steers: { cycle: number; n: number }[];
  lastSteer: number;
}

export function replayJournal(events: TaskEvent[]): Replay {
  const r: Replay = {
    prompted: new Map(),
    accepted: new Set(),
    cycle: 1,
    settling: new Set(),
    settleReasons: new Map(),
    settleDisk: new Map(),
    settled: new Set(),
    stalled: 0,
    steers: [],
    lastSteer: 0,
  };
  for (const e of events) {
    const cycle = typeof e.cycle === "number" ? e.cycle : undefined;
    if (e.type === "setup" || e.type === "launched") delete r.setupGroup; // that setup ended (its record says how)
    if (e.type === "launched" && e.handle) {
      r.handle = e.handle as RuntimeHandle;
      delete r.handleStalled;
      delete r.handleParked;
    } else if (e.type === "worktree" && typeof e.path === "string") {
      r.worktree = e.path;
      if (typeof e.branch === "string") r.worktreeBranch = e.branch;
    } else if (e.type === "baseline" && (typeof e.head === "string" || e.head === null)) {
      const list =
        Array.isArray(e.dirtyAtStart) && e.dirtyAtStart.every((x) => typeof x === "string")
          ? (e.dirtyAtStart as string[])
          : undefined;
      r.baseline = {
        head: e.head,
        dirty: typeof e.dirty === "number" ? e.dirty : 0,
        ...(list ? { dirtyAtStart: list } : {}),
      };
    } else if (e.type === "setup_started" && Number.isSafeInteger(e.pgid) && Number(e.pgid) > 1) {
      r.setupGroup = Number(e.pgid);
    } else if (e.type === "setup" && typeof e.from === "string" && typeof e.commit === "string") {
      r.setupCommit = { from: e.from, commit: e.commit };
    } else if (e.type === "stalled") {
      r.stalled++;
      delete r.handle; // that launch's child was closed; a later launch may not have been journaled
      r.handleStalled = true;
    } else if (e.type === "prompt_sent" && cycle !== undefined) {
      if (!r.prompted.has(cycle)) r.prompted.set(cycle, typeof e.ts === "number" ? e.ts : Date.now());
      r.cycle = Math.max(r.cycle, cycle);
      // Typed into a runtime: nothing would recognise it a second time, so it counts as taken.
      if (e.via === "runtime") r.accepted.add(cycle);
    } else if (e.type === "prompt_accepted" && cycle !== undefined) r.accepted.add(cycle);
    else if (e.type === "respond" && cycle !== undefined) {
      // Journaled before the follow-up goes out: a respond without a prompt_sent never reached the child.
      r.cycle = Math.max(r.cycle, cycle);
    } else if (e.type === "remote_cycle" && cycle !== undefined) {
      // A relayed follow-up's cycle started here, journaled before its record is rewritten (unsynced).
      r.cycle = Math.max(r.cycle, cycle);
    } else if (e.type === "parked") {
      delete r.handle;
      r.handleParked = true;
    } else if (e.type === "settle" && cycle !== undefined) {
      r.settling.add(cycle);
      const reason = parseSettleReason(e.reason);
      if (reason) {
        r.settleReasons.set(cycle, reason);
        // `disk`: "ok", or the note naming a full disk (records of older daemons carry neither).
        if (typeof e.disk === "string") r.settleDisk.set(cycle, e.disk === "ok" ? {} : { note: e.disk });
      }
    } else if (e.type === "status" && e.settled === true && cycle !== undefined) r.settled.add(cycle);
    else if (e.type === "steered" && cycle !== undefined && typeof e.n === "number") {
      r.steers.push({ cycle, n: e.n });
      r.lastSteer = Math.max(r.lastSteer, e.n);
    } else if ((e.type === "steer_taken" || e.type === "steer_missed") && typeof e.n === "number")
      r.steers = r.steers.filter((s) => !(s.cycle === cycle && s.n === e.n));
    else if (e.type === "interrupted") r.interrupted = typeof e.code === "string" ? { code: e.code } : {};
    else if (e.type === "closed") r.closed = { closePane: e.closePane === true };
  }
  return r;
}

/**
 * task.json is rewritten only at a harvest, so for a child launched just before the crash it may predate the
 * worktree and baseline the pipeline journaled before the launch; without them the harvest would diff nothing.
 */
export async function restorePrelaunch(rec: TaskRecord, j: Replay): Promise<void> {
  const needWorktree = !rec.worktree && j.worktree !== undefined && j.worktreeBranch !== undefined;
  const needBaseline = !rec.baseline && j.baseline !== undefined;
  if (!rec.setupCommit && j.setupCommit) rec.setupCommit = j.setupCommit; // never landed with the child's work
  if (!needWorktree && !needBaseline) return; // the common case: no git process per recovered task
  const repo = (await gitMaybe(rec.cwd, ["rev-parse", "--show-toplevel"]))?.trim();
  if (needWorktree && repo && j.worktree && j.worktreeBranch) {
    rec.worktree = { path: j.worktree, branch: j.worktreeBranch, repo, base: "HEAD" };
    rec.workdir = j.worktree;
  }
  if (needBaseline && j.baseline) {
    // An isolated worktree starts clean; a shared cwd's dirty list is journaled unless it was very long.
    const known = j.baseline.dirtyAtStart;
    const warnings =
      j.baseline.dirty === 0 || !repo || known
        ? []
        : [
            `the ${j.baseline.dirty} files dirty before the task are not known after the daemon's crash: the diff may include them`,
          ];
    rec.baseline = { isRepo: repo !== undefined, head: j.baseline.head, dirtyAtStart: known ?? [], warnings };
    if (warnings.length) rec.warnings = [...(rec.warnings ?? []), ...warnings];
  }
}
