// The owner's commands on a task: interrupt (abort or timeout), respond (the next cycle) and close. Each is a
// lifecycle event; the files a command needs (a follow-up's text) are durable before the event is fed.
import { rename } from "node:fs/promises";
import { join } from "node:path";
import { DshError } from "../core/errors.js";
import { mayAbort, mayRespond } from "../core/task-cycle.js";
import type { AgentResult } from "../core/types.js";
import { writeAtomic } from "../store/fsio.js";
import { typeFollowUpLater } from "./child-prompt.js";
import type { Live } from "./live.js";
import { followUpPath } from "./record.js";
import type { Supervisor } from "./supervisor-types.js";

/** Abort (the owner's or a person's). False when there is nothing to abort. */
export async function abort(sup: Supervisor, live: Live): Promise<boolean> {
  if (!mayAbort(live.state.phase, live.result?.status ?? live.rec.status)) return false;
  sup.stopWatching(live);
  await sup.dispatch(live, { type: "abort" });
  await live.chain;
  return true;
}

/** The task's timeout fired. */
export async function timeOut(sup: Supervisor, live: Live): Promise<void> {
  await sup.dispatch(live, { type: "timeout_fired", ms: live.rec.timeoutMs });
  await live.chain;
}

/**
 * A follow-up for a completed or blocked task: durable first (its text and the respond record), then the next
 * cycle starts, at once when a slot is free, else when one frees (the cycle is queued meanwhile). Returns at once.
 */
export async function respond(
  sup: Supervisor,
  live: Live,
  message: string,
  requestId?: string,
): Promise<{ cycle: number; queued: boolean }> {
  const { rec } = live;
  const status = live.result?.status ?? rec.status;
  const phase = live.state.phase;
  if (!mayRespond(phase, status)) {
    const what = phase.name === "queued" ? "queued (a follow-up waits for a slot)" : status;
    throw new DshError(
      "BAD_STATE",
      `task ${rec.taskId} is ${what}; respond needs a completed or blocked task (wait for it, or spawn a new task)`,
    );
  }
  const cycle = phase.cycle + 1;
  rec.cycle = cycle;
  delete rec.timing.settledAt;
  delete rec.error;
  delete live.lastStopReason;
  delete live.lastErrorMessage;
  const pending = { cycle, text: message };
  live.prompt = pending;
  const slot = sup.admission.acquire(rec.taskId);
  const slotFree = sup.admission.holds(rec.taskId);
  // The phase moves before result.md does: a harvest the move triggers must read "working", not a settled cycle.
  const started = sup.dispatch(live, { type: "respond" });
  const dir = sup.deps.store.taskPaths(rec.taskId).dir;
  // The new cycle must earn its own result.md: keep the old one beside it for the record.
  await rename(rec.resultPath, join(dir, `result.cycle${cycle - 1}.md`)).catch(() => undefined);
  await live.files?.readResult();
  // The follow-up and its record are durable before any child sees it: a restarted daemon sends it (once) if no
  // prompt_sent follows, and never a second time if one does.
  await writeAtomic(followUpPath(dir, cycle), message);
  // A relayed follow-up's request id goes in the same record: a repeat of it finds its cycle here (request-memo.ts).
  await sup.journal(live, { type: "respond", cycle, bytes: message.length, ...(requestId ? { requestId } : {}) });
  await started;
  const begin = () => {
    void sup.dispatch(live, { type: "slot_granted" }).then(() => {
      // With the extension away (a daemon restart), wait for it to reconnect: hello pushes the pending prompt.
      if (live.state.phase.name === "awaiting_prompt" && !live.child) typeFollowUpLater(sup, live, pending);
      return sup.refresh(live);
    });
  };
  if (slotFree) {
    await slot;
    begin();
    await sup.refresh(live);
  } else {
    void slot.then(begin, (e: unknown) => {
      const err = e instanceof DshError ? e : new DshError("CONCURRENCY_LIMIT", String(e));
      void sup.dispatch(live, { type: "launch_failed", code: err.code, message: err.message });
    });
    await sup.refresh(live);
  }
  return { cycle, queued: !slotFree };
}

export async function close(sup: Supervisor, live: Live, closePane: boolean): Promise<AgentResult> {
  if (live.state.phase.name !== "closed") {
    sup.stopWatching(live);
    await sup.dispatch(live, { type: "close", closePane, headless: live.rec.runtime === "headless" });
  }
  await live.chain;
  return live.result!;
}
