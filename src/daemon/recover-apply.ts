// Carrying out a recovery plan (src/core/recovery-plan.ts) for one task: the phase it resumes in, the slot it holds
// again, the watches and timers it needs, and the one lifecycle event that finishes what the crash interrupted.
import { readFile } from "node:fs/promises";
import type { RecoveryPlan } from "../core/recovery-plan.js";
import type { Runtime } from "../runtime/types.js";
import { branchFor, removeUnusedWorktree, worktreePathFor } from "../git/worktree.js";
import { gitMaybe } from "../git/run.js";
import { followUpPath, type TaskRecord } from "./record.js";
import type { Live } from "./live.js";
import type { Supervisor } from "./supervisor-types.js";

/**
 * `alive`: the launched child still runs; `journaledWorktree`: the worktree the pipeline journaled before a launch
 * (task.json may predate it).
 */
export async function applyRecoveryPlan(
  sup: Supervisor,
  live: Live,
  plan: RecoveryPlan,
  runtime: Runtime,
  alive: boolean,
  journaledWorktree: string | undefined,
): Promise<void> {
  const { store } = sup.deps;
  const { rec } = live;
  const taskId = rec.taskId;
  switch (plan.kind) {
    case "finish_close":
      return; // recoverOne finished it before planning (the close needs no evidence)
    case "finish_abort":
      // The journal holds the interruption; its harvest is what the crash cut short. The cycle was in flight.
      await sup.resume(live);
      await sup.dispatch(live, { type: "restored", phase: { name: "running", cycle: rec.cycle }, childAlive: alive });
      if (plan.timeout) await sup.dispatch(live, { type: "timeout_fired", ms: rec.timeoutMs });
      else await sup.dispatch(live, { type: "abort" });
      await live.chain;
      return;
    case "start_again":
      // Never launched: no child ever saw this task. A worktree created before the crash held no work yet; it is
      // removed so the pipeline can create it afresh.
      await dropUnusedWorktree(sup, rec, journaledWorktree);
      rec.workdir = rec.cwd;
      delete rec.worktree;
      rec.status = "starting";
      await sup.refresh(live); // listed and waitable before the socket serves
      void sup.run(live, sup.admission.acquire(taskId));
      return;
    case "keep_settled":
      if (alive) sup.watchRuntime(live, runtime);
      else live.childEnded = true;
      // A settled child that still runs is parked after idleChildMs again (the machine arms the timer).
      await sup.dispatch(live, { type: "restored", phase: plan.phase, childAlive: alive });
      if (!live.result) await sup.refresh(live);
      // The settled result stands, and its owner must have heard it: the outbox record follows the settle's records
      // by timing only, so a power cut can keep the result and lose the record. The delivery service queues the
      // cycle again unless the outbox has a delivery of that cycle (then nothing happens).
      if (live.result) sup.notifyStatus(live, live.result, { settled: true, recovered: true });
      return;
    case "failed_before_prompt":
      rec.error = {
        code: "AGENT_STALLED",
        message: "the child ended before it took its prompt while the daemon was down; spawn the task again",
      };
      live.childEnded = true;
      await sup.dispatch(live, {
        type: "restored",
        phase: { name: "awaiting_prompt", cycle: rec.cycle },
        childAlive: false,
      });
      await sup.dispatch(live, { type: "launch_failed", code: "AGENT_STALLED", message: rec.error.message });
      await live.chain;
      return;
    case "push_prompt": {
      const text =
        rec.cycle > 1 ? await followUpText(sup, taskId, rec.cycle) : ((await store.readPrompt(taskId)) ?? "");
      live.prompt = { cycle: rec.cycle, text };
      holdSlot(sup, taskId);
      sup.watchRuntime(live, runtime);
      await sup.dispatch(live, { type: "restored", phase: plan.phase, childAlive: alive });
      await sup.refresh(live);
      return;
    }
    case "relaunch_follow_up": {
      // The follow-up is durable (its text and the respond record); no prompt of it went out. A child the
      // relaunch may have left is ended first (a second pi on one session would fork it).
      if (rec.handle) await runtime.close(rec.handle).catch(() => undefined);
      live.prompt = { cycle: plan.cycle, text: await followUpText(sup, taskId, plan.cycle) };
      await sup.dispatch(live, {
        type: "restored",
        phase: { name: "queued", cycle: plan.cycle, parked: true },
        childAlive: false,
      });
      await sup.refresh(live);
      const slot = sup.admission.acquire(taskId);
      void slot.then(
        () => sup.dispatch(live, { type: "slot_granted" }),
        (e: unknown) => sup.dispatch(live, { type: "launch_failed", code: "CONCURRENCY_LIMIT", message: String(e) }),
      );
      return;
    }
    case "settle":
      holdSlot(sup, taskId);
      if (alive) sup.watchRuntime(live, runtime);
      await sup.dispatch(live, { type: "restored", phase: plan.phase, childAlive: alive });
      await sup.dispatch(live, { type: "settle_recovered", reason: plan.reason, journaled: plan.journaled });
      await live.chain;
      return;
    case "gone":
      holdSlot(sup, taskId);
      await sup.dispatch(live, { type: "restored", phase: plan.phase, childAlive: false });
      await sup.markGone(live);
      await live.chain;
      return;
    case "resume_running":
      holdSlot(sup, taskId);
      sup.watchRuntime(live, runtime);
      await sup.dispatch(live, { type: "restored", phase: plan.phase, childAlive: alive });
      await sup.refresh(live);
      return;
  }
}

function followUpText(sup: Supervisor, taskId: string, cycle: number): Promise<string> {
  return readFile(followUpPath(sup.deps.store.taskPaths(taskId).dir, cycle), "utf8").catch(() => "");
}

/** A running or pending cycle holds a slot again (over the cap if the config shrank meanwhile: it already runs). */
function holdSlot(sup: Supervisor, taskId: string): void {
  try {
    void sup.admission.acquire(taskId).catch(() => undefined);
  } catch {
    /* queue full: the cycle runs anyway */
  }
}

async function dropUnusedWorktree(sup: Supervisor, rec: TaskRecord, journaled?: string): Promise<void> {
  const repo = (await gitMaybe(rec.cwd, ["rev-parse", "--show-toplevel"]))?.trim();
  if (!repo) return;
  const path = rec.worktree?.path ?? journaled ?? worktreePathFor(sup.deps.home, repo, rec.taskId);
  await removeUnusedWorktree(repo, path, branchFor(rec.taskId));
}
