// Waiting for tasks to settle and printing their AgentResults (spawn --wait, wait): Ctrl+C stops the wait only.
import type { AgentResult } from "../../core/types.js";
import type { CliContext } from "../common/context.js";
import { exitCodeForResults, EXIT } from "../common/exit-codes.js";
import { renderCard } from "../format/card.js";
import { colorEnabled } from "../format/color.js";
import { printJson } from "../common/io.js";
import { spinner } from "../common/spinner.js";

/** A wait without --timeout: longer than any task runs (tasks are bounded by their own timeoutMs). */
const WAIT_FOREVER_MS = 7 * 24 * 3_600_000;

/** Ctrl+C ended a wait before the tasks settled (128 + SIGINT, as shells report it). */
const EXIT_INTERRUPTED = 130;

/** Wait for tasks to settle; sets the exit code from their statuses (3 on timeout). */
export async function waitAndPrint(
  ctx: CliContext,
  taskIds: string[],
  mode: "any" | "all",
  timeoutMs: number | undefined,
  json: boolean,
): Promise<void> {
  const conn = await ctx.connect();
  // Drawn on stderr: only when both streams are a terminal (`wait ID 2>log` keeps frames out of the log).
  const stop =
    ctx.io.isTTY && (ctx.io.errIsTTY ?? true) && !json
      ? spinner(ctx.io, `waiting for ${taskIds.length} task(s)`)
      : () => {};
  let res: { results: AgentResult[]; timedOut: boolean } | undefined;
  let onAbort = () => {};
  try {
    // The socket request outlives the wait itself; without --timeout the task's own run bound ends the wait.
    const requestTimeoutMs = (timeoutMs ?? WAIT_FOREVER_MS) + 10_000;
    // Ctrl+C stops waiting (not the tasks): without this the spinner kept turning until a second Ctrl+C.
    const interrupted = new Promise<undefined>((resolve) => {
      onAbort = () => resolve(undefined);
      if (ctx.signal.aborted) onAbort();
      else ctx.signal.addEventListener("abort", onAbort, { once: true });
    });
    const waited = conn.request(
      "task.wait",
      { taskIds, mode, timeoutMs: timeoutMs ?? WAIT_FOREVER_MS },
      { timeoutMs: requestTimeoutMs },
    );
    waited.catch(() => undefined); // after Ctrl+C the connection closes under it; that rejection is expected
    res = await Promise.race([waited, interrupted]);
  } finally {
    ctx.signal.removeEventListener("abort", onAbort);
    stop();
  }
  if (!res) {
    ctx.io.err(`stopped waiting; the tasks keep running (dsh-herdr wait ${taskIds.join(" ")})\n`);
    ctx.exitCode = EXIT_INTERRUPTED;
    return;
  }
  if (json) printJson(ctx.io, res);
  else {
    ctx.io.out(
      res.results.map((r) => renderCard(r, undefined, { color: colorEnabled(ctx.io.env, ctx.io.isTTY) })).join("\n"),
    );
    if (res.timedOut)
      ctx.io.err(
        `dsh-herdr: TIMEOUT: not settled in time; the tasks keep running (dsh-herdr wait ${taskIds.join(" ")})\n`,
      );
  }
  const settled = res.results.filter((r) => !["starting", "working", "running"].includes(r.status));
  ctx.exitCode = res.timedOut ? EXIT.timeout : exitCodeForResults(settled);
}
