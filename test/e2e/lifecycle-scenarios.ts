// The lifecycle invariants end to end (issue 17), with real pi children against the scripted model, run on the
// headless runtime (lifecycle.test.ts) and on tmux (lifecycle-tmux.test.ts): every ending honest, final, heard.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { connect } from "../../src/client/index.js";
import { runDaemon } from "../../src/daemon/daemon.js";
import type { AgentResult } from "../../src/core/types.js";
import { readOutbox } from "../../src/store/outbox.js";
import { readJournal, startHarness, type Harness } from "./daemon-harness.js";
import { killUnder } from "../helpers/procs.js";
import type { Script } from "../../fixtures/scripted-model/script.js";

const report = (text: string) => ({
  toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: text } }],
});
const SCRIPT: Script = {
  conversations: [
    { name: "slow", match: "MARK-SLOW", steps: [{ text: "thinking slowly", delayMs: 120_000 }] },
    { name: "quick", match: "MARK-QUICK", steps: [report("quick one")] },
    // Cycle 1 reports; cycle 2 (the request holds cycle 1's assistant message) reports differently.
    { name: "two", match: "MARK-TWO", steps: [report("CYCLE-ONE-REPORT"), report("cycle two done")] },
    // Cycle 2 hangs until the test kills the child.
    {
      name: "crash2",
      match: "MARK-CRASH2",
      steps: [report("CYCLE-ONE-REPORT"), { text: "working on cycle two", delayMs: 120_000 }],
    },
  ],
};

const OWNER = "sess-lifecycle-owner";
let h: Harness;

/** `rt`: the runtime's harness config (runtime, tmuxSocket...). */
export function defineLifecycleScenarios(rt: Record<string, unknown>): void {
  const name = String(rt.runtime);
  const harnessConfig = { ...rt, readinessTimeoutMs: 30_000 };
  before(async () => {
    h = await startHarness(SCRIPT, harnessConfig);
  });
  after(async () => {
    await h?.close();
  });

  const cfg = () => h.daemon.supervisor.deps.config();
  async function withConfig<T>(patch: Record<string, unknown>, fn: () => Promise<T>): Promise<T> {
    const saved = { ...cfg() };
    Object.assign(cfg(), patch);
    try {
      return await fn();
    } finally {
      Object.assign(cfg(), saved);
    }
  }
  const deliveries = async (taskId: string) =>
    (await readOutbox(h.home, OWNER)).filter((r) => r.taskId === taskId && r.state === "queued");
  async function until<T>(what: string, fn: () => Promise<T | undefined> | T | undefined, ms = 60_000): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
      if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const alive = (pid: number): boolean => {
    try {
      return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
    } catch {
      return false;
    }
  };
  const childPid = (taskId: string): number => h.daemon.supervisor.tasks.get(taskId)!.rec.handle!.pid!;

  test(
    `${name}: ` +
      "a built-in provider without an API key: the cycle fails with pi's own words soon after the prompt, and the owner's model is told",
    async () => {
      const s = await h.spawn({ prompt: "MARK-QUICK", model: "anthropic/claude-haiku-4-5", owner: OWNER });
      const r = await h.wait(s.taskId, 60_000);
      assert.equal(r.status, "failed");
      assert.equal(r.error?.code, "PROMPT_FAILED");
      assert.match(r.error!.message, /No API key found for anthropic/);
      // Settled soon after pi took the prompt, not at the task timeout (15 min by default).
      assert.ok(r.timing.settledAt! - r.timing.promptedAt! < 15_000, JSON.stringify(r.timing));
      const d = await until("the error delivery", async () => (await deliveries(s.taskId))[0]);
      const model = (d.payload as { model: { status: string; error: string } }).model;
      assert.equal(model.status, "error");
      assert.match(model.error, /^PROMPT_FAILED: pi did not run the prompt: No API key found for anthropic/);
      // A failed child is ended.
      await until(
        "the failed child to end",
        () => !alive(r.agent.runtimeId ? Number(r.agent.runtimeId) : childPid(s.taskId)),
      );
    },
  );

  test(
    `${name}: ` + "a timeout settles interrupted with TIMEOUT and reaches the owner's model as an error",
    async () => {
      const s = await h.spawn({ prompt: "MARK-SLOW for the timeout", owner: OWNER, timeoutMs: 15_000 });
      await h.waitFor(s.taskId, (r) => r.status === "running", "running");
      const pid = childPid(s.taskId);
      const r = await h.wait(s.taskId, 60_000);
      assert.equal(r.status, "interrupted");
      assert.equal(r.error?.code, "TIMEOUT");
      const d = await until("the timeout delivery", async () => (await deliveries(s.taskId))[0]);
      assert.equal(d.deliveryId, `${s.taskId}-c1-error`);
      const model = (d.payload as { model: { status: string; error: string } | null }).model;
      assert.equal(model?.status, "error");
      assert.match(model!.error, /^TIMEOUT: /);
      await until("the timed-out child to end", () => !alive(pid));
    },
  );

  test(
    `${name}: ` +
      "a settled cycle is final: result.md rewritten afterwards changes neither the status nor the deliveries, and warns",
    async () => {
      const s = await h.spawn({ prompt: "MARK-QUICK settle then rewrite", owner: OWNER });
      const r = await h.wait(s.taskId);
      assert.equal(r.status, "completed");
      await until("the completed delivery", async () => (await deliveries(s.taskId)).length === 1 || undefined);
      writeFileSync(r.result!.path, "---\nstatus: failed\nsummary: changed my mind\n---\nIt failed after all.\n");
      await until(
        "the late evidence record",
        () => readJournal(h, s.taskId).some((e) => e.type === "late_evidence") || undefined,
      );
      const after = await h.waitFor(
        s.taskId,
        (x) => (x.warnings ?? []).some((w) => /changed after the cycle settled/.test(w)),
        "the late-evidence warning",
      );
      assert.equal(after.status, "completed");
      assert.equal(after.summary, r.summary);
      const stored = JSON.parse(readFileSync(join(h.home, "tasks", s.taskId, "result.json"), "utf8")) as AgentResult;
      assert.equal(stored.status, "completed");
      await new Promise((res) => setTimeout(res, 500));
      const ds = await deliveries(s.taskId);
      assert.deepEqual(
        ds.map((x) => x.deliveryId),
        [`${s.taskId}-c1-completed`],
      );
    },
  );

  test(`${name}: ` + "a child that crashes in cycle 2 carries no cycle-1 report or text in its result", async () => {
    const s = await h.spawn({ prompt: "MARK-CRASH2", owner: OWNER });
    const first = await h.wait(s.taskId);
    assert.equal(first.status, "completed");
    await h.cli.request("task.respond", { taskId: s.taskId, message: "now the second part" });
    await until("cycle 2 running", async () => {
      const r = await h.cli.request("task.get", { taskId: s.taskId });
      return r.status === "running" && h.daemon.supervisor.tasks.get(s.taskId)?.state.phase.name === "running"
        ? r
        : undefined;
    });
    // The model is mid-call (120 s delay): kill pi.
    await until(
      "cycle 2's request at the model",
      () =>
        readFileSync(join(h.dir, "requests.jsonl"), "utf8")
          .split("\n")
          .filter((l) => l.includes("MARK-CRASH2")).length >= 2 || undefined,
    );
    process.kill(childPid(s.taskId), "SIGKILL");
    const r = await h.wait(s.taskId);
    assert.ok(r.status === "gone" || r.status === "failed", r.status);
    const text = JSON.stringify({ error: r.error, summary: r.summary, finalMessage: r.finalMessage, result: r.result });
    assert.doesNotMatch(text, /CYCLE-ONE-REPORT/);
    const ds = await until("cycle 2's delivery", async () =>
      (await deliveries(s.taskId)).find((d) => d.deliveryId.includes("-c2-")),
    );
    assert.doesNotMatch(JSON.stringify(ds.payload), /CYCLE-ONE-REPORT/);
    assert.equal((ds.payload as { model: { status: string } }).model.status, "error");
  });

  test(
    `${name}: ` + "respond with every slot busy returns at once as a queued cycle, which runs when a slot frees",
    async () => {
      await withConfig({ maxParallelAgents: 1, maxQueuedAgents: 5 }, async () => {
        const a = await h.spawn({ prompt: "MARK-TWO queued follow-up", owner: OWNER });
        assert.equal((await h.wait(a.taskId)).status, "completed");
        const holder = await h.spawn({ prompt: "MARK-SLOW holds the only slot" });
        await h.waitFor(holder.taskId, (r) => r.status === "running", "the holder running");
        const reply = await h.cli.request(
          "task.respond",
          { taskId: a.taskId, message: "second part" },
          { timeoutMs: 10_000 },
        );
        assert.equal(reply.cycle, 2);
        assert.equal(reply.queued, true);
        const waiting = await h.cli.request("task.get", { taskId: a.taskId });
        assert.equal(waiting.status, "running"); // not settled: wait does not return for it
        assert.equal(h.daemon.supervisor.tasks.get(a.taskId)!.state.phase.name, "queued");
        const w = await h.cli.request("task.wait", { taskIds: [a.taskId], timeoutMs: 1500 }, { timeoutMs: 10_000 });
        assert.equal(w.timedOut, true);
        await h.cli.request("task.abort", { taskIds: [holder.taskId] });
        const r = await h.wait(a.taskId);
        assert.equal(r.status, "completed");
        const ds = await until("cycle 2's delivery", async () =>
          (await deliveries(a.taskId)).find((d) => d.deliveryId === `${a.taskId}-c2-completed`),
        );
        assert.equal((ds.payload as { model: { result: { report: string } } }).model.result.report, "cycle two done");
      });
    },
  );

  test(
    `${name}: ` +
      "an idle child is ended after idleChildMs (parked); respond relaunches pi on its session and the conversation goes on",
    async () => {
      await withConfig({ idleChildMs: 1500 }, async () => {
        const s = await h.spawn({ prompt: "MARK-TWO parked", owner: OWNER });
        assert.equal((await h.wait(s.taskId)).status, "completed");
        const pid = childPid(s.taskId);
        await until(
          "the idle child to be parked",
          () => readJournal(h, s.taskId).some((e) => e.type === "parked") || undefined,
        );
        await until("the parked child to end", () => !alive(pid));
        const listed = await h.cli.request("task.get", { taskId: s.taskId });
        assert.equal(listed.status, "completed");
        await h.cli.request("task.respond", { taskId: s.taskId, message: "carry on" });
        const r = await h.wait(s.taskId);
        assert.equal(r.status, "completed");
        // The relaunched pi had cycle 1 in its context: the model played step 2, not step 1 again.
        const ds = await until("cycle 2's delivery", async () =>
          (await deliveries(s.taskId)).find((d) => d.deliveryId === `${s.taskId}-c2-completed`),
        );
        assert.equal((ds.payload as { model: { result: { report: string } } }).model.result.report, "cycle two done");
        assert.notEqual(childPid(s.taskId), pid);
      });
    },
  );

  test(
    `${name}: ` + "a spawn with a machine no runtime here can honour is refused, never stamped on a local child",
    async () => {
      await assert.rejects(
        h.spawn({ prompt: "MARK-QUICK", machine: "builder-01" }),
        (e: { code?: string; message: string }) => e.code === "MACHINE_UNKNOWN" && /builder-01/.test(e.message),
      );
    },
  );

  test(
    `${name}: ` +
      "task.json deleted while the daemon is down: the task fails by name (RECORD_LOST), its child is ended, its owner told",
    async () => {
      const h2 = await startHarness(SCRIPT, harnessConfig);
      try {
        const s = await h2.spawn({ prompt: "MARK-SLOW lost record", owner: OWNER });
        await h2.waitFor(s.taskId, (r) => r.status === "running", "running");
        const pid = h2.daemon.supervisor.tasks.get(s.taskId)!.rec.handle!.pid!;
        h2.cli.close();
        await h2.daemon.stop(); // children stay running, as after a crash
        rmSync(join(h2.home, "tasks", s.taskId, "task.json"));
        const d2 = await runDaemon(h2.home, { childEnv: h2.childEnv, config: harnessConfig });
        h2.daemon = d2;
        const cli = await connect(h2.home, { kind: "cli", timeoutMs: 60_000 });
        h2.cli = cli;
        const w = await cli.request("task.wait", { taskIds: [s.taskId], timeoutMs: 30_000 }, { timeoutMs: 40_000 });
        assert.equal(w.timedOut, false);
        const r = w.results[0]!;
        assert.equal(r.status, "failed");
        assert.equal(r.error?.code, "RECORD_LOST");
        assert.ok(existsSync(join(h2.home, "tasks", s.taskId, "task.json")), "the record is written again");
        await until("the orphaned child to end", () => !alive(pid), 30_000);
        const ds = await until("the owner's error delivery", async () =>
          (await readOutbox(h2.home, OWNER)).find((x) => x.taskId === s.taskId && x.state === "queued"),
        );
        assert.match(JSON.stringify(ds.payload), /RECORD_LOST/);
      } finally {
        killUnder(h2.dir);
        await h2.close();
      }
    },
  );

  test(
    `${name}: ` +
      "an idle child does not outlive its daemon: after daemon stop (idleChildMs) and when its home is deleted, it ends itself",
    async () => {
      const h3 = await startHarness(SCRIPT, { ...harnessConfig, idleChildMs: 2500 });
      try {
        const a = await h3.spawn({ prompt: "MARK-QUICK outlives its daemon?" });
        await h3.waitFor(a.taskId, (r) => r.agent.runtimeId !== undefined, "a launched");
        // b is launched with idle exit off (idleChildMs 0): only the loss of its home may end it.
        Object.assign(h3.daemon.supervisor.deps.config(), { idleChildMs: 0 });
        const b = await h3.spawn({ prompt: "MARK-QUICK outlives its home?" });
        assert.equal((await h3.wait(a.taskId)).status, "completed");
        assert.equal((await h3.wait(b.taskId)).status, "completed");
        const pidA = h3.daemon.supervisor.tasks.get(a.taskId)!.rec.handle!.pid!;
        const pidB = h3.daemon.supervisor.tasks.get(b.taskId)!.rec.handle!.pid!;
        h3.cli.close();
        await h3.daemon.stop(); // a stopped daemon parks nothing: the children must notice on their own
        assert.ok(alive(pidA) && alive(pidB));
        await until("the idle child to end after idleChildMs without its daemon", () => !alive(pidA), 60_000);
        await new Promise((r) => setTimeout(r, 3000));
        assert.ok(alive(pidB), "without idle exit the child waits for its daemon");
        rmSync(h3.home, { recursive: true, force: true });
        await until("the idle child to end once its home is gone", () => !alive(pidB), 60_000);
      } finally {
        killUnder(h3.dir);
        h3.daemon = await runDaemon(h3.home, { childEnv: h3.childEnv, config: harnessConfig });
        h3.cli = await connect(h3.home, { kind: "cli", timeoutMs: 60_000 });
        await h3.close();
      }
    },
  );
}
