// The journal (events.jsonl) replayed: what happened to a task beyond its last task.json, and the pre-launch facts
// (worktree, baseline) put back into a record that predates them. task.json is rewritten only when a status is
// harvested, so the journal is what says what was in flight at a crash.
import type { JournalRecord } from "../../core/lifecycle/journal-record.js";
import type { SettleReason } from "../../core/lifecycle/task-cycle.js";
import type { RuntimeHandle } from "../../runtime/types.js";
import { gitMaybe } from "../ports/git-port.js";
import type { TaskRecord } from "../task/record.js";

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

export function replayJournal(events: readonly JournalRecord[]): Replay {
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
    switch (e.type) {
      case "launched":
        delete r.setupGroup; // that setup ended (its record says how)
        if (e.handle) {
          r.handle = e.handle as RuntimeHandle;
          delete r.handleStalled;
          delete r.handleParked;
        }
        break;
      case "setup":
        delete r.setupGroup; // that setup ended (this record says how)
        if (e.from !== undefined && e.commit !== undefined) r.setupCommit = { from: e.from, commit: e.commit };
        break;
      case "worktree":
        r.worktree = e.path;
        if (e.branch !== undefined) r.worktreeBranch = e.branch;
        break;
      case "baseline":
        r.baseline = {
          head: e.head,
          dirty: e.dirty ?? 0,
          ...(e.dirtyAtStart ? { dirtyAtStart: e.dirtyAtStart } : {}),
        };
        break;
      case "setup_started":
        if (e.pgid > 1) r.setupGroup = e.pgid;
        break;
      case "stalled":
        r.stalled++;
        delete r.handle; // that launch's child was closed; a later launch may not have been journaled
        r.handleStalled = true;
        break;
      case "prompt_sent":
        if (!r.prompted.has(e.cycle)) r.prompted.set(e.cycle, e.ts ?? Date.now());
        r.cycle = Math.max(r.cycle, e.cycle);
        // Typed into a runtime: nothing would recognise it a second time, so it counts as taken.
        if (e.via === "runtime") r.accepted.add(e.cycle);
        break;
      case "prompt_accepted":
        r.accepted.add(e.cycle);
        break;
      case "respond":
        // Journaled before the follow-up goes out: a respond without a prompt_sent never reached the child.
        r.cycle = Math.max(r.cycle, e.cycle);
        break;
      case "remote_cycle":
        // A relayed follow-up's cycle started here, journaled before its record is rewritten (unsynced).
        r.cycle = Math.max(r.cycle, e.cycle);
        break;
      case "parked":
        delete r.handle;
        r.handleParked = true;
        break;
      case "settle":
        r.settling.add(e.cycle);
        if (e.reason) {
          r.settleReasons.set(e.cycle, e.reason);
          // `disk`: "ok", or the note naming a full disk (records of older daemons carry neither).
          if (e.disk !== undefined) r.settleDisk.set(e.cycle, e.disk === "ok" ? {} : { note: e.disk });
        }
        break;
      case "status":
        if (e.settled === true) r.settled.add(e.cycle);
        break;
      case "steered":
        r.steers.push({ cycle: e.cycle, n: e.n });
        r.lastSteer = Math.max(r.lastSteer, e.n);
        break;
      case "steer_taken":
      case "steer_missed":
        r.steers = r.steers.filter((s) => !(s.cycle === e.cycle && s.n === e.n));
        break;
      case "interrupted":
        r.interrupted = e.code !== undefined ? { code: e.code } : {};
        break;
      case "closed":
        r.closed = { closePane: e.closePane === true };
        break;
      // What recovery does not need: notes for people, and facts the record or other readers keep.
      case "created":
      case "admitted":
      case "setup_ended":
      case "prompt_failed":
      case "late_evidence":
      case "finalize_prompt":
      case "contract_error":
      case "report":
      case "runtime_gone":
      case "runtime_exited":
      case "checks":
      case "landability":
      case "siblings":
      case "landed":
      case "recovered":
      case "owner_moved":
      case "remote_spawned":
      case "remote_request":
      case "remote_request_refused":
        break;
      default:
        e satisfies never;
    }
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
