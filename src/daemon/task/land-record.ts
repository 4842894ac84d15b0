// The one writer of what task.check and task.land found or made (a landing measured or landed, a check run, its
// journal record): the socket methods compute the outcome, this applies it to the task. A live task's runner holds
// its record and result (changed in place, the owners told); a closed task's are its files. Both take their new
// fields from the same pure function (core/result/check-receipts.ts landingRecorded).
import { type LandingOutcome, landingRecorded } from "../../core/result/check-receipts.js";
import type { JournalRecord } from "../../core/lifecycle/journal-record.js";
import type { AgentResult } from "../../core/types.js";
import type { TaskStore } from "../../store/task-store.js";
import { validateAgentResult } from "./harvest.js";
import type { TaskRecord } from "./record.js";
import type { TaskPort } from "./runner-types.js";

/** What recording a landing touches of a live task. */
export type LandingPort = TaskPort<"rec" | "result" | "journal" | "notify", "store">;

/**
 * A live task: its record takes the outcome, `base` (the result the method started from) takes the record's check
 * and landing fields; written with task.json, journaled, and the owners hear the new result (not a settle).
 */
export async function recordLanding(
  r: LandingPort,
  base: AgentResult,
  outcome: LandingOutcome,
  event: JournalRecord,
): Promise<AgentResult> {
  const next = landingRecorded(r.rec, base, outcome);
  // In place: the record object is the task's, held by all of its modules.
  if (outcome.landing) r.rec.landing = next.rec.landing;
  if (outcome.checkRun) r.rec.checkRun = next.rec.checkRun;
  validateAgentResult(next.result);
  r.result = next.result;
  await r.ports.store.saveTask(r.rec, next.result);
  await r.journal(event);
  r.notify(next.result, { settled: false });
  return next.result;
}

/** A closed task (no runner): the same new record and result, written to its files and its journal. */
export async function recordClosedLanding(
  store: Pick<TaskStore, "saveTask" | "appendEvent">,
  rec: TaskRecord,
  base: AgentResult,
  outcome: LandingOutcome,
  event: JournalRecord,
): Promise<{ rec: TaskRecord; result: AgentResult }> {
  const next = landingRecorded(rec, base, outcome);
  validateAgentResult(next.result);
  await store.saveTask(next.rec, next.result);
  await store.appendEvent(next.rec.taskId, event);
  return next;
}
