// Requests over a link are idempotent (issue 28, item 7): a filter on the link (test/helpers/link-filter.ts, run
// over real OpenSSH as the machine's command in front of the real `dsh-herdr daemon connect`) drops the reply to
// one task.spawn or task.respond and ends the ssh session. The request ran on the machine (a second Unix user's own
// daemon, real pi against the scripted model); its reply is lost. The relay sends it again with the same request id
// once the link is back: one task there and here, one cycle per follow-up, one delivery per settled cycle. With the
// link kept down, the owner is told what happened ("dropped while …; the request will be reconciled"), and a retry
// joins the journaled request instead of running another cycle.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
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
import { connect, type DaemonClient } from "../../src/client/index.js";
import type { DshError } from "../../src/core/errors.js";
import type { AgentResult } from "../../src/core/types.js";
import { runDaemon, type RunningDaemon } from "../../src/daemon/daemon.js";
import { initRepo } from "../helpers/git.js";
import { sshdUnavailable, startSshd, type TestSshd } from "../helpers/sshd.js";
import { until } from "../helpers/wait.js";

const skip = sshdUnavailable();
const OWNER = "owner-requests-1";

const SCRIPT: Script = {
  conversations: [
    {
      name: "worker",
      match: "MARK-WORKER",
      steps: [{ toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "worked once" } }] }],
    },
    {
      name: "blocked",
      match: "MARK-BLOCKED",
      steps: [
        {
          toolCalls: [
            { name: "crew_report", arguments: { outcome: "needs_input", report: "Half way.", needs: "Which color?" } },
          ],
        },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "Painted it" } }] },
      ],
    },
  ],
};

describe("requests over a link are idempotent (a filter drops one reply; real ssh, real pi)", {
  skip,
  timeout: 600_000,
}, () => {
  let sshd: TestSshd;
  let model: ScriptedModel;
  let dir: string;
  let home: string;
  let daemon: RunningDaemon;
  let cli: DaemonClient;
  let remoteRepo: string;
  const arm = (method: string) => {
    const f = join(sshd.user.home, `arm-${method}`);
    writeFileSync(f, "");
    sshd.giveToUser(f);
    return f;
  };
  const config = () => ({
    runtime: "headless" as const,
    machines: {
      builder: {
        ...sshd.machine,
        command: [
          sshd.command.split(" ")[0],
          join(sshd.appRoot, "dist", "test", "helpers", "link-filter.js"),
          "--drop",
          `task.spawn=${join(sshd.user.home, "arm-task.spawn")}`,
          "--drop",
          `task.respond=${join(sshd.user.home, "arm-task.respond")}`,
          "--",
          sshd.command,
        ].join(" "),
      },
    },
  });
  const remoteTasks = () =>
    existsSync(join(sshd.user.dshHome, "tasks"))
      ? readdirSync(join(sshd.user.dshHome, "tasks")).filter((n) => /^t[0-9a-z]{11}$/.test(n))
      : [];
  const remoteEvents = (remoteId: string) =>
    readFileSync(join(sshd.user.dshHome, "tasks", remoteId, "events.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; cycle?: number; requestId?: string });
  const deliveries = (taskId: string): string[] => {
    const file = join(home, "owners", OWNER, "outbox.jsonl");
    if (!existsSync(file)) return [];
    return readFileSync(file, "utf8")
      .trim()
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { deliveryId: string; state: string; taskId?: string })
      .filter((r) => r.state === "queued" && r.taskId === taskId)
      .map((r) => r.deliveryId);
  };
  const wait = async (taskId: string): Promise<AgentResult> => {
    const r = await cli.request("task.wait", { taskIds: [taskId], timeoutMs: 150_000 }, { timeoutMs: 160_000 });
    assert.equal(r.timedOut, false, JSON.stringify(r.results[0]));
    return r.results[0]!;
  };
  const spawn = (prompt: string) =>
    cli.request("task.spawn", {
      machine: "builder",
      cwd: remoteRepo,
      model: "scripted/scripted-model",
      runtime: "headless",
      owner: OWNER,
      prompt,
    });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "dsh-requests-"));
    model = await startScriptedModel({ script: SCRIPT, logPath: join(dir, "requests.jsonl") });
    // The filter sits in front of `daemon connect`; a socket forward would go around it, so this server refuses
    // forwarding and the link stays on the bridge (src/link/link-forward.ts).
    sshd = await startSshd({ streamLocalForwarding: false });
    preparePiAgentDir(join(dir, "pi"), model.url);
    cpSync(join(dir, "pi", "agent"), sshd.user.piDir, { recursive: true });
    sshd.giveToUser(sshd.user.piDir);
    remoteRepo = initRepo(sshd.user.home, "repo");
    sshd.giveToUser(remoteRepo);
    home = join(dir, "home");
    mkdirSync(home, { recursive: true, mode: 0o700 });
    daemon = await runDaemon(home, { config: config() });
    cli = await connect(home, { kind: "cli", timeoutMs: 120_000 });
  });
  after(async () => {
    cli?.close();
    await daemon?.stop();
    await sshd?.close();
    await model?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("the reply to task.spawn lost on the link: one task there and here, adopted; it settles once", async () => {
    // Up first (the spawn needs the link), then the filter is armed for the next spawn's reply.
    const warm = await spawn("MARK-WORKER warm up");
    await wait(warm.taskId);
    const before = new Set(remoteTasks());
    const armed = arm("task.spawn");
    const { taskId } = await spawn("MARK-WORKER once");
    assert.equal(existsSync(armed), false, "the filter dropped the spawn's reply");
    const r = await wait(taskId);
    assert.equal(r.status, "completed", JSON.stringify(r));
    const added = remoteTasks().filter((t) => !before.has(t));
    assert.equal(added.length, 1, `one task there: ${added.join(", ")}`);
    const rec = daemon.supervisor.tasks.get(taskId)!.rec;
    assert.equal(rec.remote!.taskId, added[0], "the task there was adopted here");
    const local = [...daemon.supervisor.tasks.values()].filter((l) => l.rec.remote?.taskId === added[0]);
    assert.equal(local.length, 1, "one task here");
    await until("the delivery", () => deliveries(taskId).length > 0 || undefined, 20_000);
    assert.deepEqual(deliveries(taskId), [`${taskId}-c1-completed`]);
  });

  test("the reply to task.respond lost, the link kept down: the owner is told it will be reconciled; a retry joins; one cycle", async () => {
    const { taskId } = await spawn("MARK-BLOCKED paint it");
    const first = await wait(taskId);
    assert.equal(first.status, "blocked", JSON.stringify(first));
    const remoteId = daemon.supervisor.tasks.get(taskId)!.rec.remote!.taskId;
    const armed = arm("task.respond");
    // Every reconnect fails until the key is back: the reconcile waits for the link.
    const keys = join(sshd.user.home, ".ssh", "authorized_keys");
    renameSync(keys, `${keys}.off`);
    try {
      await assert.rejects(cli.request("task.respond", { taskId, message: "blue" }), (e: DshError) => {
        assert.equal(e.code, "MACHINE_UNREACHABLE");
        assert.match(
          e.message,
          /the link to machine builder dropped while sending task t[0-9a-z]{11}'s follow-up \(cycle 2\)/,
        );
        assert.match(e.message, /the request will be reconciled/);
        assert.doesNotMatch(e.message, /not connected yet/);
        return true;
      });
      assert.equal(existsSync(armed), false, "the filter dropped the respond's reply");
      // The owner retries, as the issue saw: it joins the journaled request (the link is still down).
      await assert.rejects(cli.request("task.respond", { taskId, message: "blue, again" }), (e: DshError) => {
        assert.match(e.message, /will be reconciled/);
        return true;
      });
    } finally {
      renameSync(`${keys}.off`, keys);
    }
    const second = await wait(taskId);
    assert.equal(second.status, "completed", JSON.stringify(second));
    const responds = remoteEvents(remoteId).filter((e) => e.type === "respond");
    assert.equal(responds.length, 1, `one follow-up there: ${JSON.stringify(responds)}`);
    assert.equal(responds[0]!.cycle, 2);
    await until("two deliveries", () => deliveries(taskId).length >= 2 || undefined, 20_000);
    assert.deepEqual(deliveries(taskId), [`${taskId}-c1-needs_input`, `${taskId}-c2-completed`]);
    assert.equal(daemon.supervisor.tasks.get(taskId)!.rec.cycle, 2);
  });
});
