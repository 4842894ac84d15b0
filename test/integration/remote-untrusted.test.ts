// A remote is untrusted input (issue 28, items 5, 6, 8 and 9, remote part): a fake remote daemon speaking the
// protocol (test/helpers/fake-remote.ts) runs as the machine's command behind a real OpenSSH link (a real sshd on
// 127.0.0.1, a second Unix user), in place of `dsh-herdr daemon connect`. A local in-process daemon relays tasks to
// it. Forged, schema-invalid, oversized and path-stealing settled results are refused by name (the task settles
// `failed` with REMOTE_INVALID naming the field; the CLI's list, show and diff keep working and read nothing of the
// local disk the result named); a valid result over 1 MiB settles here; a mute remote (hello, then nothing) does
// not delay the local socket; a task the remote no longer knows settles `gone` with REMOTE_LOST and closes.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type DaemonClient } from "../../src/client/index.js";
import type { AgentResult } from "../../src/core/types.js";
import { verifyTaskDir } from "../../src/cli/commands/verify.js";
import { describeDifference } from "../../src/core/lifecycle/verify.js";
import { validateAgentResult } from "../../src/daemon/task/harvest.js";
import { runDaemon, type RunningDaemon } from "../../src/daemon/daemon.js";
import { runCli } from "../helpers/cli.js";
import type { FakeScenario } from "../helpers/fake-remote.js";
import { sshdUnavailable, startSshd, type TestSshd } from "../helpers/sshd.js";
import { until } from "../helpers/wait.js";

const skip = sshdUnavailable();

describe("a remote is untrusted input (a fake remote behind real ssh)", { skip, timeout: 600_000 }, () => {
  let sshd: TestSshd;
  let dir: string;
  let home: string;
  let fakeDir: string;
  let daemon: RunningDaemon;
  let cli: DaemonClient;
  const secret = () => join(dir, "secret.txt");

  const config = () => ({
    runtime: "headless" as const,
    machines: {
      fake: {
        ...sshd.machine,
        command: `${sshd.command.split(" ")[0]} ${join(sshd.appRoot, "dist", "test", "helpers", "fake-remote.js")}`,
      },
    },
  });
  const scenario = (s: FakeScenario) => {
    // Replaced whole (the fake re-reads it on every request: a read mid-write would see half a file).
    writeFileSync(join(fakeDir, "scenario.json.tmp"), JSON.stringify(s));
    renameSync(join(fakeDir, "scenario.json.tmp"), join(fakeDir, "scenario.json"));
    sshd.giveToUser(fakeDir);
  };
  const spawn = async () =>
    (
      await cli.request("task.spawn", {
        machine: "fake",
        cwd: "/srv/work",
        prompt: "do it",
        runtime: "headless",
      })
    ).taskId;
  const stored = (taskId: string) =>
    JSON.parse(readFileSync(join(home, "tasks", taskId, "result.json"), "utf8")) as AgentResult;
  /**
   * The task's cycle (`cycle`: that one) settled here, its record written and passing `check` (read from the daemon
   * and its result.json, not over a frame-limited socket).
   */
  const settledHere = (taskId: string, o: { cycle?: number; check?: (r: AgentResult) => boolean } = {}) =>
    until(
      `task ${taskId}${o.cycle !== undefined ? ` cycle ${o.cycle}` : ""} settled here`,
      () => {
        const live = daemon.supervisor.tasks.get(taskId);
        if (live?.state.phase.name !== "settled") return undefined;
        if (o.cycle !== undefined && live.state.phase.cycle !== o.cycle) return undefined;
        const r = stored(taskId); // the record follows the phase
        return ["starting", "working", "running"].includes(r.status) || (o.check && !o.check(r)) ? undefined : r;
      },
      60_000,
      50,
    );
  /** The task's settle records (events.jsonl): the verdicts its machine decided, with their reasons. */
  const settleReasons = (taskId: string) =>
    readFileSync(join(home, "tasks", taskId, "events.jsonl"), "utf8")
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => JSON.parse(l) as { type: string; reason?: { kind?: string; field?: string } })
      .filter((e) => e.type === "settle")
      .map((e) => e.reason);
  /** The cycle settled gone here by this daemon's REMOTE_LOST verdict (one settle record), and verify agrees. */
  const goneHere = (taskId: string, r: AgentResult, message: RegExp) => {
    assert.equal(r.status, "gone", JSON.stringify(r));
    assert.equal(r.error?.code, "REMOTE_LOST");
    assert.match(r.error!.message, message);
    assert.deepEqual(
      settleReasons(taskId).map((x) => x?.kind),
      ["remote_lost"],
      "one settle record: this daemon's verdict",
    );
    const v = verifyTaskDir(join(home, "tasks", taskId), taskId);
    assert.deepEqual(v.differences.map(describeDifference), [], "verify agrees");
  };
  /** The real CLI against this home (async: the daemon it talks to runs in this process). */
  const dsh = (args: string[]) => runCli(args, { env: { ...process.env, DSH_HERDR_HOME: home } });
  /** The task closes here: through the relay (the closed result may be over the local socket's frame limit). */
  const closeHere = async (taskId: string) => {
    const live = daemon.supervisor.tasks.get(taskId)!;
    const r = await daemon.relay.close(live, false);
    daemon.supervisor.tasks.delete(taskId);
    assert.equal(r.status, "closed");
    assert.equal(stored(taskId).status, "closed");
  };

  /** A refused settle: failed, REMOTE_INVALID naming `field`, a result the local schema accepts, and a working CLI. */
  async function refused(taskId: string, field: RegExp): Promise<AgentResult> {
    const r = await settledHere(taskId);
    assert.equal(r.status, "failed", JSON.stringify(r));
    assert.equal(r.error?.code, "REMOTE_INVALID", JSON.stringify(r.error));
    assert.match(r.error!.message, field);
    assert.match(r.error!.message, /machine fake sent an invalid result/);
    assert.equal(r.agent.machine, "fake");
    assert.equal(r.taskId, taskId);
    validateAgentResult(r);
    // The lifecycle machine decided it: one settle record, this daemon's own verdict (reason remote_invalid, naming
    // the field), never the machine's word.
    const reasons = settleReasons(taskId);
    assert.equal(reasons.length, 1, JSON.stringify(reasons));
    assert.equal(reasons[0]?.kind, "remote_invalid", JSON.stringify(reasons));
    assert.ok(r.error!.message.includes(`(${reasons[0]?.field}: `), `the reason's field ${reasons[0]?.field}`);
    // The task dir agrees with result.json (the journal's verdict: that settle, failed).
    const v = verifyTaskDir(join(home, "tasks", taskId), taskId);
    assert.deepEqual(v.differences.map(describeDifference), [], "verify agrees");
    const list = await dsh(["list", "--all", "--json"]);
    assert.equal(list.code, 0, list.err);
    assert.ok(list.out.includes(taskId));
    const show = await dsh(["show", taskId, "--json"]);
    assert.equal(show.code, 0, show.err);
    assert.equal((JSON.parse(show.out) as AgentResult).error?.code, "REMOTE_INVALID");
    return r;
  }

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "dsh-untrusted-"));
    writeFileSync(secret(), "TOP-SECRET-LOCAL-FILE\n", { mode: 0o600 });
    sshd = await startSshd();
    fakeDir = join(sshd.user.home, "fake");
    mkdirSync(fakeDir);
    appendFileSync(join(sshd.user.home, ".ssh", "environment"), `DSH_FAKE_REMOTE=${join(fakeDir, "scenario.json")}\n`);
    scenario({ mode: "normal" });
    home = join(dir, "home");
    mkdirSync(home, { recursive: true, mode: 0o700 });
    writeFileSync(join(home, "config.json"), JSON.stringify({ machines: config().machines }), { mode: 0o600 });
    daemon = await runDaemon(home, { config: config() });
    cli = await connect(home, { kind: "cli", timeoutMs: 60_000 });
  });
  after(async () => {
    cli?.close();
    await daemon?.stop();
    await sshd?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("a schema-invalid settled result is refused, naming the field; list, show and close keep working", async () => {
    scenario({ mode: "normal", settle: "schema-invalid" });
    const taskId = await spawn();
    await refused(taskId, /usage\.assistant/);
    await closeHere(taskId);
  });

  test("a forged result (another task's id) is refused, naming taskId", async () => {
    scenario({ mode: "normal", settle: "forged" });
    const taskId = await spawn();
    await refused(taskId, /taskId: is tzzzzzzzzzzz/);
    await closeHere(taskId);
  });

  test('a "settled" result whose status is running is refused, naming status; the task closes', async () => {
    scenario({ mode: "normal", settle: "running-settled" });
    const taskId = await spawn();
    await refused(taskId, /status: is "running"/);
    await closeHere(taskId);
  });

  test("an oversized result (40 MiB announced) is refused by its size", async () => {
    scenario({ mode: "normal", settle: "oversized" });
    const taskId = await spawn();
    await refused(taskId, /result: is 41943040 bytes, over the bound/);
    await closeHere(taskId);
  });

  test("a result whose diff.patchPath names a local file is refused; dsh-herdr diff never prints that file", async () => {
    scenario({ mode: "normal", settle: "path-stealing", stealPath: secret() });
    const taskId = await spawn();
    const r = await refused(taskId, /diff\.patchPath: names .*secret\.txt/);
    assert.equal(r.diff, undefined, "nothing of the refused diff is kept");
    const d = await dsh(["diff", taskId, "--json"]);
    assert.equal(d.code, 0, d.err);
    const out = JSON.parse(d.out) as { patchPath: string; patch: string };
    assert.doesNotMatch(out.patch, /TOP-SECRET/);
    assert.notEqual(out.patchPath, secret());
    const plain = await dsh(["diff", taskId]);
    assert.doesNotMatch(plain.out + plain.err, /TOP-SECRET/);
    await closeHere(taskId);
  });

  test("a valid result over 1 MiB settles here (read in pages), whole; close reads the closed one in pages too", async () => {
    // The closed result's reply is over the frame limit; the page read after it starts in the same chunk that ends
    // it (tailWithNext): a refusal of the big reply spliced into that chunk's end broke the page (CI, 84e668a).
    scenario({ mode: "normal", settle: "large", largeBytes: 1_500_000, tailWithNext: true });
    const taskId = await spawn();
    const r = await settledHere(taskId);
    assert.equal(r.status, "completed", r.error?.message);
    assert.ok(r.finalMessage?.startsWith("LARGE-REPORT "), "the report");
    assert.ok(r.finalMessage?.endsWith(" END"), "whole");
    assert.ok(r.finalMessage!.length > 1_500_000);
    assert.equal(r.taskId, taskId);
    assert.equal(r.agent.machine, "fake");
    await closeHere(taskId);
  });

  test("a read of the settled result that fails while the link stays up is tried again: the task settles here", async () => {
    // The settle is pushed without its body (over 256 KiB): one task.fetch reads it. That read fails (an error
    // there, the link stays up); nothing else would read the task again until a reconnect that need not come.
    // Settling 1.5 s in: the spawn's own read (at adoption) comes before it, so the failing read is the settle's.
    scenario({ mode: "normal", settle: "large", largeBytes: 400_000, fetchErrors: 1, settleDelayMs: 1500 });
    const taskId = await spawn();
    const r = await settledHere(taskId);
    assert.equal(r.status, "completed", r.error?.message);
    assert.ok(r.finalMessage?.endsWith(" END"), "whole");
    await closeHere(taskId);
  });

  test("a settled result that changes between its pages in each of 3 reads is read again later, not refused", async () => {
    // Over 1 MiB, so it is read in 3 pages; the first 6 pages served each name a version of their own, so each of the
    // first 3 reads starts over at its second page. The machine told the truth about a moving result: the cycle
    // used to settle failed here (REMOTE_INVALID, task.fetch.version); now the read is tried again and settles.
    scenario({ mode: "normal", settle: "large", largeBytes: 1_200_000, churnPages: 6, settleDelayMs: 1500 });
    const taskId = await spawn();
    const r = await settledHere(taskId);
    assert.equal(r.status, "completed", r.error?.message);
    assert.ok(r.finalMessage?.startsWith("LARGE-REPORT ") && r.finalMessage.endsWith(" END"), "whole");
    assert.equal(r.finalMessage?.length, 1_200_000 + "LARGE-REPORT  END".length);
    assert.deepEqual(
      settleReasons(taskId).map((x) => x?.kind),
      ["remote"],
      "one settle record: the machine's own settle, no verdict of this daemon",
    );
    await closeHere(taskId);
  });

  test("a cycle started on the machine itself before this one's settle was read: this cycle settles gone, by name", async () => {
    // Someone answered the task there: the machine settles cycle 2, which this daemon never asked for, and cycle 1's
    // result can no longer be read (task.fetch serves the current cycle). Its news used to be dropped here: the task
    // read `running` until closed, and its owner never heard an ending.
    scenario({ mode: "normal", settle: "valid", cycleThere: 2, settleDelayMs: 1500 });
    const taskId = await spawn();
    const r = await settledHere(taskId);
    goneHere(
      taskId,
      r,
      /moved task t[0-9a-z]{11} on to cycle 2, started there and not from here, before this daemon read the result of cycle 1/,
    );
    await closeHere(taskId);
  });

  test("a settled result with a diff settles here with the machine's diff.patch copied, pinned and verified", async () => {
    scenario({ mode: "normal", settle: "with-diff", settleDelayMs: 1500 });
    const taskId = await spawn();
    const r = await settledHere(taskId);
    assert.equal(r.status, "completed", r.error?.message);
    const copy = join(home, "tasks", taskId, "diff.patch");
    assert.equal(r.diff?.patchPath, copy);
    assert.match(readFileSync(copy, "utf8"), /\+the work of cycle 1\n/);
    const v = verifyTaskDir(join(home, "tasks", taskId), taskId);
    assert.deepEqual(v.differences.map(describeDifference), [], "verify agrees");
    await closeHere(taskId);
  });

  test("a diff.patch read after the machine moved on to another cycle is not taken as this cycle's: it settles gone", async () => {
    // The settled result of cycle 1 is read; before its patch is, someone answers the task there, and the patch served
    // is cycle 2's. It used to be copied and pinned as cycle 1's diff (a settled `completed` whose diff is other work).
    scenario({ mode: "normal", settle: "with-diff", patchCycleThere: 2, settleDelayMs: 1500 });
    const taskId = await spawn();
    const r = await settledHere(taskId);
    goneHere(
      taskId,
      r,
      /moved task t[0-9a-z]{11} on to cycle 2, .*before this daemon read the diff\.patch of the result of cycle 1/,
    );
    assert.equal(r.diff, undefined, "no diff of another cycle");
    assert.equal(existsSync(join(home, "tasks", taskId, "diff.patch")), false, "cycle 2's patch not copied here");
    await closeHere(taskId);
  });

  test("a diff.patch whose pages say its settled cycle is not settled is refused, naming the field", async () => {
    scenario({ mode: "normal", settle: "with-diff", patchUnsettled: true, settleDelayMs: 1500 });
    const taskId = await spawn();
    const r = await refused(taskId, /task\.fetch\.settled: is false for the diff\.patch of cycle 1/);
    assert.equal(r.diff, undefined, "nothing of the refused diff is kept");
    await closeHere(taskId);
  });

  test("a diff.patch that names an older cycle than its settled result's is refused, naming the field; the owner hears it", async () => {
    // Cycle 1 settles; the follow-up's cycle 2 settles there, and its patch is served as cycle 1's. The machine's
    // cycle cannot go back, so that is not news of another cycle to wait out: it used to be dropped, and with nothing
    // left to read the task again, cycle 2 read `working` here until someone closed it, its owner never told.
    scenario({ mode: "normal", settle: "with-diff", settleDelayMs: 300 });
    const taskId = await spawn();
    assert.equal((await settledHere(taskId)).status, "completed");
    scenario({ mode: "normal", settle: "with-diff", patchCycleThere: 1, settleDelayMs: 300 });
    const reply = await cli.request("task.respond", { taskId, message: "once more" });
    assert.equal(reply.cycle, 2);
    const r = await settledHere(taskId, { cycle: 2 });
    assert.equal(r.status, "failed", JSON.stringify(r));
    assert.equal(r.error?.code, "REMOTE_INVALID");
    assert.match(r.error!.message, /task\.fetch\.cycle: is 1 for the diff\.patch of a result read settled in cycle 2/);
    assert.equal(r.diff, undefined, "nothing of the older cycle's patch is kept as cycle 2's");
    assert.deepEqual(
      settleReasons(taskId).map((x) => x?.kind),
      ["remote", "remote_invalid"],
      "cycle 1 settled by the machine, cycle 2 by this daemon's verdict",
    );
    const v = verifyTaskDir(join(home, "tasks", taskId), taskId);
    assert.deepEqual(v.differences.map(describeDifference), [], "verify agrees");
    await closeHere(taskId);
  });

  /** Stop this daemon, put back what a power cut would have kept of the task's files, start a new one on the home. */
  const powerCut = async (taskDir: string, durable: (readonly [string, Buffer])[]) => {
    cli.close();
    await daemon.stop();
    for (const [f, bytes] of durable) writeFileSync(join(taskDir, f), bytes);
    daemon = await runDaemon(home, { config: config() });
    cli = await connect(home, { kind: "cli", timeoutMs: 60_000 });
  };
  /**
   * The link to the fake machine, once it is up (the relay reattaches in the background after a start); `notPid`: its
   * ssh is another than that one (a killed link reads "up" until its end is noticed).
   */
  const linkUp = (notPid?: number) =>
    until(
      "the link up",
      () => {
        const link = daemon.relay.linkOf("fake");
        return link?.state === "up" && link.sshPid !== undefined && link.sshPid !== notPid ? link : undefined;
      },
      30_000,
    );
  test("a power cut that lost a follow-up's record rewrite: recovery follows the journaled cycle, which settles", async () => {
    scenario({ mode: "normal", settle: "valid", settleDelayMs: 300 });
    const taskId = await spawn();
    assert.equal((await settledHere(taskId)).status, "completed");
    const taskDir = join(home, "tasks", taskId);
    // What a power cut right after the follow-up keeps of the record: cycle 1's (the rewrite for cycle 2 is not
    // fsynced; the journal's records of the follow-up are).
    const durable = ["task.json", "result.json"].map((f) => [f, readFileSync(join(taskDir, f))] as const);
    scenario({ mode: "normal", settle: "valid", settleDelayMs: 600_000 });
    const reply = await cli.request("task.respond", { taskId, message: "once more" });
    assert.equal(reply.cycle, 2);
    await until(
      "cycle 2 running here",
      () => daemon.supervisor.tasks.get(taskId)?.state.phase.name === "running" || undefined,
    );
    await powerCut(taskDir, durable);
    const live = daemon.supervisor.tasks.get(taskId)!;
    // Before: the record's cycle 1 was taken, settled; cycle 2's news then read as another cycle, and its result
    // never reached anyone.
    assert.deepEqual([live.rec.cycle, live.state.phase.name], [2, "running"]);
    // running, or working once the link is up and the machine's snapshot of cycle 2 is read
    assert.ok(["running", "working"].includes((await cli.request("task.get", { taskId })).status));
    scenario({ mode: "normal", settle: "valid", settleDelayMs: 300 });
    // A reconnect reads every open task again: cycle 2 has settled there.
    const killed = (await linkUp()).sshPid!;
    process.kill(killed, "SIGKILL");
    const r = await settledHere(taskId, { cycle: 2 });
    // The read at link up may have come before the kill: the close goes over the link made after it.
    await linkUp(killed);
    assert.equal(r.status, "completed", JSON.stringify(r));
    assert.deepEqual(
      settleReasons(taskId).map((x) => x?.kind),
      ["remote", "remote"],
      "each cycle settled once, by the machine",
    );
    await closeHere(taskId);
  });

  test("a power cut after a follow-up's cycle settled, its record's rewrite lost: the settle is read again", async () => {
    scenario({ mode: "normal", settle: "valid", settleDelayMs: 300 });
    const taskId = await spawn();
    const first = await settledHere(taskId);
    const taskDir = join(home, "tasks", taskId);
    const durable = ["task.json", "result.json"].map((f) => [f, readFileSync(join(taskDir, f))] as const);
    const reply = await cli.request("task.respond", { taskId, message: "once more" });
    assert.equal(reply.cycle, 2);
    const second = await settledHere(taskId, { cycle: 2 });
    assert.notEqual(second.timing.createdAt, first.timing.createdAt, "the fake's cycles tell apart");
    // Cycle 2's settle records are in the journal; its result.json and task.json rewrite did not reach the disk.
    await powerCut(taskDir, durable);
    // Before: start-up restored cycle 2 as settled with cycle 1's result.json (and delivered it as cycle 2's), so
    // this waited in vain for cycle 2's own result.
    const r = await settledHere(taskId, { cycle: 2, check: (got) => got.timing.createdAt === second.timing.createdAt });
    assert.equal(r.status, "completed");
    assert.deepEqual(
      settleReasons(taskId).map((x) => x?.kind),
      ["remote", "remote"],
      "each cycle settled once, by the machine",
    );
    await linkUp();
    await closeHere(taskId);
  });

  test("a follow-up the machine refused, the daemon stopped before that refusal settled: start-up settles it", async () => {
    scenario({ mode: "normal", settle: "valid", settleDelayMs: 300 });
    const taskId = await spawn();
    await settledHere(taskId);
    const taskDir = join(home, "tasks", taskId);
    cli.close();
    await daemon.stop();
    // What the journal holds when the daemon stops between the refusal's record and its settle: the follow-up sent,
    // unanswered at first (its cycle started here), then refused.
    const line = (e: Record<string, unknown>) => `${JSON.stringify({ ts: Date.now(), ...e })}\n`;
    appendFileSync(
      join(taskDir, "events.jsonl"),
      line({ type: "remote_request", requestId: "rREFUSED", method: "task.respond", cycle: 2 }) +
        line({ type: "remote_cycle", cycle: 2 }) +
        line({
          type: "remote_request_refused",
          requestId: "rREFUSED",
          code: "BAD_STATE",
          message: "task is closed there (the fake's refusal)",
        }),
    );
    daemon = await runDaemon(home, { config: config() });
    cli = await connect(home, { kind: "cli", timeoutMs: 60_000 });
    // Before: cycle 2 read running for good (the machine names cycle 1, an older one, which is dropped).
    const r = await settledHere(taskId, { cycle: 2 });
    assert.equal(r.status, "failed", JSON.stringify(r));
    assert.match(r.error?.message ?? "", /the fake's refusal/);
    await linkUp();
    await closeHere(taskId);
  });

  test("a task the remote no longer knows settles gone with REMOTE_LOST, and closes here", async () => {
    scenario({ mode: "normal" });
    const taskId = await spawn();
    await until("the task followed", () =>
      ["working", "running"].includes(daemon.supervisor.tasks.get(taskId)?.result?.status ?? "") ? true : undefined,
    );
    scenario({ mode: "lost" });
    // A reconnect reads every open task again: the machine says it has no such task.
    const link = daemon.relay.linkOf("fake")!;
    process.kill(link.sshPid!, "SIGKILL");
    const r = await settledHere(taskId);
    goneHere(taskId, r, /no longer knows task t[0-9a-z]{11}/);
    const got = await cli.request("task.get", { taskId });
    assert.equal(got.status, "gone");
    const closed = await cli.request("task.close", { taskId });
    assert.equal(closed.status, "closed");
    assert.equal(daemon.supervisor.tasks.has(taskId), false);
  });

  test("a mute remote (hello, then nothing) does not delay the local socket; its tasks say unreachable since", async () => {
    scenario({ mode: "normal" });
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push(await spawn());
    for (const id of ids)
      await until("the task followed", () =>
        ["working", "running"].includes(daemon.supervisor.tasks.get(id)?.result?.status ?? "") ? true : undefined,
      );
    cli.close();
    await daemon.stop();
    scenario({ mode: "mute" });
    const t0 = Date.now();
    daemon = await runDaemon(home, { config: config() });
    cli = await connect(home, { kind: "cli", timeoutMs: 60_000 });
    const list = await cli.request("task.list", {});
    const servedMs = Date.now() - t0;
    // Generous: before, start-up waited for task.subscribe and one task.get per task (30 s each) on a mute remote.
    assert.ok(servedMs < 25_000, `the socket served after ${servedMs} ms`);
    for (const id of ids) assert.ok(list.tasks.some((t) => t.taskId === id));
    const link = daemon.relay.linkOf("fake")!;
    await until("the link up (hello answered)", () => link.state === "up" || undefined, 30_000);
    for (const id of ids) {
      const r = await cli.request("task.get", { taskId: id });
      assert.ok(["working", "running"].includes(r.status), r.status);
      assert.ok(
        r.warnings?.some((w) => w.startsWith("machine fake unreachable since ")),
        JSON.stringify(r.warnings),
      );
    }
    // The machine answers again (a reconnect): the warning goes with the outage.
    scenario({ mode: "normal" });
    process.kill(link.sshPid!, "SIGKILL");
    for (const id of ids)
      await until(
        "the warning gone",
        async () => {
          const r = await cli.request("task.get", { taskId: id });
          return !r.warnings?.some((w) => w.includes("unreachable since")) || undefined;
        },
        60_000,
      );
    for (const id of ids) await cli.request("task.close", { taskId: id });
  });
});
