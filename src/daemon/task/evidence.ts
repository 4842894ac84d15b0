// Evidence in, events out: the child extension's connection, events and crew_report, changes to the task's files, and
// the runtime's state. Each function returns the lifecycle event (src/core/lifecycle/task-cycle.ts) it found; the
// runner (task-runner.ts) alone feeds it to the machine, which decides what it means.
import type { CycleEvent } from "../../core/lifecycle/task-cycle.js";
import type { RuntimeEvent } from "../../runtime/types.js";
import type { Runner, TaskPort } from "./runner-types.js";
import type { Connection } from "../server/server-types.js";
import { freshSession } from "./settle.js";
import { capReached } from "./budget.js";
import { steerAnswered } from "./steer.js";
import type { ChildEvent, ChildReport } from "./supervisor-types.js";

export type { ChildEvent, ChildReport } from "./supervisor-types.js";

/** What evidence reads and sets of its task (the machine is the runner's: it feeds the events returned). */
export type EvidencePort = TaskPort<
  | "rec"
  | "state"
  | "files"
  | "child"
  | "promptPushed"
  | "promptSentAt"
  | "agentStartedCycle"
  | "lastStopReason"
  | "lastErrorMessage"
  | "report"
  | "runtimeState"
  | "childEnded"
  | "steering"
  | "refresh"
  | "journal",
  "clock" | "log" | "runtimeFor"
>;

/** The task's child extension connected (after its hello): it is the task's child now. */
export function childJoined(live: Pick<Runner, "child">, conn: Connection): CycleEvent {
  live.child = conn;
  return { type: "child_hello" };
}

/** A connection closed: child_left when it was the task's child (a newer one may have taken its place). */
export function childLeft(live: Pick<Runner, "child" | "promptPushed">, conn: Connection): CycleEvent | undefined {
  // The push record names the connection only to tell a new one from it: holding it would keep the closed socket
  // and its buffers for the task's life (also when a newer connection already took its place).
  if (live.promptPushed?.child === conn) delete live.promptPushed;
  if (live.child !== conn) return undefined;
  delete live.child;
  return { type: "child_left" };
}

/** An event of the child extension: the lifecycle event it is, if any (a steer taken is one: see steerTaken). */
export async function childEvent(live: EvidencePort, ev: ChildEvent): Promise<CycleEvent | undefined> {
  if (live.state.phase.name === "closed") return undefined;
  const cycle = ev.cycle ?? live.rec.cycle;
  if (ev.type === "prompt_accepted") {
    if (ev.cycle === undefined) return undefined;
    if (live.state.phase.name === "launching" || live.state.phase.name === "awaiting_prompt")
      live.rec.timing.promptedAt = live.promptSentAt ?? live.ports.clock.now();
    return { type: "prompt_accepted", cycle: ev.cycle };
  }
  if (ev.type === "agent_start") {
    const first = (live.agentStartedCycle ?? 0) < 1;
    live.agentStartedCycle = Math.max(live.agentStartedCycle ?? 0, cycle);
    if (first && live.state.phase.name === "running") await live.refresh(); // starting → running
    return undefined;
  }
  if (ev.type === "agent_end") {
    if (ev.stopReason !== undefined) live.lastStopReason = ev.stopReason;
    if (ev.errorMessage !== undefined) live.lastErrorMessage = ev.errorMessage;
    await Promise.all([live.files?.readSession(), live.files?.readResult()]);
    // pi may retry a retryable error; the next agent_end (or the process exit) decides then. The extension knows
    // the child's retry settings; without it, the session's own guess stands.
    const willRetry = ev.willRetry ?? live.files?.facts()?.retryMayFollow ?? false;
    return {
      type: "agent_end",
      cycle,
      willRetry,
      ...(ev.stopReason !== undefined ? { stopReason: ev.stopReason } : {}),
    };
  }
  if (ev.type === "prompt_failed") {
    const words = await piWords(live, ev.errorMessage ?? "pi did not start the prompt");
    return { type: "prompt_failed", cycle, message: words };
  }
  if (ev.type === "finalize_prompt") {
    // A reportless normal ending: the child sent itself the one finalization follow-up; the cycle goes on.
    void live.journal({ type: "finalize_prompt", cycle: ev.cycle, why: ev.why });
    return undefined;
  }
  if (ev.type === "steer_taken" || ev.type === "steer_missed") return steerAnswered(live, ev);
  if (ev.type === "contract_error" && live.state.phase.name === "running") {
    void live.journal({ type: "contract_error", cycle: ev.cycle, why: ev.why });
    await live.files?.readSession();
    return { type: "contract_error" };
  }
  return undefined;
}

/**
 * pi's own words for a prompt it did not run: the extension_error it printed (headless: a JSON line on stdout; a
 * TUI: a line of the screen), else what the extension saw. Only the first line: the rest is pi's help text.
 */
async function piWords(live: TaskPort<"rec", "runtimeFor">, fromExtension: string): Promise<string> {
  const first = fromExtension.split("\n")[0]!.trim();
  const handle = live.rec.handle;
  if (!handle) return first;
  const out = await live.ports
    .runtimeFor(live.rec.runtime)
    .readOutput(handle, { lines: 40 })
    .catch(() => "");
  for (const line of out.split("\n").reverse()) {
    if (line.startsWith("{") && line.includes('"extension_error"')) {
      try {
        const e = JSON.parse(line) as { error?: unknown };
        if (typeof e.error === "string" && e.error.trim()) return e.error.split("\n")[0]!.trim();
      } catch {
        /* not a JSON line after all */
      }
    }
  }
  const key = first.slice(0, 24);
  const seen = key && out.split("\n").find((l) => l.includes(key));
  // The TUI frames it as `Extension "<runtime>" error: <pi's message>`: the message is pi's words.
  return seen
    ? seen
        .trim()
        .replace(/^Error:\s*/, "")
        .replace(/^Extension "[^"]*" error:\s*/, "")
    : first;
}

export async function childReport(
  live: Pick<Runner, "report" | "rec" | "journal" | "files">,
  p: ChildReport,
): Promise<{ ok: true }> {
  // Kept before any await: the agent_end that follows on the same connection may settle the cycle next.
  live.report = {
    cycle: p.cycle ?? live.rec.cycle,
    outcome: p.outcome,
    report: p.report,
    ...(p.needs !== undefined ? { needs: p.needs } : {}),
  };
  await live.journal({ type: "report", cycle: p.cycle, outcome: p.outcome });
  await live.files?.readResult();
  return { ok: true };
}

/** The task's session or result.md changed: what the machine is to hear of it, if anything. */
export function onFiles(live: EvidencePort, what: "session" | "result" = "session"): CycleEvent | undefined {
  const p = live.state.phase;
  if (p.name === "closed" || p.name === "queued") return undefined;
  if (p.name === "launching" || p.name === "awaiting_prompt") return undefined; // the new cycle has not begun
  const f = live.files?.facts();
  // A spend cap reached as the session grows: the machine settles the cycle blocked and stops the turn.
  const cap = p.name === "running" && what === "session" ? capReached(live) : undefined;
  if (cap) return { type: "cap_reached", ...cap };
  if (p.name === "running" && !live.child && f?.cycleSettled)
    // Without a connected extension, the session alone can settle a cycle that moved after its prompt.
    return {
      type: "session_settled",
      retryMayFollow: f.retryMayFollow,
      fresh: freshSession(live),
      ...(f.lastStopReason !== undefined ? { stopReason: f.lastStopReason } : {}),
    };
  return { type: "evidence_changed", what };
}

/** The runtime's word on the child: its state, or its exit (journaled here; the machine hears it unless expected). */
export function onRuntime(
  live: Pick<Runner, "runtimeState" | "childEnded" | "journal">,
  e: RuntimeEvent,
): CycleEvent | undefined {
  if (e.type === "state") {
    live.runtimeState = e.state;
    return { type: "evidence_changed", what: "runtime_state" };
  }
  if (live.runtimeState === "missing") return undefined;
  live.runtimeState = "missing";
  void live.journal(e.type === "exited" ? { type: "runtime_exited", exit: e.exit } : { type: "runtime_gone" });
  if (live.childEnded) return undefined; // the daemon ended it: expected
  return { type: "runtime_gone", how: e.type };
}
