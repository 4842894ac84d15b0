// Owner moves need proof (issue 13 §2), through a real daemon process with a real pi child: owner A's first hello
// is issued A's secret (once; a later hello without it is NOT_OWNER); another session moving A's open task without it, or with a wrong one, is NOT_OWNER and
// moves nothing; a session presenting A's secret (as the owner extension does after /fork) moves it.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { connect, type DaemonClient } from "../../src/client/index.js";
import type { DshError } from "../../src/core/errors.js";
import { ownerLabel } from "../../src/daemon/delivery/owner-view.js";
import { cliClient, makeRepo, startDaemonProc, startShared, until, type Shared } from "./proc-harness.js";
import { killUnder } from "../helpers/procs.js";

const SCRIPT: Script = {
  conversations: [{ name: "slow", match: "MARK-MOVE", steps: [{ text: "still thinking", delayMs: 120_000 }] }],
};

let shared: Shared;
before(async () => {
  shared = await startShared(SCRIPT, "dsh-move-");
});
after(async () => {
  // Backstop: children a failed test left running (only processes inside its own temp dir).
  if (shared) killUnder(shared.dir);
  await shared?.close();
});

const notOwner = (e: DshError) => e.code === "NOT_OWNER" && /secret/.test(e.message);

test("owner.move without the old owner's secret is NOT_OWNER and moves nothing; with it, the open task moves", async () => {
  const repo = makeRepo(shared.dir);
  const home = join(shared.dir, "home");
  const d = await startDaemonProc(home, shared.childEnv);
  const idA = "0a0a0a0a-owner-a";
  const clients: DaemonClient[] = [];
  const owner = async (ownerId: string, secret?: string) => {
    const c = await connect(home, { kind: "owner", ownerId, timeoutMs: 60_000, ...(secret ? { secret } : {}) });
    clients.push(c);
    return c;
  };
  try {
    const a = await owner(idA);
    const first = { secret: a.hello.secret };
    await a.request("owner.attach", {});
    // A second hello as A without A's secret (anyone) is refused; with it (A's own extension) it is A, issued nothing.
    await assert.rejects(owner(idA), (e: DshError) => e.code === "NOT_OWNER" && /secret/.test(e.message));
    const again = await owner(idA, first.secret);
    assert.equal(again.hello.secret, undefined, "a later hello is issued nothing");
    assert.equal((await again.request("owner.attach", {})).secret, undefined);

    const cli = await cliClient(home);
    clients.push(cli);
    const { taskId } = await a.request("task.spawn", {
      model: shared.modelName,
      cwd: repo,
      prompt: "MARK-MOVE wait",
      isolated: true,
    });
    await until(
      "A's task running",
      async () => ((await cli.request("task.get", { taskId })).status === "running" ? true : undefined),
      60_000,
    );

    const thief = await owner("0b0b0b0b-owner-b");
    await assert.rejects(thief.request("owner.move", { fromOwnerId: idA }), notOwner);
    await assert.rejects(thief.request("owner.move", { fromOwnerId: idA, secret: "0".repeat(64) }), notOwner);
    // An owner that was never issued a secret cannot be moved either.
    await assert.rejects(
      thief.request("owner.move", { fromOwnerId: "never-attached", secret: first.secret }),
      notOwner,
    );
    assert.equal((await cli.request("task.get", { taskId })).owner, ownerLabel(idA), "nothing moved");

    assert.match(first.secret ?? "", /^[0-9a-f]{64}$/, "the first hello issues the secret");

    const fork = await owner("0c0c0c0c-fork-of-a");
    const moved = await fork.request("owner.move", { fromOwnerId: idA, secret: first.secret });
    assert.deepEqual(moved.moved_ids, [taskId]);
    assert.equal((await cli.request("task.get", { taskId })).owner, ownerLabel("0c0c0c0c-fork-of-a"));
    await cli.request("task.abort", { taskIds: [taskId] });
    await cli.request("task.close", { taskId });
  } finally {
    for (const c of clients) c.close();
    d.proc.kill("SIGTERM");
    await d.exited;
  }
});
