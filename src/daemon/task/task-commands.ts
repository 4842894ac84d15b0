// The owner's commands on a task: abort, respond (the next cycle) and close. Each asks the machine whether it is
// allowed (commandAllowed, src/core/lifecycle/task-cycle.ts) and returns its lifecycle event, which the runner alone
// feeds to the machine; the files a command needs (a follow-up's text) are durable before the event's effects end.
import { existsSync } from "node:fs";
import { rename } from "node:fs/promises";
import { join } from "node:path";
import type { CapLimits } from "../../core/budget.js";
import { DshError } from "../../core/errors.js";
import { commandAllowed, type CycleEvent } from "../../core/lifecycle/task-cycle.js";
import { writeAtomic } from "../../store/fsio.js";
import { raiseForRespond } from "./budget.js";
import { followUpPath } from "./record.js";
import type { Runner, TaskPort } from "./runner-types.js";

/** What abort and close read and stop of their task (the runner feeds the event and awaits its effects). */
export type CommandPort = Pick<Runner, "state" | "result" | "rec" | "stopWatching">;

/** Abort (the owner's or a person's): its event, or none when there is nothing to abort. */
export function abortEvent(r: CommandPort): CycleEvent | undefined {
  if (!commandAllowed(r.state, "abort", r.result?.status ?? r.rec.status)) return undefined;
  r.stopWatching();
  return { type: "abort" };
}

/** What a respond reads and sets of its task: its record and evidence, its slot and store, and the journal. */
export type RespondPort = TaskPort<
  "rec" | "state" | "result" | "files" | "prompt" | "lastStopReason" | "lastErrorMessage" | "journal",
  "slot" | "store"
>;

/** A respond let through: its cycle, and its slot (held now, or queued for). */
export interface NextCycle {
  cycle: number;
  slot: Promise<unknown>;
  slotFree: boolean;
}

/**
 * A respond's first half, before the runner feeds the machine its `respond` event (synchronously, no await in
 * between): refused by name when the task cannot take it, else the next cycle's bookkeeping and its slot.
 */
export function nextCycle(r: RespondPort, message: string, caps: CapLimits = {}): NextCycle {
  const { rec } = r;
  const phase = r.state.phase;
  if (!commandAllowed(r.state, "respond", r.result?.status ?? rec.status) || phase.name !== "settled") {
    const status = r.result?.status ?? rec.status;
    const what = phase.name === "queued" ? "queued (a follow-up waits for a slot)" : status;
    throw new DshError(
      "BAD_STATE",
      `task ${rec.taskId} is ${what}; respond needs a completed or blocked task (wait for it, or spawn a new task)`,
    );
  }
  // A next cycle in a deleted directory would run and settle as if nothing were wrong: refused by name.
  const wt = rec.worktree;
  if (wt && rec.remote === undefined && !existsSync(wt.path))
    throw new DshError(
      "WORKTREE_GONE",
      `task ${rec.taskId}'s worktree ${wt.path} no longer exists (removed by hand or by gc), so a follow-up has nowhere to work; spawn a new task for it, and close this one (dsh-herdr done ${rec.taskId})`,
      { taskId: rec.taskId, path: wt.path },
    );
  const cycle = phase.cycle + 1;
  raiseForRespond(r, caps); // a cap reached: that much again on top of the spend (before the next turn can spend)
  rec.cycle = cycle;
  delete rec.timing.settledAt;
  delete rec.error;
  delete r.lastStopReason;
  delete r.lastErrorMessage;
  r.prompt = { cycle, text: message };
  const slot = r.ports.slot.acquire();
  return { cycle, slot, slotFree: r.ports.slot.holds() };
}

/**
 * A respond's second half, while the machine takes its event: the old result.md set aside, the follow-up's text and
 * its record durable before any child sees it.
 */
export async function followUpWritten(
  r: RespondPort,
  message: string,
  cycle: number,
  requestId?: string,
): Promise<void> {
  const dir = r.ports.store.taskPaths(r.rec.taskId).dir;
  // The new cycle must earn its own result.md: keep the old one beside it for the record.
  await rename(r.rec.resultPath, join(dir, `result.cycle${cycle - 1}.md`)).catch(() => undefined);
  await r.files?.readResult();
  // The follow-up and its record are durable before any child sees it: a restarted daemon sends it (once) if no
  // prompt_sent follows, and never a second time if one does.
  await writeAtomic(followUpPath(dir, cycle), message);
  // A relayed follow-up's request id goes in the same record: a repeat of it finds its cycle here (request-memo.ts).
  await r.journal({ type: "respond", cycle, bytes: message.length, ...(requestId ? { requestId } : {}) });
}

/** The slot a follow-up waited for, as the machine's event: granted, or refused (CONCURRENCY_LIMIT). */
export function slotRefused(e: unknown): CycleEvent {
  const err = e instanceof DshError ? e : new DshError("CONCURRENCY_LIMIT", String(e));
  return { type: "launch_failed", code: err.code, message: err.message };
}

/** Close: its event, or none when the task is closed already (the runner then waits for its chain all the same). */
export function closeEvent(r: CommandPort, closePane: boolean): CycleEvent | undefined {
  if (r.state.phase.name === "closed") return undefined;
  r.stopWatching();
  return { type: "close", closePane, headless: r.rec.runtime === "headless" };
}
