// A settled, harvested cycle whose owner delivery is missing from the outbox after a restart (a power cut keeps
// the task's records and loses the outbox's tail: the outbox record follows them by timing only) is queued and
// pushed again; one already in the outbox is not queued twice. Real daemon, real socket; the stub runtime's launch
// plays the child extension (prompt, report, agent_end).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type DaemonClient } from "../../src/client/index.js";
import { connectOwner } from "../helpers/owner-client.js";
import { runDaemon } from "../../src/daemon/daemon.js";
import type { Runtime } from "../../src/runtime/types.js";
import { fixtureEntries, stamped } from "../../bench/_util.js";
import { stubRuntime } from "../helpers/stub-runtime.js";
import { until } from "../helpers/wait.js";

const OWNER = "0b1ec0ffeec0ffee-recover";

/** The crew-report recording (fixtures/sessions), re-stamped to now: the report is read back from it after a restart. */
function writeSession(path: string): void {
  const now = Date.now();
  writeFileSync(
    path,
    fixtureEntries("crew-report")
      .map((e) => stamped(e, now))
      .join(""),
  );
}

/** Each child's cycle, running in the background: awaited before its connection is closed (its last reply may be on the way). */
const cycles: Promise<void>[] = [];

function finishingChild(home: string, children: DaemonClient[]): Runtime {
  return stubRuntime({
    async launch(spec) {
      // The prompt may arrive in the same chunk as the hello reply: the handler is passed to connect (as the child
      // extension does) and runs the cycle once the client is in hand.
      let gotChild!: (c: DaemonClient) => void;
      const ready = new Promise<DaemonClient>((r) => (gotChild = r));
      const runCycle = async (child: DaemonClient, cycle: number) => {
        await child.request("child.event", { type: "prompt_accepted", cycle });
        writeSession(join(spec.taskDir, "session.jsonl"));
        await child.request("child.report", { cycle, outcome: "completed", report: "done" });
        await child.request("child.event", { type: "agent_end", cycle, stopReason: "stop", willRetry: false });
      };
      const child = await connect(home, {
        kind: "child",
        taskId: spec.env.DSH_HERDR_TASK_ID!,
        token: spec.env.DSH_HERDR_TASK_TOKEN!,
        // A request still in flight when the test closes this child is rejected: nobody waits for it then.
        pushes: {
          "child.prompt": (p: { cycle: number }) =>
            void cycles.push(ready.then((c) => runCycle(c, p.cycle)).catch(() => undefined)),
        },
      });
      children.push(child);
      gotChild(child);
      return { runtime: "headless", pid: process.pid };
    },
  });
}

async function attachOwner(home: string, pushed: string[]): Promise<DaemonClient> {
  const c = await connectOwner(home, OWNER, {
    pushes: { "owner.delivery": (d: { deliveryId: string }) => void pushed.push(d.deliveryId) },
  });
  await c.request("owner.attach", {});
  return c;
}

const outboxOf = (home: string) => join(home, "owners", OWNER, "outbox.jsonl");
const records = (home: string) =>
  readFileSync(outboxOf(home), "utf8")
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { deliveryId: string; state: string; taskId?: string });

test("a settled cycle whose outbox record was lost is delivered after the restart; a recorded one is not queued again", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-recdel-"));
  const home = join(dir, "home");
  const children: DaemonClient[] = [];
  const start = () =>
    runDaemon(home, { logLevel: "silent", runtimeFactories: { headless: () => finishingChild(home, children) } });
  let d = await start();
  const owners: DaemonClient[] = [];
  try {
    const first: string[] = [];
    const owner = await attachOwner(home, first);
    owners.push(owner);
    const spawn = async () =>
      (
        await owner.request("task.spawn", {
          cwd: dir,
          prompt: "p",
          model: "m/x",
          runtime: "headless",
        })
      ).taskId;
    const lost = await spawn();
    const kept = await spawn();
    await until("both deliveries pushed", () => (first.length >= 2 ? true : undefined), 20_000);
    const lostId = first.find((id) => id.includes(lost))!;
    const keptId = first.find((id) => id.includes(kept))!;
    assert.ok(lostId && keptId, JSON.stringify(first));
    owner.close();
    await Promise.all(cycles); // the agent_end replies may follow the pushes
    for (const c of children) c.close();
    await d.stop();

    // The power cut: the outbox loses every record of one delivery; the task's records and journal stay.
    const before = records(home);
    writeFileSync(
      outboxOf(home),
      before
        .filter((r) => r.deliveryId !== lostId)
        .map((r) => JSON.stringify(r) + "\n")
        .join(""),
    );

    d = await start();
    const second: string[] = [];
    owners.push(await attachOwner(home, second));
    await until("the lost delivery pushed again", () => (second.includes(lostId) ? true : undefined), 20_000);
    const after = records(home);
    assert.equal(after.filter((r) => r.deliveryId === lostId && r.state === "queued").length, 1, "queued again once");
    // The kept task's cycle has its delivery on record: nothing more is queued for it (under any id).
    assert.equal(
      after.filter((r) => r.taskId === kept && r.state === "queued").length,
      1,
      `the delivery still on record is not queued again: ${JSON.stringify(after)}`,
    );
    assert.ok(!second.some((id) => id.includes(kept) && id !== keptId), JSON.stringify(second));
  } finally {
    for (const c of [...owners, ...children]) c.close();
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
