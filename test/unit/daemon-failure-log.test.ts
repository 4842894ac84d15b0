// daemon.log says what failed: one error line per failed task cycle with taskId, code and message (a launch that
// throws, a prompt pi did not run), found by `dsh-herdr daemon log --task` with the full id, a suffix or the agent
// name; and a restart says nothing again about cycles whose delivery the owner already acked. Real daemon, real
// socket, real CLI; the stub runtime's launch plays the child extension.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type DaemonClient } from "../../src/client/index.js";
import { DshError } from "../../src/core/errors.js";
import type { AgentResult } from "../../src/core/types.js";
import { runDaemon } from "../../src/daemon/daemon.js";
import type { Runtime } from "../../src/runtime/types.js";
import { fixtureEntries, stamped } from "../../bench/_util.js";
import { stubRuntime } from "../helpers/stub-runtime.js";
import { until } from "../helpers/wait.js";

const root = join(import.meta.dirname, "..", "..", "..");
const OWNER = "0b1ec0ffeec0ffee-faillog";

type Mode = "launch-throws" | "prompt-failed" | "completes";

/** A stub child: its launch throws, or it connects and fails the prompt, or it reports and ends the cycle. */
function child(home: string, mode: () => Mode, children: DaemonClient[]): Runtime {
  return stubRuntime({
    async launch(spec) {
      const m = mode();
      if (m === "launch-throws") throw new DshError("RUNTIME_UNAVAILABLE", "the stub runtime cannot start children");
      let gotChild!: (c: DaemonClient) => void;
      const ready = new Promise<DaemonClient>((r) => (gotChild = r));
      const runCycle = async (c: DaemonClient, cycle: number) => {
        if (m === "prompt-failed") {
          await c.request("child.event", {
            type: "prompt_failed",
            cycle,
            errorMessage: "No API key found for anthropic",
          });
          return;
        }
        await c.request("child.event", { type: "prompt_accepted", cycle });
        const now = Date.now();
        writeFileSync(
          join(spec.taskDir, "session.jsonl"),
          fixtureEntries("crew-report")
            .map((e) => stamped(e, now))
            .join(""),
        );
        await c.request("child.report", { cycle, outcome: "completed", report: "done" });
        await c.request("child.event", { type: "agent_end", cycle, stopReason: "stop", willRetry: false });
      };
      const c = await connect(home, {
        kind: "child",
        taskId: spec.env.DSH_HERDR_TASK_ID!,
        token: spec.env.DSH_HERDR_TASK_TOKEN!,
        // A request still in flight when the test closes this child is rejected: nobody waits for it then.
        pushes: {
          "child.prompt": (p: { cycle: number }) =>
            void ready.then((cc) => runCycle(cc, p.cycle)).catch(() => undefined),
        },
      });
      children.push(c);
      gotChild(c);
      return { runtime: "headless", pid: process.pid };
    },
  });
}

const logLines = (home: string): Record<string, unknown>[] =>
  readFileSync(join(home, "daemon.log"), "utf8")
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

function cli(home: string, args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [join(root, "bin", "dsh-herdr"), ...args],
      { env: { ...process.env, DSH_HERDR_HOME: home, NO_COLOR: "1" } },
      (e, out, err) => resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, out, err }),
    );
  });
}

test("every task failure is one error line in daemon.log with taskId, code and message; daemon log --task finds it by id, suffix and name", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-faillog-"));
  const home = join(dir, "home");
  const children: DaemonClient[] = [];
  let mode: Mode = "launch-throws";
  const d = await runDaemon(home, {
    logLevel: "info",
    runtimeFactories: { headless: () => child(home, () => mode, children) },
  });
  const c = await connect(home, { kind: "cli", timeoutMs: 30_000 });
  try {
    const run = async (m: Mode): Promise<AgentResult> => {
      mode = m;
      const { taskId } = await c.request("task.spawn", {
        cwd: dir,
        prompt: "p",
        model: "m/x",
        runtime: "headless",
      });
      const w = await c.request("task.wait", { taskIds: [taskId], timeoutMs: 20_000 });
      return w.results[0]!;
    };
    const thrown = await run("launch-throws");
    const refused = await run("prompt-failed");
    const fine = await run("completes");
    assert.equal(thrown.status, "failed", JSON.stringify(thrown));
    assert.equal(refused.status, "failed", JSON.stringify(refused));
    assert.equal(fine.status, "completed", JSON.stringify(fine));
    assert.equal(thrown.error?.code, "RUNTIME_UNAVAILABLE");
    assert.equal(refused.error?.code, "PROMPT_FAILED");

    const failedLines = (taskId: string) => logLines(home).filter((l) => l["taskId"] === taskId && l["level"] === 50);
    for (const r of [thrown, refused]) {
      await until(
        `the failure line of ${r.taskId}`,
        async () => (failedLines(r.taskId).length > 0 ? true : undefined),
        10_000,
      );
      const lines = failedLines(r.taskId);
      assert.equal(lines.length, 1, `one error line for ${r.taskId}: ${JSON.stringify(lines)}`);
      assert.equal(lines[0]!["msg"], "task failed");
      assert.equal(lines[0]!["code"], r.error!.code);
      assert.equal(lines[0]!["message"], r.error!.message);
      assert.equal(lines[0]!["agent"], r.agent.name);
      // Nothing else about this failure at warn or above: one line says it.
      const others = logLines(home).filter((l) => l["taskId"] === r.taskId && (l["level"] as number) >= 40);
      assert.equal(others.length, 1, JSON.stringify(others));
    }
    assert.equal(failedLines(fine.taskId).length, 0, "a completed task logs no failure");

    for (const q of [refused.taskId, refused.taskId.slice(-4), refused.agent.name]) {
      const r = await cli(home, ["daemon", "log", "--task", q]);
      assert.equal(r.code, 0, r.err);
      assert.match(r.out, /ERROR task failed .*code=PROMPT_FAILED/, `daemon log --task ${q}: ${r.out}`);
      assert.match(r.out, /No API key found for anthropic/);
      assert.ok(!r.out.includes(thrown.taskId), `only ${refused.taskId}'s lines for ${q}`);
    }
  } finally {
    c.close();
    for (const x of children) x.close();
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a restart says nothing again about a settled cycle whose delivery the owner acked", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-restartlog-"));
  const home = join(dir, "home");
  const children: DaemonClient[] = [];
  const start = () =>
    runDaemon(home, {
      logLevel: "info",
      runtimeFactories: { headless: () => child(home, () => "completes", children) },
    });
  let d = await start();
  const owners: DaemonClient[] = [];
  try {
    const pushed: string[] = [];
    const owner = await connect(home, {
      kind: "owner",
      ownerId: OWNER,
      pushes: { "owner.delivery": (p: { deliveryId: string }) => void pushed.push(p.deliveryId) },
    });
    owners.push(owner);
    await owner.request("owner.attach", {});
    const { taskId } = await owner.request("task.spawn", {
      cwd: dir,
      prompt: "p",
      model: "m/x",
      runtime: "headless",
    });
    await until("the delivery pushed", async () => (pushed.length > 0 ? true : undefined), 20_000);
    assert.deepEqual(await owner.request("owner.ack", { deliveryIds: pushed }), { acked: 1 });
    owner.close();
    for (const x of children) x.close();
    await d.stop();
    for (let i = 0; i < 2; i++) {
      d = await start();
      await d.stop();
    }
    const again = logLines(home).filter((l) => /delivery|queued again/.test(String(l["msg"])) && l["level"] === 40);
    assert.deepEqual(again, [], "no warning about the acked cycle at any restart");
    const outbox = readFileSync(join(home, "owners", OWNER, "outbox.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { state: string; taskId?: string });
    assert.equal(outbox.filter((r) => r.state === "queued").length, 1, `queued once: ${JSON.stringify(outbox)}`);
    assert.ok(outbox.every((r) => r.taskId === undefined || r.taskId === taskId));
  } finally {
    for (const x of [...owners, ...children]) x.close();
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
