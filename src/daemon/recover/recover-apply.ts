// Carrying out a recovery plan (src/core/lifecycle/recovery-plan.ts) for one task: what the crash left outside the
// machine is put right here (an orphaned setup, an unused worktree, a relaunch's leftover child, the prompt's text
// read back), and the rest is returned as steps for the runner (TaskRunner.restore): the slot the task holds again,
// the watches it needs, the `restored` event with the facts found, and the one lifecycle event that finishes what
// the crash interrupted. The runner alone feeds the events to the machine.
import { recordStatus } from "../../core/result/derive.js";
import { readFile } from "node:fs/promises";
import type { RecoveryPlan } from "../../core/lifecycle/recovery-plan.js";
import type { CycleEvent } from "../../core/lifecycle/task-cycle.js";
import type { Runtime } from "../../runtime/types.js";
import { branchFor, worktreePathFor, gitMaybe } from "../ports/git-port.js";
import { followUpPath } from "../task/record.js";
import type { RecoveryStep, TaskPort } from "../task/runner-types.js";
import { endOrphanedSetup } from "./recover-setup.js";

/** What planning a task's recovery reads and puts right: its record, its journal, and a few of its ports. */
export type RecoveringTask = TaskPort<"rec" | "journal", "store" | "git" | "env" | "slot" | "log">;

/**
 * The steps that take the task back under supervision, for TaskRunner.restore (in order). `alive`: the launched
 * child still runs; `journaledWorktree`: the worktree the pipeline journaled before a launch (task.json may predate
 * it).
 */
export async function recoverySteps(
  task: RecoveringTask,
  plan: RecoveryPlan,
  runtime: Runtime,
  alive: boolean,
  journaledWorktree: string | undefined,
  setupGroup?: number,
): Promise<RecoveryStep[]> {
  const { rec } = task;
  const restored = (found: Extract<CycleEvent, { type: "restored" }>["found"], childAlive: boolean): RecoveryStep => ({
    feed: { type: "restored", found, childAlive },
  });
  switch (plan.kind) {
    case "finish_close":
      return []; // recoverOne finished it before planning (the close needs no evidence)
    case "finish_abort":
      // The journal holds the interruption; its harvest is what the crash cut short. The cycle was in flight.
      return [
        { do: "resume" },
        restored({ found: "prompt_out", cycle: rec.cycle }, alive),
        { feed: plan.timeout ? { type: "timer_fired", kind: "timeout" } : { type: "abort" } },
        { do: "wait_chain" },
      ];
    case "start_again":
      // Never launched: no child ever saw this task. A worktree created before the crash held no work yet; it is
      // removed so the pipeline can create it afresh; a setup still running in it is ended first.
      // A setup runs only in a worktree; its group is unknown when the daemon died before recording it.
      if (setupGroup !== undefined || rec.isolated) await endOrphanedSetup(task, setupGroup);
      await dropUnusedWorktree(task, journaledWorktree);
      rec.workdir = rec.cwd;
      delete rec.worktree;
      recordStatus(rec, { kind: "start_again" });
      return [{ do: "refresh" } /* listed and waitable before the socket serves */, { do: "start" }];
    case "keep_settled":
      // A settled child that still runs is parked after idleChildMs again (the machine arms the timer). The settled
      // result stands, and its owner must have heard it: it is announced again (the delivery service queues the
      // cycle again unless the outbox has a delivery of it).
      return [
        alive ? { do: "watch_runtime", runtime } : { do: "child_ended" },
        restored(plan.found, alive),
        { do: "announce_settled" },
      ];
    case "failed_before_prompt":
      return [
        { do: "child_ended" },
        restored({ found: "prompt_pending", cycle: rec.cycle }, false),
        {
          feed: {
            type: "launch_failed",
            code: "AGENT_STALLED",
            message: "the child ended before it took its prompt while the daemon was down; spawn the task again",
          },
        },
        { do: "wait_chain" },
      ];
    case "push_prompt": {
      const text =
        rec.cycle > 1 ? await followUpText(task, rec.cycle) : ((await task.ports.store.readPrompt(rec.taskId)) ?? "");
      return [
        { do: "set_prompt", prompt: { cycle: rec.cycle, text } },
        { do: "hold_slot" },
        { do: "watch_runtime", runtime },
        restored(plan.found, alive),
        { do: "refresh" },
      ];
    }
    case "relaunch_follow_up": {
      // The follow-up is durable (its text and the respond record); no prompt of it went out. A child the
      // relaunch may have left is ended first (a second pi on one session would fork it).
      if (rec.handle) await runtime.close(rec.handle).catch(() => undefined);
      const text = await followUpText(task, plan.cycle);
      const { slot } = task.ports;
      return [
        { do: "set_prompt", prompt: { cycle: plan.cycle, text } },
        restored({ found: "follow_up", cycle: plan.cycle, childEnded: true }, false),
        { do: "refresh" },
        {
          feedWhen: () =>
            slot.acquire().then(
              (): CycleEvent => ({ type: "slot_granted" }),
              (e: unknown): CycleEvent => ({ type: "launch_failed", code: "CONCURRENCY_LIMIT", message: String(e) }),
            ),
        },
      ];
    }
    case "settle":
      return [
        { do: "hold_slot" },
        ...(alive ? [{ do: "watch_runtime", runtime } as const] : []),
        restored(plan.found, alive),
        { feed: { type: "settle_recovered", reason: plan.reason, journaled: plan.journaled } },
        { do: "wait_chain" },
      ];
    case "gone":
      return [{ do: "hold_slot" }, restored(plan.found, false), { do: "mark_gone" }, { do: "wait_chain" }];
    case "resume_running":
      return [{ do: "hold_slot" }, { do: "watch_runtime", runtime }, restored(plan.found, alive), { do: "refresh" }];
  }
}

function followUpText(task: RecoveringTask, cycle: number): Promise<string> {
  return readFile(followUpPath(task.ports.store.taskPaths(task.rec.taskId).dir, cycle), "utf8").catch(() => "");
}

async function dropUnusedWorktree(task: RecoveringTask, journaled?: string): Promise<void> {
  const { rec } = task;
  const repo = (await gitMaybe(rec.cwd, ["rev-parse", "--show-toplevel"]))?.trim();
  if (!repo) return;
  const path = rec.worktree?.path ?? journaled ?? worktreePathFor(task.ports.env.home, repo, rec.taskId);
  await task.ports.git.removeUnusedWorktree(repo, path, branchFor(rec.taskId));
}
