// Owner directories (owners/<id>/: its secret, its outbox) exist only for owners with tasks or deliveries: an owner
// that only attaches and leaves leaves no directory (13,000 attaches once left 13,003 dirs, 105 MB), an owner with an
// open task or an undelivered report keeps its own, and empty ones left by an older daemon are collected at start.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { connectOwner } from "../helpers/owner-client.js";
import { cliClient, makeRepo, startDaemonProc, startShared, until, type Shared } from "./proc-harness.js";

const SCRIPT: Script = {
  conversations: [
    {
      name: "owner-dirs",
      match: "MARK-OWNER-DIRS",
      steps: [
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "dirs ok" } }] },
        { text: "done" },
      ],
    },
  ],
};

let shared: Shared;
before(async () => {
  shared = await startShared(SCRIPT, "dsh-owner-dirs-");
});
after(async () => {
  await shared?.close();
});

const ownerDirs = (home: string) => readdirSync(join(home, "owners")).sort();

test("attaching alone leaves no owner directory; an owner with an open task and an undelivered report keeps its own; empty ones are collected at start", async () => {
  const home = join(shared.dir, "home");
  const repo = makeRepo(shared.dir);
  // Left by an older daemon: an owner that only ever attached (a secret, nothing else).
  mkdirSync(join(home, "owners", "sess-stale"), { recursive: true, mode: 0o700 });
  writeFileSync(join(home, "owners", "sess-stale", "secret.sha256"), "00\n", { mode: 0o600 });
  let d = await startDaemonProc(home, shared.childEnv);
  try {
    assert.deepEqual(ownerDirs(home), [], "the stale empty owner dir is collected at start");

    // Twenty owners say hello (each is issued a secret, so a directory for a moment), half of them attach, and leave.
    for (let i = 0; i < 20; i++) {
      const o = await connectOwner(home, `sess-attach-${i}`, { timeoutMs: 30_000 });
      assert.ok(o.hello.secret, "a first hello issues a secret");
      if (i % 2 === 0) await o.request("owner.attach", {});
      else await o.request("daemon.status", {});
      o.close();
    }
    await until(
      "no owner dir left by saying hello or attaching alone",
      () => (ownerDirs(home).length === 0 ? true : undefined),
      15_000,
    );

    // An owner with work: it spawns, its task settles while it is away (the report waits in its outbox).
    const owner = await connectOwner(home, "sess-worker", { timeoutMs: 120_000 });
    await owner.request("owner.attach", {});
    const { taskId } = await owner.request("task.spawn", {
      model: shared.modelName,
      cwd: repo,
      prompt: "MARK-OWNER-DIRS go",
    });
    owner.close();
    const cli = await cliClient(home);
    try {
      const w = await cli.request("task.wait", { taskIds: [taskId], timeoutMs: 90_000 }, { timeoutMs: 95_000 });
      assert.equal(w.results[0]?.status, "completed", JSON.stringify(w.results[0]));
      await until(
        "the delivery queued",
        () => (existsSync(join(home, "owners", "sess-worker", "outbox.jsonl")) ? true : undefined),
        30_000,
      );
      assert.deepEqual(ownerDirs(home), ["sess-worker"]);
      // Closed, but its report not yet delivered: the directory (and the secret owner.move needs) stays.
      await cli.request("task.close", { taskId, closePane: true });
    } finally {
      cli.close();
    }
    d.proc.kill("SIGTERM");
    assert.equal(await d.exited, "0", d.stderr());
    d = await startDaemonProc(home, shared.childEnv);
    assert.deepEqual(ownerDirs(home), ["sess-worker"], "an undelivered report keeps its owner's dir across a restart");

    // It comes back, takes its report and acks it, and leaves: nothing left to keep.
    // With the secret its first hello was issued (kept, as the extension keeps it in the session).
    const back = await connectOwner(home, "sess-worker", { timeoutMs: 30_000 });
    const got: string[] = [];
    back.onPush("owner.delivery", (p: { deliveryId: string }) => got.push(p.deliveryId));
    await back.request("owner.attach", {});
    await until("the delivery pushed", () => (got.length > 0 ? true : undefined), 15_000);
    await back.request("owner.ack", { deliveryIds: got });
    back.close();
    await until("the idle owner's dir collected", () => (ownerDirs(home).length === 0 ? true : undefined), 15_000);
  } finally {
    d.proc.kill("SIGTERM");
    await d.exited;
  }
});
