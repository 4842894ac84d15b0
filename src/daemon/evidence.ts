// Evidence in: the child extension's connection, events and crew_report, changes to the task's files, and the
// runtime's state. Each either settles the cycle or asks for a fresh derivation.
import { DshError } from "../core/errors.js";
import { CONTRACT_ERROR_MESSAGE } from "../core/crew-cycle.js";
import type { RuntimeEvent } from "../runtime/types.js";
import type { Live } from "./live.js";
import type { Connection } from "./server.js";
import { freshSession } from "./settle.js";
import type { Supervisor } from "./supervisor.js";

export type ChildEvent = { type: string; cycle?: number; stopReason?: string; errorMessage?: string; willRetry?: boolean; why?: string };
export type ChildReport = { cycle?: number; outcome: "completed" | "needs_input"; report: string; needs?: string };

export function childConnected(sup: Supervisor, conn: Connection): void {
  const live = sup.tasks.get(conn.taskId ?? "");
  if (!live) return;
  live.child = conn;
  conn.onClose(() => {
    if (live.child === conn) delete live.child;
  });
  if (live.promptPending) sup.sendPrompt(live);
}

export async function childEvent(sup: Supervisor, conn: Connection, ev: ChildEvent): Promise<{ ok: true }> {
  const live = sup.tasks.get(conn.taskId ?? "");
  if (!live || live.rec.lifecycle) return { ok: true };
  if (ev.type === "prompt_accepted" && live.promptPending && ev.cycle === live.promptPending.cycle) {
    // Confirms the push: recovery re-pushes only unconfirmed prompts (the extension runs a cycle once).
    void sup.journal(live, { type: "prompt_accepted", cycle: ev.cycle });
    delete live.promptPending;
    live.rec.timing.promptedAt = live.promptSentAt ?? Date.now();
    live.cycleRunning = true;
    live.readiness?.resolve();
    delete live.readiness;
    sup.refresh(live);
  } else if (ev.type === "agent_end" && live.cycleRunning && live.promptPending === undefined) {
    if (ev.stopReason !== undefined) live.lastStopReason = ev.stopReason;
    if (ev.errorMessage !== undefined) live.lastErrorMessage = ev.errorMessage;
    await live.files?.readSession();
    await live.files?.readResult();
    // pi may retry a retryable error; the next agent_end (or the process exit) decides then. The extension knows
    // the child's retry settings; without it, the session's own guess stands.
    if (ev.willRetry ?? live.files?.facts()?.retryMayFollow) return { ok: true };
    sup.settleCycle(live, `agent_end ${ev.stopReason ?? ""}`.trim());
  } else if (ev.type === "prompt_failed") {
    void sup.journal(live, { type: "prompt_failed", cycle: ev.cycle, error: ev.errorMessage });
  } else if (ev.type === "finalize_prompt") {
    // A reportless normal ending: the child sent itself the one finalization follow-up; the cycle goes on.
    void sup.journal(live, { type: "finalize_prompt", cycle: ev.cycle, why: ev.why });
  } else if (ev.type === "contract_error" && live.cycleRunning && live.promptPending === undefined) {
    live.rec.error = { code: "CONTRACT_ERROR", message: CONTRACT_ERROR_MESSAGE };
    void sup.journal(live, { type: "contract_error", cycle: ev.cycle, why: ev.why });
    await live.files?.readSession();
    sup.settleCycle(live, "contract error", { failed: true });
  }
  return { ok: true };
}

export async function childReport(sup: Supervisor, conn: Connection, p: ChildReport): Promise<{ ok: true }> {
  const live = sup.tasks.get(conn.taskId ?? "");
  if (!live) return { ok: true };
  // Kept before any await: the agent_end that follows on the same connection may settle the cycle next.
  live.report = { cycle: p.cycle ?? live.rec.cycle, outcome: p.outcome, report: p.report, ...(p.needs !== undefined ? { needs: p.needs } : {}) };
  await sup.journal(live, { type: "report", cycle: p.cycle, outcome: p.outcome });
  await live.files?.readResult();
  return { ok: true };
}

export function onFiles(sup: Supervisor, live: Live): void {
  if (live.rec.lifecycle || live.promptPending) return;
  const f = live.files?.facts();
  // Without a connected extension, the session alone can settle a cycle that moved after its prompt.
  if (!live.child && live.cycleRunning && f?.cycleSettled && !f.retryMayFollow && freshSession(live)) {
    sup.settleCycle(live, "session settled");
    return;
  }
  sup.refresh(live);
}

export function onRuntime(sup: Supervisor, live: Live, e: RuntimeEvent): void {
  if (e.type === "state") {
    live.runtimeState = e.state;
    sup.refresh(live);
    return;
  }
  if (live.runtimeState === "missing") return;
  live.runtimeState = "missing";
  void sup.journal(live, { type: "runtime_" + e.type, ...(e.type === "exited" ? { exit: e.exit } : {}) });
  if (live.readiness) {
    live.readiness.reject(new DshError("AGENT_STALLED", `the child exited before it took its prompt (${e.type})`));
    delete live.readiness;
    return;
  }
  if (live.rec.lifecycle) return;
  // A child that ends after its cycle settled leaves the settled result as it was.
  if (live.cycleRunning || live.rec.status === "starting") sup.settleCycle(live, "runtime " + e.type);
}
