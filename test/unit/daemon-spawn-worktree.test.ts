// The isolated spawn's worktree over a real daemon (runDaemon on a temp home, real Unix socket, a real git repo, a
// stub runtime recording launches): a task admitted at once gets its worktree (started while its record is written)
// branched from HEAD; a queued task gets none until its slot comes, and then branches from HEAD as it is then.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { connect } from "../../src/client/index.js";
import { runDaemon } from "../../src/daemon/daemon.js";
import { worktreePathFor } from "../../src/git/worktree.js";
import type { LaunchSpec } from "../../src/runtime/types.js";
import { commitAll, git, makeRepo, write } from "../helpers/git.js";
import { stubRuntime } from "../helpers/stub-runtime.js";
import { until } from "../helpers/wait.js";

test("an admitted isolated spawn branches from HEAD; a queued one has no worktree until admitted, then branches from the HEAD of then", async () => {
  const repo = makeRepo();
  const home = join(repo.base, "home");
  const launches: LaunchSpec[] = [];
  const d = await runDaemon(home, {
    logLevel: "silent",
    runtimeFactories: {
      headless: () =>
        stubRuntime({ launch: async (spec) => (launches.push(spec), { runtime: "headless", pid: process.pid }) }),
    },
    config: { readinessTimeoutMs: 60_000, maxParallelAgents: 1, maxQueuedAgents: 5 },
  });
  const cli = await connect(home, { kind: "cli" });
  try {
    const root = realpathSync(repo.dir);
    const spawn = () =>
      cli.request("task.spawn", {
        cwd: repo.dir,
        prompt: "p",
        model: "m/x",
        runtime: "headless",
        isolated: true,
      });
    // The baseline the pipeline journaled before the launch (task.json follows at the next harvest).
    const baselineHead = (taskId: string) =>
      readFileSync(join(home, "tasks", taskId, "events.jsonl"), "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { type: string; head?: string })
        .find((e) => e.type === "baseline")?.head;
    const branchExists = (taskId: string) => git(repo.dir, "branch", "--list", `dsh/${taskId}`).trim() !== "";
    const firstHead = git(repo.dir, "rev-parse", "HEAD").trim();

    const a = await spawn();
    assert.notEqual(a.queued, true);
    // Launched in its own worktree on branch dsh/<id>, at `head`, which is also the journaled baseline.
    const launchedAt = async (taskId: string, head: string, what: string) => {
      const l = await until(what, () => launches.find((x) => x.taskId === taskId), 30_000, 10);
      assert.equal(l.cwd, worktreePathFor(home, root, taskId));
      assert.equal(git(l.cwd, "rev-parse", "HEAD").trim(), head, `${what}: branched from ${head}`);
      assert.equal(git(l.cwd, "rev-parse", "--abbrev-ref", "HEAD").trim(), `dsh/${taskId}`);
      assert.equal(baselineHead(taskId), head);
    };
    await launchedAt(a.taskId, firstHead, "the first task's launch");

    const b = await spawn();
    assert.equal(b.queued, true, "one slot: the second spawn waits");
    // The repo moves on while b waits.
    write(repo.dir, "later.txt", "later\n");
    const laterHead = commitAll(repo.dir, "later");
    assert.equal(existsSync(worktreePathFor(home, root, b.taskId)), false, "no worktree while queued");
    assert.equal(branchExists(b.taskId), false, "no branch while queued");

    await cli.request("task.close", { taskId: a.taskId });
    await launchedAt(b.taskId, laterHead, "the queued task's launch (HEAD at admission)");
    await cli.request("task.close", { taskId: b.taskId });
  } finally {
    cli.close();
    await d.stop();
    repo.cleanup();
  }
});
