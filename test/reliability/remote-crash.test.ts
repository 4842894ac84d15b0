// The crash window of a remote task's result: the local daemon (its own process, DSH_HERDR_CRASH_AT, see
// src/daemon/ports/crash-hook.ts) SIGKILLs itself right after the relay durably recorded the remote's settled result
// (`status:completed`: result.json, task.json and the journal's settled status written, the owner's outbox not yet),
// or right after the outbox's durable `queued` record (`outbox:queued`: before any push or ack). The remote task
// runs on a second Unix user's daemon over real OpenSSH (test/helpers/sshd.ts); the owner is a real owner socket
// connection (kind owner) that spawned it with task.spawn {machine}. On restart exactly one delivery reaches it.
// And a kill right after a spawn's request is journaled (`remote_request`), before it goes over the link: the
// restarted daemon sends it (reconcile), the machine runs it once, one delivery.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startScriptedModel, type ScriptedModel } from "../../fixtures/scripted-model/server.js";
import { preparePiAgentDir } from "../../fixtures/scripted-model/agent-dir.js";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { connect, type DaemonClient } from "../../src/client/index.js";
import { connectOwner } from "../helpers/owner-client.js";
import { initRepo } from "../helpers/git.js";
import { sshdUnavailable, startSshd, type TestSshd } from "../helpers/sshd.js";
import { startDaemonProc, until, type DaemonProc } from "./proc-harness.js";

const skip = sshdUnavailable();
const OWNER = `0b1e${"c0ffee".repeat(2)}-remote`;

const SCRIPT: Script = {
  conversations: [
    {
      name: "remote",
      match: "MARK-REMOTE",
      steps: [{ toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "done there" } }] }],
    },
  ],
};

interface OwnerView {
  /** Delivery ids in the order the owner first saw them (it injects each once, as the extension does). */
  injected: string[];
  pushes: Map<string, number>;
  acked: Set<string>;
  pushedAfterAck: number;
}

describe("a remote result across a local daemon crash (real ssh, real pi there)", { skip, timeout: 600_000 }, () => {
  let sshd: TestSshd;
  let model: ScriptedModel;
  let dir: string;
  let remoteRepo: string;
  let modelName: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "dsh-remote-crash-"));
    model = await startScriptedModel({ script: SCRIPT, logPath: join(dir, "requests.jsonl") });
    sshd = await startSshd();
    modelName = preparePiAgentDir(dir, model.url).model;
    cpSync(join(dir, "agent"), sshd.user.piDir, { recursive: true });
    sshd.giveToUser(sshd.user.piDir);
    remoteRepo = initRepo(sshd.user.home, "repo");
    sshd.giveToUser(remoteRepo);
  });
  after(async () => {
    await sshd?.close();
    await model?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function attachOwner(home: string, view: OwnerView): Promise<DaemonClient> {
    // With the secret its first hello was issued, across restarts (as the owner extension keeps it in the session).
    const c = await connectOwner(home, OWNER, {
      timeoutMs: 120_000,
      pushes: {
        "owner.delivery": (d: { deliveryId: string }) => {
          view.pushes.set(d.deliveryId, (view.pushes.get(d.deliveryId) ?? 0) + 1);
          if (view.acked.has(d.deliveryId)) view.pushedAfterAck++;
          if (!view.injected.includes(d.deliveryId)) view.injected.push(d.deliveryId);
          void c.request("owner.ack", { deliveryIds: [d.deliveryId] }).then(
            () => view.acked.add(d.deliveryId),
            () => undefined,
          );
        },
      },
    });
    await c.request("owner.attach", {});
    return c;
  }

  const queuedFor = (home: string, taskId: string): string[] => {
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
  /** The daemon recorded the owner's ack (an ack it wrote before its SIGKILL was never confirmed to the owner). */
  const ackedInOutbox = (home: string, deliveryId: string): boolean => {
    const file = join(home, "owners", OWNER, "outbox.jsonl");
    return (
      existsSync(file) &&
      readFileSync(file, "utf8")
        .split("\n")
        .filter(Boolean)
        .some((l) => {
          const r = JSON.parse(l) as { deliveryId: string; state: string };
          return r.deliveryId === deliveryId && r.state === "acked";
        })
    );
  };
  const settledEvents = (home: string, taskId: string): number =>
    readFileSync(join(home, "tasks", taskId, "events.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; settled?: boolean })
      .filter((e) => e.type === "status" && e.settled === true).length;

  for (const [at, what] of [
    ["status:completed", "after the settled result is durable here, before the outbox has it"],
    ["outbox:queued", "after the outbox's durable queued record (its push may be out already, no ack confirmed)"],
  ] as const) {
    test(`SIGKILL ${what} (${at}): on restart exactly one delivery reaches the owner`, async () => {
      const home = join(dir, `home-${at.replace(/\W/g, "-")}`);
      const config = { runtime: "headless", machines: { builder: sshd.machine } };
      const view: OwnerView = { injected: [], pushes: new Map(), acked: new Set(), pushedAfterAck: 0 };
      let d: DaemonProc = await startDaemonProc(home, {}, { env: { DSH_HERDR_CRASH_AT: at }, config });
      let owner = await attachOwner(home, view);
      let taskId: string;
      try {
        ({ taskId } = await owner.request("task.spawn", {
          machine: "builder",
          cwd: remoteRepo,
          prompt: "MARK-REMOTE finish",
          model: modelName,
          runtime: "headless",
        }));
        assert.equal(await d.exited, "SIGKILL", `the planted kill point: ${d.stderr()}`);
        owner.close();
        assert.deepEqual(view.acked.size, 0, "no ack was confirmed before the crash");
        const id = `${taskId}-c1-completed`;
        const ackedBeforeRestart = ackedInOutbox(home, id);
        const pushesBeforeRestart = view.pushes.get(id) ?? 0;
        d = await startDaemonProc(home, {}, { config });
        owner = await attachOwner(home, view);
        // The push follows the queued record's write, so at outbox:queued it may have reached the owner before the
        // kill, and the owner's ack may be in the outbox with its reply lost: then it is not pushed again.
        await until(
          "the delivery injected and acked",
          () => (view.injected.includes(id) && (view.acked.has(id) || ackedInOutbox(home, id))) || undefined,
          60_000,
        );
        // Another round of the link (a fresh task.wait on the settled remote task) must not deliver it again.
        const cli = await connect(home, { kind: "cli", timeoutMs: 60_000 });
        const r = await cli.request("task.wait", {
          taskIds: [taskId],
          timeoutMs: 5000,
        });
        cli.close();
        assert.equal(r.results[0]!.status, "completed");
        await new Promise((res) => setTimeout(res, 1500));
        assert.deepEqual(view.injected, [id], "one delivery reached the owner");
        assert.equal(view.pushedAfterAck, 0, "never pushed again after its ack");
        if (ackedBeforeRestart)
          assert.equal(view.pushes.get(id), pushesBeforeRestart, "an ack recorded before the crash: not pushed again");
        assert.deepEqual(queuedFor(home, taskId), [id], "queued once in the outbox");
        assert.equal(settledEvents(home, taskId), 1, "the remote's result was recorded as settled once");
      } finally {
        owner.close();
        d.proc.kill("SIGTERM");
        await d.exited;
      }
    });
  }

  test("SIGKILL right after the spawn request is journaled, before it is sent (remote_request): on restart it is sent once, one task there, one delivery", async () => {
    const home = join(dir, "home-remote-request");
    const config = { runtime: "headless", machines: { builder: sshd.machine } };
    const view: OwnerView = { injected: [], pushes: new Map(), acked: new Set(), pushedAfterAck: 0 };
    const remoteTasks = () =>
      existsSync(join(sshd.user.dshHome, "tasks"))
        ? readdirSync(join(sshd.user.dshHome, "tasks")).filter((n) => /^t[0-9a-z]{11}$/.test(n))
        : [];
    const before = new Set(remoteTasks());
    let d: DaemonProc = await startDaemonProc(home, {}, { env: { DSH_HERDR_CRASH_AT: "remote_request" }, config });
    let owner = await attachOwner(home, view);
    try {
      // The daemon dies under the call: the owner hears only that the connection closed.
      await assert.rejects(
        owner.request("task.spawn", {
          machine: "builder",
          cwd: remoteRepo,
          prompt: "MARK-REMOTE finish",
          model: modelName,
          runtime: "headless",
        }),
      );
      assert.equal(await d.exited, "SIGKILL", `the planted kill point: ${d.stderr()}`);
      owner.close();
      const local = readdirSync(join(home, "tasks")).filter((n) => /^t[0-9a-z]{11}$/.test(n));
      assert.equal(local.length, 1, "the task was recorded here before its request");
      const taskId = local[0]!;
      d = await startDaemonProc(home, {}, { config });
      owner = await attachOwner(home, view);
      const id = `${taskId}-c1-completed`;
      await until(
        "the delivery injected and acked",
        () => (view.injected.includes(id) && view.acked.has(id)) || undefined,
        90_000,
      );
      const added = remoteTasks().filter((t) => !before.has(t));
      assert.equal(added.length, 1, `one task there: ${added.join(", ")}`);
      const rec = JSON.parse(readFileSync(join(home, "tasks", taskId, "task.json"), "utf8")) as {
        remote: { taskId: string };
      };
      assert.equal(rec.remote.taskId, added[0], "adopted here");
      assert.deepEqual(view.injected, [id], "one delivery reached the owner");
      assert.deepEqual(queuedFor(home, taskId), [id]);
      assert.equal(settledEvents(home, taskId), 1);
    } finally {
      owner.close();
      d.proc.kill("SIGTERM");
      await d.exited;
    }
  });
});
