// The relay over real OpenSSH: a local in-process daemon spawns tasks with `machine: builder` (a real sshd on
// 127.0.0.1 letting a second Unix user in); that user's own daemon (started by `daemon connect`) runs real pi
// against the scripted model. The local owner gets one AgentResult and one delivery per settled cycle, as if local.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { verifyTaskDir } from "../../src/cli/commands/verify.js";
import { describeDifference } from "../../src/core/lifecycle/verify.js";
import { execFileSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startScriptedModel, type ScriptedModel } from "../../fixtures/scripted-model/server.js";
import { preparePiAgentDir } from "../../fixtures/scripted-model/agent-dir.js";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { runDaemon, type RunningDaemon } from "../../src/daemon/daemon.js";
import { connect, type DaemonClient } from "../../src/client/index.js";
import type { DshError } from "../../src/core/errors.js";
import type { AgentResult } from "../../src/core/types.js";
import { ownerLabel } from "../../src/daemon/delivery/owner-view.js";
import { initRepo } from "../helpers/git.js";
import { freePort, sshdUnavailable, startSshd, uidOf, type TestSshd } from "../helpers/sshd.js";
import { waitFor } from "../helpers/tmux.js";
import { dshBin } from "../helpers/cli.js";
import { sleep } from "../helpers/wait.js";

const skip = sshdUnavailable();
const OWNER = "owner-relay-1";

const SCRIPT: Script = {
  conversations: [
    {
      name: "worker",
      match: "MARK-WORKER",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "feature.txt", content: "feature done\n" } }] },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "Added feature.txt" } }] },
      ],
    },
    // Slow enough that the test cuts the link (or kills the remote daemon) while pi waits for the model.
    {
      name: "slow",
      match: "MARK-SLOWREPORT",
      steps: [
        {
          toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "slow one done" } }],
          delayMs: 8000,
        },
      ],
    },
    {
      name: "blocked",
      match: "MARK-BLOCKED",
      steps: [
        {
          toolCalls: [
            {
              name: "crew_report",
              arguments: { outcome: "needs_input", report: "Half way.", needs: "Which color: red or blue?" },
            },
          ],
        },
        { toolCalls: [{ name: "write", arguments: { path: "color.txt", content: "blue\n" } }] },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "Painted it blue" } }] },
      ],
    },
  ],
};

/** Queued deliveries for one task in the local owner's outbox. */
function deliveriesOf(home: string, taskId: string): string[] {
  const file = join(home, "owners", OWNER, "outbox.jsonl");
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { deliveryId: string; state: string; taskId?: string })
    .filter((r) => r.state === "queued" && r.taskId === taskId)
    .map((r) => r.deliveryId);
}

function settledStatuses(home: string, taskId: string): number {
  const file = join(home, "tasks", taskId, "events.jsonl");
  return readFileSync(file, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { type: string; settled?: boolean })
    .filter((e) => e.type === "status" && e.settled === true).length;
}

/**
 * The remote's settled cycle went through the lifecycle machine here: one settle record per cycle (the remote's
 * verdict as its reason) before its settled status record, and result.json agrees with the task dir (verify).
 */
function settledThroughMachine(home: string, taskId: string): void {
  const events = readFileSync(join(home, "tasks", taskId, "events.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { type: string; cycle?: number; settled?: boolean; reason?: { kind?: string } });
  const settles = events.filter((e) => e.type === "settle");
  const settled = events.filter((e) => e.type === "status" && e.settled === true);
  assert.equal(settles.length, settled.length, JSON.stringify(events.map((e) => e.type)));
  assert.ok(
    settles.every((e) => e.reason?.kind === "remote"),
    JSON.stringify(settles),
  );
  for (const st of settled)
    assert.ok(
      events.indexOf(settles.find((x) => x.cycle === st.cycle)!) < events.indexOf(st),
      "the settle record comes first",
    );
  const v = verifyTaskDir(join(home, "tasks", taskId), taskId);
  assert.deepEqual(v.differences.map(describeDifference), [], "verify agrees");
}

describe("tasks on another machine through the relay (real ssh, real pi)", { skip, timeout: 600_000 }, () => {
  let sshd: TestSshd;
  let model: ScriptedModel;
  let dir: string;
  let home: string;
  let daemon: RunningDaemon;
  let cli: DaemonClient;
  let remoteRepo: string;
  let deadPort: number;
  let workerId: string;
  const localConfig = () => ({
    runtime: "headless" as const,
    machines: {
      builder: sshd.machine,
      nowhere: { ssh: "nobody@127.0.0.1", port: deadPort, identity: sshd.clientKey, knownHosts: sshd.knownHosts },
    },
  });

  const spawn = (params: Record<string, unknown>) =>
    cli.request("task.spawn", {
      machine: "builder",
      cwd: remoteRepo,
      model: "scripted/scripted-model",
      runtime: "headless",
      owner: OWNER,
      ...params,
    });
  const wait = async (taskId: string): Promise<AgentResult> => {
    const r = await cli.request("task.wait", { taskIds: [taskId], timeoutMs: 150_000 }, { timeoutMs: 160_000 });
    assert.equal(r.timedOut, false, `task ${taskId} did not settle: ${JSON.stringify(r.results[0])}`);
    return r.results[0]!;
  };
  const cliRun = (args: string[]) =>
    execFileSync(process.execPath, [dshBin, ...args], {
      encoding: "utf8",
      env: { ...process.env, DSH_HERDR_HOME: home },
    });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "dsh-relay-"));
    model = await startScriptedModel({ script: SCRIPT, logPath: join(dir, "requests.jsonl") });
    sshd = await startSshd();
    // The second user's pi agent dir points at the scripted model (on 127.0.0.1, reachable by any user).
    const agent = preparePiAgentDir(join(dir, "pi"), model.url);
    cpSync(join(dir, "pi", "agent"), sshd.user.piDir, { recursive: true });
    remoteRepo = initRepo(sshd.user.home, "repo");
    sshd.giveToUser(sshd.user.piDir);
    sshd.giveToUser(remoteRepo);
    assert.equal(agent.model, "scripted/scripted-model");
    deadPort = await freePort();
    home = join(dir, "home-dsh");
    // The machines in config.json too, as `machine add` leaves them: the CLI's `logs` and `open` read them there.
    mkdirSync(home, { recursive: true, mode: 0o700 });
    writeFileSync(join(home, "config.json"), JSON.stringify({ machines: localConfig().machines }), { mode: 0o600 });
    daemon = await runDaemon(home, { config: localConfig() });
    cli = await connect(home, { kind: "cli", timeoutMs: 120_000 });
  });
  after(async () => {
    cli?.close();
    await daemon?.stop();
    await sshd?.close();
    await model?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("an unknown and an unreachable machine are named errors at spawn", async () => {
    await assert.rejects(spawn({ machine: "atlantis", prompt: "MARK-WORKER" }), (e: DshError) => {
      assert.equal(e.code, "MACHINE_UNKNOWN");
      assert.match(e.message, /atlantis/);
      assert.match(e.message, /machine add/);
      return true;
    });
    await assert.rejects(spawn({ machine: "nowhere", prompt: "MARK-WORKER" }), (e: DshError) => {
      assert.equal(e.code, "MACHINE_UNREACHABLE");
      assert.match(e.message, /Connection refused/, "ssh's own line");
      return true;
    });
    assert.equal(daemon.supervisor.tasks.size, 0, "no task was created for either");
  });

  test("an isolated remote worker completes with its diff; show and diff work here; one delivery", async () => {
    // Setup and checks go with the spawn and run there, in the remote worktree.
    const { taskId } = await spawn({
      prompt: "MARK-WORKER add the feature",
      isolated: true,
      brief: "remote worker",
      setup: "echo made > setup-made.txt",
      checks: ["test -f feature.txt"],
    });
    workerId = taskId;
    const r = await wait(taskId);
    assert.equal(r.status, "completed", JSON.stringify(r));
    assert.ok(existsSync(join(r.worktree!.path, "setup-made.txt")), "the setup ran in the remote worktree");
    assert.deepEqual(
      r.checks?.map((c) => [c.command, c.exitCode]),
      [["test -f feature.txt", 0]],
    );
    assert.equal(r.verified, true);
    assert.equal(r.taskId, taskId);
    assert.equal(r.agent.machine, "builder");
    assert.equal(r.owner, ownerLabel(OWNER), "the CLI sees the owner's label");
    const rec = daemon.supervisor.tasks.get(taskId)!.rec;
    assert.ok(rec.remote && rec.remote.label === "builder");
    // The worktree and the session are the remote's: under the second user's home.
    assert.ok(r.worktree?.path.startsWith(sshd.user.home), `remote worktree: ${r.worktree?.path}`);
    assert.ok(r.sessionPath?.startsWith(sshd.user.home), `remote session: ${r.sessionPath}`);
    assert.equal(uidOf(process.pid) !== undefined, true);
    assert.ok(
      !existsSync(join(home, "worktrees")) || readdirSync(join(home, "worktrees")).length === 0,
      "no local worktree",
    );
    // The patch was copied over the link: diff.patchPath names the local copy, never a path of the other machine.
    assert.equal(r.diff?.patchPath, join(home, "tasks", taskId, "diff.patch"));
    // The local task dir holds the copies.
    const localPatch = readFileSync(join(home, "tasks", taskId, "diff.patch"), "utf8");
    assert.match(localPatch, /feature\.txt/);
    assert.equal(
      (JSON.parse(readFileSync(join(home, "tasks", taskId, "result.json"), "utf8")) as AgentResult).status,
      "completed",
    );
    // The CLI, reading this home only.
    const shown = JSON.parse(cliRun(["show", taskId, "--json"])) as AgentResult;
    assert.equal(shown.agent.machine, "builder");
    const diff = JSON.parse(cliRun(["diff", taskId, "--json"])) as { patchPath: string; patch: string };
    assert.equal(diff.patchPath, join(home, "tasks", taskId, "diff.patch"));
    assert.match(diff.patch, /\+feature done/);
    await waitFor("the delivery", async () => deliveriesOf(home, taskId).length > 0, 20_000);
    assert.deepEqual(deliveriesOf(home, taskId), [`${taskId}-c1-completed`]);
    // logs: read on the other machine by its own `logs`, over ssh with the machine's entry; the same output.
    const remoteId = rec.remote.taskId;
    const there = JSON.parse(sshd.runAs([...sshd.command.split(" "), "logs", remoteId, "--json"])) as {
      runtime: string;
      output: string;
    };
    assert.ok(there.output.length > 0, "the remote child printed something");
    const logs = JSON.parse(cliRun(["logs", taskId, "--json"])) as Record<string, unknown>;
    assert.deepEqual(logs, {
      taskId,
      machine: "builder",
      remoteTaskId: remoteId,
      runtime: there.runtime,
      output: there.output,
    });
    assert.equal(
      cliRun(["logs", taskId]).trimEnd(),
      there.output
        .split("\n")
        .map((l) => l.trimEnd())
        .join("\n")
        .trimEnd(),
    );
    // open: a headless child there has no pane; the error says where it runs and what to use instead.
    assert.throws(
      () => cliRun(["open", taskId]),
      (e: { stderr?: string }) =>
        /runs headless on machine builder/.test(String(e.stderr)) && /dsh-herdr logs/.test(String(e.stderr)),
    );
  });

  test("the ssh process killed mid-task: the task settles once, one delivery", async () => {
    const { taskId } = await spawn({ prompt: "MARK-SLOWREPORT go" });
    const link = daemon.relay.linkOf("builder")!;
    await waitFor(
      "the remote cycle running",
      async () => {
        const r = await cli.request("task.get", { taskId });
        return r.status === "working" || r.status === "running";
      },
      60_000,
      200,
    );
    const sshPid = link.sshPid!;
    process.kill(sshPid, "SIGKILL");
    // Meanwhile the task keeps its last status with a warning (or the link is already back).
    await waitFor("the link back on a new ssh", async () => link.state === "up" && link.sshPid !== sshPid, 60_000, 100);
    const r = await wait(taskId);
    assert.equal(r.status, "completed", JSON.stringify(r));
    assert.ok(
      !(r.warnings ?? []).some((w) => w.includes("unreachable since")),
      "the outage warning left with the outage",
    );
    await waitFor("the delivery", async () => deliveriesOf(home, taskId).length > 0, 20_000);
    // A few more rounds over the new link must not deliver it again.
    await sleep(1500);
    assert.deepEqual(deliveriesOf(home, taskId), [`${taskId}-c1-completed`]);
    assert.equal(settledStatuses(home, taskId), 1, "settled once");
    settledThroughMachine(home, taskId);
  });

  test("the machine unreachable mid-task: the task keeps its last status with a warning; back up, it settles once", async () => {
    const { taskId } = await spawn({ prompt: "MARK-SLOWREPORT through an outage" });
    const link = daemon.relay.linkOf("builder")!;
    await waitFor(
      "the remote cycle running",
      async () => {
        const r = await cli.request("task.get", { taskId });
        return r.status === "working" || r.status === "running";
      },
      60_000,
      200,
    );
    // Every reconnect attempt now fails (Permission denied): the outage lasts until the key is back.
    const keys = join(sshd.user.home, ".ssh", "authorized_keys");
    renameSync(keys, `${keys}.off`);
    try {
      process.kill(link.sshPid!, "SIGKILL");
      const during = await waitFor(
        "the unreachable warning",
        async () => {
          const r = await cli.request("task.get", { taskId });
          return (r.warnings ?? []).some((w) => w.startsWith("machine builder unreachable since ")) ? r : undefined;
        },
        30_000,
        100,
      );
      assert.ok(during.status === "working" || during.status === "running", `kept its last status: ${during.status}`);
      const stored = JSON.parse(readFileSync(join(home, "tasks", taskId, "result.json"), "utf8")) as AgentResult;
      assert.ok(
        (stored.warnings ?? []).some((w) => w.includes("unreachable since")),
        "the warning is in result.json too",
      );
    } finally {
      renameSync(`${keys}.off`, keys);
    }
    const r = await wait(taskId);
    assert.equal(r.status, "completed", JSON.stringify(r));
    assert.ok(!(r.warnings ?? []).some((w) => w.includes("unreachable since")), "the warning left with the outage");
    await waitFor("the delivery", async () => deliveriesOf(home, taskId).length > 0, 20_000);
    assert.deepEqual(deliveriesOf(home, taskId), [`${taskId}-c1-completed`]);
    assert.equal(settledStatuses(home, taskId), 1, "settled once");
    settledThroughMachine(home, taskId);
  });

  test("the remote daemon SIGKILLed mid-task: the link restarts it, the task settles once", async () => {
    const { taskId } = await spawn({ prompt: "MARK-SLOWREPORT again" });
    const link = daemon.relay.linkOf("builder")!;
    await waitFor(
      "the remote cycle running",
      async () => {
        const r = await cli.request("task.get", { taskId });
        return r.status === "working" || r.status === "running";
      },
      60_000,
      200,
    );
    const oldPid = link.hello!.pid;
    process.kill(oldPid, "SIGKILL");
    await waitFor("a new remote daemon", async () => link.state === "up" && link.hello!.pid !== oldPid, 90_000, 100);
    const r = await wait(taskId);
    assert.ok(["completed", "failed", "needs_input"].includes(r.status), JSON.stringify(r));
    await waitFor("the delivery", async () => deliveriesOf(home, taskId).length > 0, 20_000);
    await sleep(1500);
    assert.equal(deliveriesOf(home, taskId).length, 1, `one delivery: ${deliveriesOf(home, taskId).join(", ")}`);
    assert.equal(settledStatuses(home, taskId), 1, "settled once");
    settledThroughMachine(home, taskId);
  });

  test("respond and close on a remote task go to its machine; spend caps go with spawn and respond", async () => {
    const { taskId } = await spawn({ prompt: "MARK-BLOCKED paint it", maxTurns: 50 });
    const first = await wait(taskId);
    assert.equal(first.status, "blocked", JSON.stringify(first));
    const remoteCaps = () =>
      (
        JSON.parse(
          readFileSync(
            join(sshd.user.dshHome, "tasks", daemon.supervisor.tasks.get(taskId)!.rec.remote!.taskId, "task.json"),
            "utf8",
          ),
        ) as { caps?: { turns?: { limit: number; step: number } } }
      ).caps;
    // The cap runs where the child runs: a cap dropped on the way would let the task spend without one.
    assert.deepEqual(remoteCaps(), { turns: { limit: 50, step: 50 } });
    const reply = await cli.request("task.respond", { taskId, message: "blue", maxTurns: 70 });
    assert.equal(reply.cycle, 2);
    assert.equal(remoteCaps()?.turns?.step, 70, "the respond's raise reached the machine");
    const second = await wait(taskId);
    assert.equal(second.status, "completed", JSON.stringify(second));
    await waitFor("two deliveries", async () => deliveriesOf(home, taskId).length >= 2, 20_000);
    assert.deepEqual(deliveriesOf(home, taskId), [`${taskId}-c1-needs_input`, `${taskId}-c2-completed`]);
    const remoteId = daemon.supervisor.tasks.get(taskId)!.rec.remote!.taskId;
    const closed = await cli.request("task.close", { taskId });
    assert.equal(closed.status, "closed");
    assert.equal(daemon.supervisor.tasks.has(taskId), false);
    // Closed there too: the remote's own record says so.
    const remoteResult = JSON.parse(
      readFileSync(join(sshd.user.dshHome, "tasks", remoteId, "result.json"), "utf8"),
    ) as AgentResult;
    assert.equal(remoteResult.status, "closed");
    assert.equal((JSON.parse(cliRun(["show", taskId, "--json"])) as AgentResult).status, "closed");
    // Closed, its worktree is still a path on that machine: land and check are refused here by name.
    for (const method of ["task.land", "task.check"] as const)
      await assert.rejects(
        cli.request(method, method === "task.land" ? { taskIds: [taskId] } : { taskId }),
        (e: Error & { code?: string }) =>
          e.code === "BAD_STATE" && /runs on machine builder; run this there/.test(e.message),
        method,
      );
  });

  test("the local daemon stopped mid-task: on restart it reattaches in the background; settles once, nothing delivered twice", async () => {
    const { taskId } = await spawn({ prompt: "MARK-SLOWREPORT across a restart" });
    const remoteId = daemon.supervisor.tasks.get(taskId)!.rec.remote!.taskId;
    await waitFor(
      "the remote cycle running",
      async () => {
        const r = await cli.request("task.get", { taskId });
        return r.status === "working" || r.status === "running";
      },
      60_000,
      200,
    );
    cli.close();
    await daemon.stop();
    // The remote cycle ends while nobody here listens.
    const remoteResult = join(sshd.user.dshHome, "tasks", remoteId, "result.json");
    await waitFor(
      "the remote settle",
      async () => (JSON.parse(readFileSync(remoteResult, "utf8")) as AgentResult).status === "completed",
      60_000,
      200,
    );
    daemon = await runDaemon(home, { config: localConfig() });
    cli = await connect(home, { kind: "cli", timeoutMs: 120_000 });
    const r = await wait(taskId);
    assert.equal(r.status, "completed", JSON.stringify(r));
    assert.equal(r.agent.machine, "builder");
    await waitFor("the delivery", async () => deliveriesOf(home, taskId).length > 0, 20_000);
    assert.deepEqual(deliveriesOf(home, taskId), [`${taskId}-c1-completed`]);
    assert.equal(settledStatuses(home, taskId), 1, "settled once");
    settledThroughMachine(home, taskId);
    // The worker settled before the restart: recovery fed it to delivery again, the delivery id dropped the repeat.
    assert.deepEqual(deliveriesOf(home, workerId), [`${workerId}-c1-completed`]);
    assert.equal((await cli.request("task.get", { taskId: workerId })).status, "completed");
  });

  test("gc of a closed remote task is that machine's own gc, over ssh; nothing of it is judged here", async () => {
    const rec = daemon.supervisor.tasks.get(workerId)!.rec;
    const remoteId = rec.remote!.taskId;
    const worktree = (await cli.request("task.get", { taskId: workerId })).worktree!.path;
    assert.ok(existsSync(worktree), "the remote worktree is there before gc");
    await cli.request("task.close", { taskId: workerId });
    type Row = { taskId: string; machine?: string; action: string; path: string | null; done?: boolean };
    const dry = JSON.parse(cliRun(["gc", "--json"])) as { dryRun: boolean; plan: Row[] };
    assert.equal(dry.dryRun, true);
    assert.ok(
      !dry.plan.some((p) => p.taskId === workerId),
      "the local id of a relayed task is never in the local plan",
    );
    const there = dry.plan.find((p) => p.taskId === remoteId);
    assert.ok(there, JSON.stringify(dry.plan));
    assert.equal(there.machine, "builder");
    assert.equal(there.action, "remove");
    assert.equal(there.path, worktree);
    assert.ok(existsSync(worktree), "a dry run removes nothing");
    const done = JSON.parse(cliRun(["gc", "--yes", "--json"])) as { plan: Row[] };
    const removed = done.plan.find((p) => p.taskId === remoteId);
    assert.equal(removed?.done, true, JSON.stringify(done.plan));
    assert.equal(existsSync(worktree), false, "removed on the machine");
  });
});
