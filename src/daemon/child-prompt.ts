// Getting a prompt to the child: pushed over its extension connection (journaled first), or, when no extension
// comes back for a follow-up, typed into the runtime once.
import { promptPending } from "../core/task-cycle.js";
import type { Live } from "./live.js";
import type { Supervisor } from "./supervisor-types.js";

/** The cycle's prompt, while the phase says it is not taken yet. */
export function pendingPrompt(live: Live): { cycle: number; text: string } | undefined {
  const p = live.state.phase;
  return promptPending(p) && live.prompt && live.prompt.cycle === (p as { cycle: number }).cycle
    ? live.prompt
    : undefined;
}

export function sendPrompt(sup: Supervisor, live: Live): void {
  const p = pendingPrompt(live);
  const child = live.child;
  if (!p || !child || (live.promptPushed?.child === child && live.promptPushed.prompt === p)) return;
  live.promptPushed = { child, prompt: p };
  live.promptSentAt = Date.now();
  // The record first, then the effect: a crash in between leaves a prompt that looks sent and is never sent again
  // (recovery repeats no prompt it finds journaled), rather than one the child got but the journal never saw.
  void sup.journal(live, { type: "prompt_sent", cycle: p.cycle, bytes: p.text.length }).then(() => {
    if (live.child === child && pendingPrompt(live) === p) child.push("child.prompt", p);
  });
}

/** No child extension came back for a follow-up: type it into the runtime instead (once, journaled first). */
export function typeFollowUpLater(sup: Supervisor, live: Live, p: { cycle: number; text: string }): void {
  const t = setTimeout(() => {
    if (
      sup.stopped ||
      pendingPrompt(live) !== p ||
      live.child ||
      !live.rec.handle ||
      live.state.phase.name !== "awaiting_prompt"
    )
      return;
    live.promptSentAt = Date.now();
    live.rec.timing.promptedAt = live.promptSentAt;
    const handle = live.rec.handle;
    // Typed text is taken as soon as it is typed: nothing would recognise it a second time.
    void sup.dispatch(live, { type: "prompt_accepted", cycle: p.cycle });
    void sup
      .journal(live, { type: "prompt_sent", cycle: p.cycle, bytes: p.text.length, via: "runtime" })
      .then(() => sup.deps.runtimeFor(live.rec.runtime).sendText(handle, p.text))
      .catch((e: unknown) => sup.deps.log.warn({ taskId: live.rec.taskId, err: String(e) }, "follow-up not typed"));
  }, sup.deps.config().readinessTimeoutMs);
  t.unref();
}
