// The owner's commands on a task: interrupt (abort or timeout), respond (the next cycle) and close.
import { rename } from "node:fs/promises";
import { join } from "node:path";
import { DshError } from "../core/errors.js";
import type { AgentResult } from "../core/types.js";
import { writeAtomic } from "../store/fsio.js";
import { typeFollowUpLater } from "./child-prompt.js";
import type { Live } from "./live.js";
import { followUpPath } from "./record.js";
import type { Supervisor } from "./supervisor.js";

export async function interrupt(sup: Supervisor, live: Live, error?: { code: string; message: string }): Promise<void> {
  const { rec } = live;
  if (rec.lifecycle) return;
  rec.lifecycle = "interrupted";
  if (error) rec.error = error;
  sup.admission.cancel(rec.taskId, new DshError("BAD_STATE", "aborted while queued"));
  live.readiness?.reject(new DshError("BAD_STATE", "aborted"));
  live.child?.push("child.abort", { reason: error?.code ?? "aborted" });
  if (rec.handle) await sup.deps.runtimeFor(rec.runtime).close(rec.handle).catch(() => undefined);
  sup.stopWatching(live);
  await sup.journal(live, { type: "interrupted", ...(error ? { code: error.code } : {}) });
  sup.settleCycle(live, error?.code ?? "aborted");
  await live.chain;
}

export async function respond(sup: Supervisor, live: Live, message: string): Promise<number> {
  const { rec } = live;
  if (rec.status !== "completed" && rec.status !== "blocked") {
    throw new DshError("BAD_STATE", `task ${rec.taskId} is ${rec.status}; task.respond needs a completed or blocked task (wait for it with task.wait, or spawn a new task)`);
  }
  await sup.admission.acquire(rec.taskId);
  rec.cycle += 1;
  delete rec.timing.settledAt;
  delete live.lastStopReason;
  delete live.lastErrorMessage;
  // Pending before result.md moves: a harvest the move triggers must read "working", not a settled cycle.
  const pending = { cycle: rec.cycle, text: message };
  live.promptPending = pending;
  const dir = sup.deps.store.taskPaths(rec.taskId).dir;
  // The new cycle must earn its own result.md: keep the old one beside it for the record.
  await rename(rec.resultPath, join(dir, `result.cycle${rec.cycle - 1}.md`)).catch(() => undefined);
  await live.files?.readResult();
  // The follow-up and its record are durable before any child sees it: a restarted daemon sends it (once) if no
  // prompt_sent follows, and never a second time if one does.
  await writeAtomic(followUpPath(dir, rec.cycle), message);
  await sup.journal(live, { type: "respond", cycle: rec.cycle, bytes: message.length });
  sup.armTimeout(live);
  // With the extension away (a daemon restart), wait for it to reconnect: hello pushes the pending prompt.
  if (live.child) sup.sendPrompt(live);
  else typeFollowUpLater(sup, live, pending);
  await sup.refresh(live);
  return rec.cycle;
}

export async function close(sup: Supervisor, live: Live, closePane: boolean): Promise<AgentResult> {
  const { rec } = live;
  if (rec.lifecycle !== "closed") {
    const wasRunning = live.cycleRunning || live.promptPending !== undefined;
    rec.lifecycle = "closed";
    sup.admission.cancel(rec.taskId, new DshError("BAD_STATE", "closed while queued"));
    if (wasRunning) live.child?.push("child.abort", { reason: "closed" });
    // A pane stays for the person to read unless asked; a headless process has nothing to show (its output is in
    // the task dir), so a closed task never leaves one running.
    const endChild = closePane || wasRunning || rec.runtime === "headless";
    if (rec.handle && endChild) await sup.deps.runtimeFor(rec.runtime).close(rec.handle).catch(() => undefined);
    sup.stopWatching(live);
    live.child?.push("child.abort", { reason: "closed" });
    sup.admission.release(rec.taskId);
    live.cycleRunning = false;
    await sup.journal(live, { type: "closed", closePane });
    await sup.refresh(live);
  }
  await live.chain;
  return live.result!;
}
