// A daemon SIGKILLed while a worktree setup runs (its own process group, so nothing ends it with the daemon): the
// next daemon ends what is left of that setup (the processes of the group whose pid was journaled when it started,
// each checked by the task id in its environment) before it drops the worktree and runs the setup again. Before,
// the old setup ran on beside the new one, in the recreated worktree, for as long as it liked.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { pidAlive } from "../../src/client/liveness.js";
import { worktreePathFor } from "../../src/git/worktree.js";
import { killUnder, processesUnder } from "../helpers/procs.js";
import { cliClient, journal, makeRepo, startDaemonProc, startShared, until, type Shared } from "./proc-harness.js";

const SCRIPT: Script = {
  conversations: [
    {
      name: "after-setup",
      match: "MARK-SETUP-CRASH",
      steps: [
        { toolCalls: [{ name: "bash", arguments: { command: "cat gen.txt > seen.txt" } }] },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "setup ran again" } }] },
      ],
    },
  ],
};

let shared: Shared;
before(async () => {
  shared = await startShared(SCRIPT, "dsh-setupcrash-");
});
after(async () => {
  if (shared) killUnder(shared.dir);
  await shared?.close();
});

test("a daemon SIGKILLed during a worktree setup: the next daemon ends the old setup's processes, then runs the setup again and the task completes", async () => {
  const repo = makeRepo(shared.dir);
  const home = join(shared.dir, "home");
  const runs = join(shared.dir, "setup-runs.txt");
  const mayFinish = join(shared.dir, "setup-may-finish");
  const setup = `echo run >> ${runs}; if [ -f ${mayFinish} ]; then echo generated > gen.txt; exit 0; fi; sleep 600 & wait`;
  const config = { runtime: "headless", readinessTimeoutMs: 60_000 };
  const d1 = await startDaemonProc(home, shared.childEnv, { config });
  const cli1 = await cliClient(home);
  const { taskId } = await cli1.request("task.spawn", {
    model: shared.modelName,
    cwd: repo,
    prompt: "MARK-SETUP-CRASH go on",
    isolated: true,
    setup,
  });
  const worktree = worktreePathFor(home, repo, taskId);
  const old = await until(
    "the setup's shell and its sleep",
    () => {
      const pids = processesUnder(worktree);
      // Killed once the setup's start is on record (its group is what the next daemon ends), not in the few ms
      // between the setup's spawn and that record.
      const recorded = existsSync(runs) && journal(home, taskId).some((e) => e.type === "setup_started");
      return recorded && pids.length >= 2 ? pids : undefined;
    },
    30_000,
  );
  cli1.close();
  d1.proc.kill("SIGKILL");
  await d1.exited;
  assert.ok(old.every(pidAlive), "the setup outlived its SIGKILLed daemon (what the next daemon must end)");
  writeFileSync(mayFinish, "");
  const d2 = await startDaemonProc(home, shared.childEnv, { config });
  const cli2 = await cliClient(home);
  try {
    const w = await cli2.request("task.wait", { taskIds: [taskId], timeoutMs: 90_000 }, { timeoutMs: 95_000 });
    const r = w.results[0]!;
    assert.equal(r.status, "completed", JSON.stringify(r));
    assert.deepEqual(
      old.filter(pidAlive),
      [],
      "the first daemon's setup was ended by the next daemon, not left running beside the new one",
    );
    assert.equal(readFileSync(runs, "utf8"), "run\nrun\n", "the setup ran once more, in the next daemon");
    assert.equal(readFileSync(join(r.worktree!.path, "seen.txt"), "utf8"), "generated\n");
    const j = journal(home, taskId);
    assert.equal(j.filter((e) => e.type === "setup" && e.ok === true).length, 1, JSON.stringify(j));
    const ended = j.find((e) => e.type === "setup_ended");
    assert.deepEqual(
      [...((ended?.pids as number[] | undefined) ?? [])].sort(),
      [...old].sort(),
      `recovery journaled what it ended: ${JSON.stringify(ended)}`,
    );
    await cli2.request("task.close", { taskId, closePane: true });
  } finally {
    cli2.close();
    d2.proc.kill("SIGTERM");
    await d2.exited;
  }
});

test("a daemon killed between a worktree setup's spawn and its record: the next daemon still finds and ends that setup by its task's marks", async () => {
  const repo = makeRepo(shared.dir, "repo-unrecorded");
  const home = join(shared.dir, "home-unrecorded");
  const runs = join(shared.dir, "setup-runs-unrecorded.txt");
  const mayFinish = join(shared.dir, "setup-may-finish-unrecorded");
  const setup = `echo run >> ${runs}; if [ -f ${mayFinish} ]; then echo generated > gen.txt; exit 0; fi; sleep 600 & wait`;
  const config = { runtime: "headless", readinessTimeoutMs: 60_000 };
  // The daemon SIGKILLs itself as the setup is spawned, before its setup_started record (its group's pid) is written.
  const d1 = await startDaemonProc(home, shared.childEnv, { config, env: { DSH_HERDR_CRASH_AT: "setup_spawned" } });
  const cli1 = await cliClient(home);
  const { taskId } = await cli1.request("task.spawn", {
    model: shared.modelName,
    cwd: repo,
    prompt: "MARK-SETUP-CRASH go on",
    isolated: true,
    setup,
  });
  cli1.close();
  assert.equal(await d1.exited, "SIGKILL", "the daemon died at the setup's spawn");
  const worktree = worktreePathFor(home, repo, taskId);
  const old = await until(
    "the setup's shell and its sleep, left by the dead daemon",
    () => {
      const pids = processesUnder(worktree);
      return existsSync(runs) && pids.length >= 2 ? pids : undefined;
    },
    30_000,
  );
  assert.equal(
    journal(home, taskId).some((e) => e.type === "setup_started"),
    false,
    "no record names the setup's group: the window this test is about",
  );
  writeFileSync(mayFinish, "");
  const d2 = await startDaemonProc(home, shared.childEnv, { config });
  const cli2 = await cliClient(home);
  try {
    const w = await cli2.request("task.wait", { taskIds: [taskId], timeoutMs: 90_000 }, { timeoutMs: 95_000 });
    const r = w.results[0]!;
    assert.equal(r.status, "completed", JSON.stringify(r));
    assert.deepEqual(old.filter(pidAlive), [], "the unrecorded setup was ended by the next daemon, not left running");
    assert.equal(readFileSync(runs, "utf8"), "run\nrun\n", "the setup ran once more, in the next daemon");
    const ended = journal(home, taskId).find((e) => e.type === "setup_ended");
    assert.deepEqual(
      [...((ended?.pids as number[] | undefined) ?? [])].sort(),
      [...old].sort(),
      `recovery journaled what it ended: ${JSON.stringify(ended)}`,
    );
    await cli2.request("task.close", { taskId, closePane: true });
  } finally {
    cli2.close();
    d2.proc.kill("SIGTERM");
    await d2.exited;
  }
});
