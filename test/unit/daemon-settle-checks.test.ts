// The settle hook settle.ts is to call (src/daemon/task/settle-checks.ts settleChecks), over a real daemon with a stub
// runtime and a real git repo: the task's checks run in its worktree and its landability is measured into the
// record, journaled; landFieldsOf then gives what assemble adds to the settled AgentResult (receipts, verified, the
// failing check's warning, landing). Also: task.check is refused while the cycle runs, and task.land is CLI-only.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { connect } from "../../src/client/index.js";
import { buildAgentResult } from "../../src/core/result/agent-result.js";
import { runDaemon } from "../../src/daemon/daemon.js";
import { landFieldsOf } from "../../src/daemon/methods/land-methods.js";
import { settleChecks } from "../../src/daemon/task/settle-checks.js";
import { commitAll, git, makeRepo, write } from "../helpers/git.js";
import { stubRuntime } from "../helpers/stub-runtime.js";
import { until } from "../helpers/wait.js";

test("settleChecks runs the checks and measures landability into the record; landFieldsOf feeds the result", async () => {
  const repo = makeRepo({ "a.txt": "a\n" });
  const home = join(repo.base, "home");
  let launched = "";
  const d = await runDaemon(home, {
    logLevel: "silent",
    runtimeFactories: {
      headless: () =>
        stubRuntime({ launch: async (spec) => ((launched = spec.cwd), { runtime: "headless", pid: process.pid }) }),
    },
    config: { readinessTimeoutMs: 60_000 },
  });
  const cli = await connect(home, { kind: "cli" });
  try {
    const { taskId } = await cli.request("task.spawn", {
      cwd: repo.dir,
      prompt: "p",
      model: "m/x",
      runtime: "headless",
      isolated: true,
      checks: ["test -f a.txt", "exit 5"],
      checkTimeoutMs: 5000,
    });
    await until("the launch", () => launched !== "", 30_000, 10);
    // The cycle is still in flight (the stub child never takes its prompt): on-demand checks wait for the child.
    await assert.rejects(cli.request("task.check", { taskId }), { code: "BAD_STATE" });
    const live = d.supervisor.tasks.get(taskId)!;
    assert.deepEqual(live.rec.checks, ["test -f a.txt", "exit 5"]);
    // What the child did: one uncommitted change; the base then moves on the same line.
    write(live.rec.workdir, "a.txt", "a\nchild\n");
    write(repo.dir, "a.txt", "a\nbase\n");
    commitAll(repo.dir, "base moves");

    await settleChecks(live);
    assert.deepEqual(
      live.rec.checkRun?.receipts.map((r) => [r.command, r.exitCode, r.on]),
      [
        ["test -f a.txt", 0, "worktree"],
        ["exit 5", 5, "worktree"],
      ],
    );
    assert.deepEqual(
      { ...live.rec.landing, checkedAt: 0 },
      {
        baseBranch: "main",
        baseHead: git(repo.dir, "rev-parse", "HEAD").trim(),
        clean: false,
        conflicts: ["a.txt"],
        checkedAt: 0,
      },
    );
    const fields = landFieldsOf(live.rec);
    const r = buildAgentResult({
      taskId,
      role: "worker",
      agent: { name: live.rec.name, kind: "pi", model: "m/x", thinking: "off" },
      timing: { createdAt: 1 },
      raw: { external: false, runtime: "idle", sessionError: false, resultStatus: "completed" },
      sessionChangedAfterPrompt: false,
      settled: true,
      ...fields,
    });
    assert.equal(r.verified, false);
    assert.equal(r.landing?.clean, false);
    assert.ok(
      r.warnings?.some((w) => w.startsWith("check `exit 5` failed (exit 5)")),
      String(r.warnings),
    );
    const journal = readFileSync(join(home, "tasks", taskId, "events.jsonl"), "utf8");
    assert.match(journal, /"type":"checks"/);
    assert.match(journal, /"type":"landability"/);
    // A follow-up cycle's result does not carry the earlier cycle's receipts.
    assert.equal(landFieldsOf({ ...live.rec, cycle: live.rec.cycle + 1 }).checks, undefined);

    const owner = await connect(home, { kind: "owner", ownerId: "sess-owner" });
    try {
      await assert.rejects(owner.request("task.land", { taskIds: [taskId] }), { code: "FORBIDDEN" });
    } finally {
      owner.close();
    }
  } finally {
    cli.close();
    await d.stop();
    repo.cleanup();
  }
});
