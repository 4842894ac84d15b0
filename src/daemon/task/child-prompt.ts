// Getting a prompt to the child: pushed over its extension connection (journaled first), or, when no extension
// comes back for a follow-up (the machine's follow_up timer ran out), typed into the runtime once.
import { promptPending } from "../../core/lifecycle/task-cycle.js";
import type { Live } from "./live.js";
import type { Runner, TaskPort } from "./runner-types.js";

/** The cycle's prompt, while the phase says it is not taken yet. */
export function pendingPrompt(live: Pick<Live, "state" | "prompt">): { cycle: number; text: string } | undefined {
  const p = live.state.phase;
  return promptPending(p) && live.prompt && live.prompt.cycle === (p as { cycle: number }).cycle
    ? live.prompt
    : undefined;
}

/** What pushing the prompt reads and sets of its task. */
export type PromptPort = TaskPort<"state" | "prompt" | "child" | "promptPushed" | "promptSentAt" | "journal", "clock">;

export function sendPrompt(r: PromptPort): void {
  const p = pendingPrompt(r);
  const child = r.child;
  if (!p || !child || (r.promptPushed?.child === child && r.promptPushed.prompt === p)) return;
  r.promptPushed = { child, prompt: p };
  r.promptSentAt = r.ports.clock.now();
  // The record first, then the effect: a crash in between leaves a prompt that looks sent and is never sent again
  // (recovery repeats no prompt it finds journaled), rather than one the child got but the journal never saw.
  void r.journal({ type: "prompt_sent", cycle: p.cycle, bytes: p.text.length }).then(() => {
    if (r.child === child && pendingPrompt(r) === p) child.push("child.prompt", p);
  });
}

/**
 * The machine gave up waiting for the extension of a follow-up's child: the follow-up is typed into the runtime
 * (once, journaled first; typed text is taken as soon as it is typed, so the cycle runs).
 */
export function typePrompt(
  r: TaskPort<"prompt" | "rec" | "promptSentAt" | "journal", "clock" | "log" | "runtimeFor">,
  cycle: number,
): void {
  const p = r.prompt;
  const handle = r.rec.handle;
  if (!p || p.cycle !== cycle || !handle) return;
  r.promptSentAt = r.ports.clock.now();
  r.rec.timing.promptedAt = r.promptSentAt;
  void r
    .journal({ type: "prompt_sent", cycle, bytes: p.text.length, via: "runtime" })
    .then(() => r.ports.runtimeFor(r.rec.runtime).sendText(handle, p.text))
    .catch((e: unknown) => r.ports.log.warn({ taskId: r.rec.taskId, err: String(e) }, "follow-up not typed"));
}
