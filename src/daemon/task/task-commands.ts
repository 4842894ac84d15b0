// The owner's commands on a task: abort, respond (the next cycle) and close. Each asks the machine whether it is
// allowed (commandAllowed, src/core/lifecycle/task-cycle.ts) and is a lifecycle event; the files a command needs (a follow-up's
// text) are durable before the event is fed.
import { existsSync } from "node:fs";
import { rename } from "node:fs/promises";
import { join } from "node:path";
import type { CapLimits } from "../../core/budget.js";
import { DshError } from "../../core/errors.js";
import { commandAllowed } from "../../core/lifecycle/task-cycle.js";
import type { AgentResult } from "../../core/types.js";
import { writeAtomic } from "../../store/fsio.js";
import { raiseForRespond } from "./budget.js";
import { followUpPath } from "./record.js";
import type { Runner } from "./runner-types.js";

/** Abort (the owner's or a person's). False when there is nothing to abort. */
/** What abort and close ask of their task: its state, and the runner's dispatch. */
export type CommandPort = Pick<Runner, "state" | "result" | "rec" | "chain" | "stopWatching" | "dispatch">;

export async function abort(r: CommandPort): Promise<boolean> {
  if (!commandAllowed(r.state, "abort", r.result?.status ?? r.rec.status)) return false;
  r.stopWatching();
  await r.dispatch({ type: "abort" });
  await r.chain;
  return true;
}

/**
 * A follow-up for a completed or blocked task: durable first (its text and the respond record), then the next
 * cycle starts, at once when a slot is free, else when one frees (the cycle is queued meanwhile). Returns at once.
 */
/** What a respond asks of its task: its record and evidence, its slot and store, the machine and the journal. */
export type RespondPort = Pick<
  Runner,
  | "rec"
  | "state"
  | "result"
  | "files"
  | "prompt"
  | "lastStopReason"
  | "lastErrorMessage"
  | "ports"
  | "dispatch"
  | "journal"
  | "refresh"
>;

export async function respond(
  r: RespondPort,
  message: string,
  caps: CapLimits = {},
  requestId?: string,
): Promise<{ cycle: number; queued: boolean }> {
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
  const slotFree = r.ports.slot.holds();
  // The phase moves before result.md does: a harvest the move triggers must read "working", not a settled cycle.
  const started = r.dispatch({ type: "respond" });
  const dir = r.ports.store.taskPaths(rec.taskId).dir;
  // The new cycle must earn its own result.md: keep the old one beside it for the record.
  await rename(rec.resultPath, join(dir, `result.cycle${cycle - 1}.md`)).catch(() => undefined);
  await r.files?.readResult();
  // The follow-up and its record are durable before any child sees it: a restarted daemon sends it (once) if no
  // prompt_sent follows, and never a second time if one does.
  await writeAtomic(followUpPath(dir, cycle), message);
  // A relayed follow-up's request id goes in the same record: a repeat of it finds its cycle here (request-memo.ts).
  await r.journal({ type: "respond", cycle, bytes: message.length, ...(requestId ? { requestId } : {}) });
  await started;
  // With the extension away (a daemon restart), the machine waits readinessTimeoutMs for it, then types the prompt.
  const begin = () => void r.dispatch({ type: "slot_granted" }).then(() => r.refresh());
  if (slotFree) {
    await slot;
    begin();
    await r.refresh();
  } else {
    void slot.then(begin, (e: unknown) => {
      const err = e instanceof DshError ? e : new DshError("CONCURRENCY_LIMIT", String(e));
      void r.dispatch({ type: "launch_failed", code: err.code, message: err.message });
    });
    await r.refresh();
  }
  return { cycle, queued: !slotFree };
}

export async function close(r: CommandPort, closePane: boolean): Promise<AgentResult> {
  if (r.state.phase.name !== "closed") {
    r.stopWatching();
    await r.dispatch({ type: "close", closePane, headless: r.rec.runtime === "headless" });
  }
  await r.chain;
  return r.result!;
}
