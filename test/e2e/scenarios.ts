// The runtime-independent scenarios of the e2e suite: each runtime's file runs them against its own daemon.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { readJournal, type Harness } from "./daemon-harness.js";
import type { AgentResult, RuntimeKind } from "../../src/core/types.js";
import type { DshError } from "../../src/core/errors.js";
import { connect } from "../../src/client/index.js";

export function defineRuntimeScenarios(
  h: () => Harness,
  runtime: RuntimeKind,
  kill: (h: Harness, taskId: string) => Promise<void>,
): void {
  test(`${runtime}: isolated worker writes a file and reports → completed with patch, usage, finalMessage`, async () => {
    const { taskId } = await h().spawn({
      prompt: "MARK-WORKER add a feature file",
      isolated: true,
      brief: "feature",
      runtime,
    });
    const r = await h().wait(taskId);
    assert.equal(r.status, "completed");
    assert.equal(r.nextAction, "none");
    assert.equal(r.role, "worker");
    assert.equal(r.taskId, taskId);
    assert.equal(r.brief, "feature");
    assert.equal(r.owner, "cli");
    // Herdr's own screen-based guess may lag the child's evidence by its quiet period.
    if (runtime === "herdr")
      assert.ok(
        ["idle", "done", "working"].includes(r.herdrStatus) && r.agent.paneId && r.agent.tabId && r.agent.workspaceId,
        JSON.stringify(r.agent),
      );
    else assert.equal(r.herdrStatus, "unknown");
    assert.equal(r.agent.kind, "pi");
    assert.equal(r.agent.model, h().modelName);
    assert.equal(r.agent.runtime, runtime);
    assert.equal(r.agent.name, `worker-model-${taskId.slice(-4)}`);
    assert.equal(r.summary, "Added feature.txt");
    // The cycle ends on crew_report (it terminates the loop): the report is the final message.
    assert.equal(r.finalMessage, "Added feature.txt\n\nOne new file.");
    assert.equal(r.result?.meta.status, "completed");
    assert.equal(r.result?.text, "Added feature.txt\n\nOne new file.");
    assert.equal(r.result?.path, join(h().home, "tasks", taskId, "result.md"));
    assert.deepEqual(r.usage, {
      assistant: 2,
      toolCalls: 2,
      outputTokens: 24,
      inputTokens: 210,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      cost: 0,
    });
    assert.equal(r.sessionPath, join(h().home, "tasks", taskId, "session.jsonl"));
    assert.ok(r.worktree && r.worktree.branch === `dsh/${taskId}` && r.worktree.repo === h().repo);
    assert.ok(existsSync(join(r.worktree.path, "feature.txt")));
    assert.ok(!existsSync(join(h().repo, "feature.txt")), "the source checkout is untouched");
    assert.ok(r.diff);
    assert.deepEqual([...r.diff.files, ...r.diff.untracked].includes("feature.txt"), true);
    assert.match(readFileSync(r.diff.patchPath, "utf8"), /\+feature done/);
    assert.equal(r.diff.truncated, false);
    assert.ok(r.timing.promptedAt! >= r.timing.createdAt && r.timing.settledAt! >= r.timing.promptedAt!);
    assert.equal(r.timing.elapsedMs, r.timing.settledAt! - r.timing.createdAt);
    assert.equal(r.warnings, undefined);
    const stored = JSON.parse(readFileSync(join(h().home, "tasks", taskId, "result.json"), "utf8")) as AgentResult;
    assert.deepEqual(stored, r);
    const types = readJournal(h(), taskId).map((e) => e.type);
    for (const t of ["created", "admitted", "worktree", "baseline", "launched", "prompt_sent", "report", "settle"])
      assert.ok(types.includes(t), `journal has ${t}: ${types}`);
  });

  test(`${runtime}: a reviewer that modifies a file → completed with the reviewer-changed-files warning`, async () => {
    const { taskId } = await h().spawn({ prompt: "MARK-REVIEWER check the readme", role: "reviewer", runtime });
    const r = await h().wait(taskId);
    assert.equal(r.status, "completed");
    assert.equal(r.role, "reviewer");
    assert.match(r.agent.name, /^review-/);
    assert.ok(r.diff?.files.includes("README.md"));
    assert.ok(
      r.warnings?.some((w) => /reviewer/i.test(w) && /README\.md/.test(w)),
      JSON.stringify(r.warnings),
    );
    assert.match(readFileSync(join(h().home, "tasks", taskId, "prompt.md"), "utf8"), /REVIEWER.*read-only/s);
  });

  test(`${runtime}: HTTP 500 with retries off → failed, inspect`, async () => {
    const { taskId } = await h().spawn({ prompt: "MARK-ERROR please", runtime });
    const r = await h().wait(taskId);
    assert.equal(r.status, "failed");
    assert.equal(r.nextAction, "inspect");
    assert.equal(r.finalMessage, undefined);
    // The failure explains itself: the owner's {status:"error"} delivery and the CLI card show this.
    assert.equal(r.error?.code, "AGENT_ERROR");
    assert.match(r.error!.message, /scripted upstream failure/);
  });

  test(`${runtime}: needs_input → blocked/answer; task.respond runs a second cycle to completed`, async () => {
    const { taskId } = await h().spawn({ prompt: "MARK-BLOCKED paint it", runtime });
    const r1 = await h().wait(taskId);
    assert.equal(r1.status, "blocked");
    assert.equal(r1.nextAction, "answer");
    assert.equal(r1.result?.meta.status, "blocked");
    assert.equal(r1.summary, "Which color: red or blue?");
    const resp = await h().cli.request("task.respond", { taskId, message: "blue please" });
    assert.equal(resp.cycle, 2);
    const r2 = await h().wait(taskId);
    const statuses = readJournal(h(), taskId)
      .filter((e) => e.type === "status")
      .map((e) => `${e.cycle}:${e.status}`);
    assert.deepEqual(
      statuses.filter((s) => s.startsWith("2:")),
      ["2:running", "2:completed"],
      JSON.stringify(readJournal(h(), taskId)),
    );
    assert.equal(r2.status, "completed");
    assert.equal(r2.summary, "Painted it blue");
    assert.equal(r2.finalMessage, "Painted it blue");
    assert.ok(r2.diff?.untracked.includes("color.txt") || r2.diff?.files.includes("color.txt"));
    assert.ok(existsSync(join(h().home, "tasks", taskId, "result.cycle1.md")));
    // respond is refused unless completed or blocked: close it, then try again
    await h().cli.request("task.close", { taskId });
    await assert.rejects(
      h().cli.request("task.respond", { taskId, message: "more" }),
      (e: DshError) => e.code === "TASK_NOT_FOUND",
    );
    if (runtime === "headless") {
      // No pane to keep: closing a headless task ends its child, so nothing is left running.
      const { handle } = JSON.parse(readFileSync(join(h().home, "tasks", taskId, "task.json"), "utf8")) as {
        handle: { pid: number };
      };
      const alive = () => {
        try {
          process.kill(handle.pid, 0);
          return true;
        } catch {
          return false;
        }
      };
      for (let i = 0; i < 100 && alive(); i++) await new Promise((r) => setTimeout(r, 100));
      assert.equal(alive(), false, `headless child ${handle.pid} still running after close`);
    }
  });

  test(`${runtime}: the child killed mid-run → gone (or failed as an abort nobody asked for), never completed`, async () => {
    const { taskId } = await h().spawn({ prompt: "MARK-SLOW take your time", runtime });
    await h().waitFor(taskId, (r) => r.status === "running", "running");
    await kill(h(), taskId);
    const r = await h().wait(taskId);
    // pi 0.73 just dies; pi 1.x, on a signal it handles, first writes an `aborted` ending and fires agent_end.
    const how = `${r.status}/${r.error?.code}`;
    assert.ok(
      how === "gone/PANE_GONE" || how === "failed/AGENT_ABORTED",
      `${how}: a child death explains itself (the owner gets it as an error delivery)`,
    );
    assert.equal(r.nextAction, "inspect");
  });

  test(`${runtime}: timeout → interrupted; abort → interrupted with the spec's abort result`, async () => {
    const t1 = await h().spawn({ prompt: "MARK-SLOW timeout me", runtime, timeoutMs: 2000 });
    const t2 = await h().spawn({ prompt: "MARK-SLOW abort me", runtime });
    const r1 = await h().wait(t1.taskId);
    assert.equal(r1.status, "interrupted");
    assert.equal(r1.error?.code, "TIMEOUT");
    assert.match(r1.error!.message, /timeoutMs/);
    const ab = await h().cli.request("task.abort", { taskIds: [t2.taskId, "tzzzzzzzzzzz"] });
    assert.deepEqual(ab, { aborted_ids: [t2.taskId], missing_ids: ["tzzzzzzzzzzz"], foreign_ids: [] });
    const r2 = await h().wait(t2.taskId);
    assert.equal(r2.status, "interrupted");
    assert.equal(r2.nextAction, "inspect");
    // an owner cannot abort another owner's task
    const t3 = await h().spawn({ prompt: "MARK-SLOW foreign", runtime, owner: "alice" });
    const bob = await connect(h().home, { kind: "owner", ownerId: "bob" });
    assert.deepEqual(await bob.request("task.abort", { taskIds: [t3.taskId] }), {
      aborted_ids: [],
      missing_ids: [],
      foreign_ids: [t3.taskId],
    });
    await assert.rejects(
      bob.request("task.respond", { taskId: t3.taskId, message: "x" }),
      (e: DshError) => e.code === "NOT_OWNER",
    );
    bob.close();
    const alice = await connect(h().home, { kind: "owner", ownerId: "alice" });
    assert.deepEqual(await alice.request("task.abort", { all: true }), {
      aborted_ids: [t3.taskId],
      missing_ids: [],
      foreign_ids: [],
    });
    alice.close();
  });
}
