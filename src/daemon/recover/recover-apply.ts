// Carrying out a recovery plan (src/core/lifecycle/recovery-plan.ts) for one task: the phase it resumes in, the slot it holds
// again, the watches and timers it needs, and the one lifecycle event that finishes what the crash interrupted.
import { recordStatus } from "../../core/result/derive.js";
import { readFile } from "node:fs/promises";
import type { RecoveryPlan } from "../../core/lifecycle/recovery-plan.js";
import type { Runtime } from "../../runtime/types.js";
import { branchFor, worktreePathFor, gitMaybe } from "../ports/git-port.js";
import { followUpPath } from "../task/record.js";
import type { Runner } from "../task/runner-types.js";
import { endOrphanedSetup } from "./recover-setup.js";

/**
 * `alive`: the launched child still runs; `journaledWorktree`: the worktree the pipeline journaled before a launch
 * (task.json may predate it).
 */
export async function applyRecoveryPlan(
  live: Runner,
  plan: RecoveryPlan,
  runtime: Runtime,
  alive: boolean,
  journaledWorktree: string | undefined,
  setupGroup?: number,
): Promise<void> {
  const { store } = live.ports;
  const { rec } = live;
  const taskId = rec.taskId;
  switch (plan.kind) {
    case "finish_close":
      return; // recoverOne finished it before planning (the close needs no evidence)
    case "finish_abort":
      // The journal holds the interruption; its harvest is what the crash cut short. The cycle was in flight.
      await live.resume();
      await live.dispatch({ type: "restored", found: { found: "prompt_out", cycle: rec.cycle }, childAlive: alive });
      if (plan.timeout) await live.dispatch({ type: "timer_fired", kind: "timeout" });
      else await live.dispatch({ type: "abort" });
      await live.chain;
      return;
    case "start_again":
      // Never launched: no child ever saw this task. A worktree created before the crash held no work yet; it is
      // removed so the pipeline can create it afresh; a setup still running in it is ended first.
      if (setupGroup !== undefined) await endOrphanedSetup(live, setupGroup);
      await dropUnusedWorktree(live, journaledWorktree);
      rec.workdir = rec.cwd;
      delete rec.worktree;
      recordStatus(rec, { kind: "start_again" });
      await live.refresh(); // listed and waitable before the socket serves
      void live.run(live.ports.slot.acquire());
      return;
    case "keep_settled":
      if (alive) live.watchRuntime(runtime);
      else live.childEnded = true;
      // A settled child that still runs is parked after idleChildMs again (the machine arms the timer).
      await live.dispatch({ type: "restored", found: plan.found, childAlive: alive });
      if (!live.result) await live.refresh();
      // The settled result stands, and its owner must have heard it: the outbox record follows the settle's records
      // by timing only, so a power cut can keep the result and lose the record. The delivery service queues the
      // cycle again unless the outbox has a delivery of that cycle (then nothing happens).
      if (live.result) live.notify(live.result, { settled: true, recovered: true });
      return;
    case "failed_before_prompt":
      live.childEnded = true;
      await live.dispatch({
        type: "restored",
        found: { found: "prompt_pending", cycle: rec.cycle },
        childAlive: false,
      });
      await live.dispatch({
        type: "launch_failed",
        code: "AGENT_STALLED",
        message: "the child ended before it took its prompt while the daemon was down; spawn the task again",
      });
      await live.chain;
      return;
    case "push_prompt": {
      const text = rec.cycle > 1 ? await followUpText(live, rec.cycle) : ((await store.readPrompt(taskId)) ?? "");
      live.prompt = { cycle: rec.cycle, text };
      holdSlot(live);
      live.watchRuntime(runtime);
      await live.dispatch({ type: "restored", found: plan.found, childAlive: alive });
      await live.refresh();
      return;
    }
    case "relaunch_follow_up": {
      // The follow-up is durable (its text and the respond record); no prompt of it went out. A child the
      // relaunch may have left is ended first (a second pi on one session would fork it).
      if (rec.handle) await runtime.close(rec.handle).catch(() => undefined);
      live.prompt = { cycle: plan.cycle, text: await followUpText(live, plan.cycle) };
      await live.dispatch({
        type: "restored",
        found: { found: "follow_up", cycle: plan.cycle, childEnded: true },
        childAlive: false,
      });
      await live.refresh();
      const slot = live.ports.slot.acquire();
      void slot.then(
        () => live.dispatch({ type: "slot_granted" }),
        (e: unknown) => live.dispatch({ type: "launch_failed", code: "CONCURRENCY_LIMIT", message: String(e) }),
      );
      return;
    }
    case "settle":
      holdSlot(live);
      if (alive) live.watchRuntime(runtime);
      await live.dispatch({ type: "restored", found: plan.found, childAlive: alive });
      await live.dispatch({ type: "settle_recovered", reason: plan.reason, journaled: plan.journaled });
      await live.chain;
      return;
    case "gone":
      holdSlot(live);
      await live.dispatch({ type: "restored", found: plan.found, childAlive: false });
      await live.markGone();
      await live.chain;
      return;
    case "resume_running":
      holdSlot(live);
      live.watchRuntime(runtime);
      await live.dispatch({ type: "restored", found: plan.found, childAlive: alive });
      await live.refresh();
      return;
  }
}

function followUpText(live: Runner, cycle: number): Promise<string> {
  return readFile(followUpPath(live.ports.store.taskPaths(live.rec.taskId).dir, cycle), "utf8").catch(() => "");
}

/** A running or pending cycle holds a slot again (over the cap if the config shrank meanwhile: it already runs). */
function holdSlot(live: Runner): void {
  try {
    void live.ports.slot.acquire().catch(() => undefined);
  } catch {
    /* queue full: the cycle runs anyway */
  }
}

async function dropUnusedWorktree(live: Runner, journaled?: string): Promise<void> {
  const { rec } = live;
  const repo = (await gitMaybe(rec.cwd, ["rev-parse", "--show-toplevel"]))?.trim();
  if (!repo) return;
  const path = rec.worktree?.path ?? journaled ?? worktreePathFor(live.ports.env.home, repo, rec.taskId);
  await live.ports.git.removeUnusedWorktree(repo, path, branchFor(rec.taskId));
}
