// Every error code the socket protocol can return, reached through a real daemon; each message names the fix.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runDaemon, type RunningDaemon } from "../../src/daemon/daemon.js";
import { connect, type DaemonClient } from "../../src/client/index.js";
import type { DshError } from "../../src/core/errors.js";
import { gitRepo } from "../e2e/daemon-harness.js";
import { killUnder } from "../helpers/procs.js";

let dir: string;
let d: RunningDaemon;
let cli: DaemonClient;
let repo: string;

const code = (c: string, fix: RegExp) => (e: DshError) => {
  assert.equal(e.code, c, e.message);
  assert.match(e.message, fix);
  return true;
};

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "dsh-proto-"));
  repo = gitRepo(dir);
  // A "pi" that never says hello: exercises the readiness barrier without a model.
  const fakePi = join(dir, "silent-pi");
  writeFileSync(fakePi, "#!/bin/sh\nexec sleep 300\n");
  chmodSync(fakePi, 0o755);
  d = await runDaemon(join(dir, "home"), {
    childEnv: { DSH_HERDR_PI_BIN: fakePi },
    config: { runtime: "headless", readinessTimeoutMs: 300, allowCwd: [dir], maxParallelAgents: 1, maxQueuedAgents: 0 },
  });
  cli = await connect(d.home, { kind: "cli" });
});
after(async () => {
  cli?.close();
  for (const live of d.supervisor.tasks.values()) await live.close(true);
  await d?.stop();
  killUnder(dir); // a backstop: nothing of this test's may outlive it
  rmSync(dir, { recursive: true, force: true });
});

test("home is 0700, socket 0600; a second daemon on the same home is DAEMON_RUNNING", async () => {
  assert.equal(statSync(d.home).mode & 0o777, 0o700);
  assert.equal(statSync(d.socketPath).mode & 0o777, 0o600);
  await assert.rejects(runDaemon(d.home), code("DAEMON_RUNNING", /daemon stop/));
  assert.equal((await cli.request("daemon.status")).pid, process.pid);
});

test("spawn refusals: BAD_PARAMS, CWD_NOT_ALLOWED, NOT_A_REPO, SPAWN_REFUSED", async () => {
  await assert.rejects(cli.request("task.spawn", { cwd: repo }), code("BAD_PARAMS", /prompt|task/));
  await assert.rejects(
    cli.request("task.spawn", { cwd: "relative/path", prompt: "x" }),
    code("BAD_PARAMS", /params\.cwd/),
  );
  await assert.rejects(
    cli.requestUnchecked("task.spawn", { cwd: repo, prompt: "x", role: "boss" }),
    code("BAD_PARAMS", /params\.role must be one of/),
  );
  await assert.rejects(
    cli.request("task.spawn", { cwd: join(dir, "nope"), prompt: "x" }),
    code("BAD_PARAMS", /existing directory/),
  );
  await assert.rejects(cli.request("task.spawn", { cwd: tmpdir(), prompt: "x" }), code("CWD_NOT_ALLOWED", /allowCwd/));
  const plain = join(dir, "plain");
  mkdirSync(plain);
  await assert.rejects(
    cli.request("task.spawn", { cwd: plain, prompt: "x", isolated: true }),
    code("NOT_A_REPO", /git init/),
  );
  const cfg = d.supervisor.deps.config();
  cfg.enabled = false;
  try {
    await assert.rejects(cli.request("task.spawn", { cwd: repo, prompt: "x" }), code("SPAWN_REFUSED", /enabled/));
  } finally {
    cfg.enabled = true;
  }
});

test("a child that never says hello: one retry, then failed with AGENT_STALLED; CONCURRENCY_LIMIT while it holds the slot", async () => {
  const { taskId } = await cli.request("task.spawn", {
    cwd: repo,
    prompt: "stall please",
    owner: "alice",
  });
  await assert.rejects(
    cli.request("task.spawn", { cwd: repo, prompt: "second" }),
    code("CONCURRENCY_LIMIT", /maxQueuedAgents/),
  );
  const { results } = await cli.request("task.wait", { taskIds: [taskId], timeoutMs: 30_000 });
  assert.equal(results[0]!.status, "failed");
  assert.equal(results[0]!.error?.code, "AGENT_STALLED");
  assert.match(results[0]!.error!.message, /twice.*check the model/);
  // respond is refused unless completed or blocked; another owner may not touch it
  await assert.rejects(
    cli.request("task.respond", { taskId, message: "hi" }),
    code("BAD_STATE", /completed or blocked/),
  );
  const bob = await connect(d.home, { kind: "owner", ownerId: "bob" });
  await assert.rejects(bob.request("task.respond", { taskId, message: "hi" }), code("NOT_OWNER", /only its owner/));
  await assert.rejects(bob.request("task.close", { taskId }), code("NOT_OWNER", /only its owner/));
  await assert.rejects(
    bob.request("task.spawn", { cwd: repo, prompt: "x", owner: "alice" }),
    code("NOT_OWNER", /drop params\.owner/),
  );
  bob.close();
  const closed = await cli.request("task.close", { taskId });
  assert.equal(closed.status, "closed");
  assert.equal((await cli.request("task.get", { taskId })).status, "closed");
});

test("task lookups: TASK_NOT_FOUND; child access rules: UNAUTHORIZED, FORBIDDEN", async () => {
  await assert.rejects(cli.request("task.get", { taskId: "tzzzzzzzzzzz" }), code("TASK_NOT_FOUND", /dsh-herdr list/));
  await assert.rejects(
    cli.request("task.wait", { taskIds: ["tzzzzzzzzzzz"] }),
    code("TASK_NOT_FOUND", /dsh-herdr list/),
  );
  await assert.rejects(
    connect(d.home, { kind: "child", taskId: "tzzzzzzzzzzz", token: "guess" }),
    code("UNAUTHORIZED", /DSH_HERDR_TASK_TOKEN/),
  );
  await assert.rejects(
    cli.request("child.report", { outcome: "completed", report: "x" }),
    code("FORBIDDEN", /child connections only/),
  );
  await assert.rejects(cli.requestUnchecked("no.such"), code("UNKNOWN_METHOD", /socket-protocol\.md/));
  await assert.rejects(cli.request("hello", { kind: "cli" }), code("BAD_STATE", /new one/));
});

test("frames: invalid JSON, missing id and 1 MiB+ frames get error replies; the connection lives on", async () => {
  const replies = await new Promise<any[]>((resolve, reject) => {
    const s = createConnection(d.socketPath);
    let buf = "";
    const t = setTimeout(() => reject(new Error(buf)), 5000);
    s.on("data", (c) => {
      buf += c;
      const lines = buf.split("\n").filter(Boolean);
      if (lines.length === 4) {
        clearTimeout(t);
        s.destroy();
        resolve(lines.map((l) => JSON.parse(l)));
      }
    });
    s.write('{oops\n{"method":"daemon.status"}\n');
    s.write(Buffer.alloc(1024 * 1024 + 1, 0x20));
    s.write('\n{"id":7,"method":"hello","params":{"kind":"cli"}}\n');
  });
  assert.deepEqual(
    replies.map((r) => r.error?.code ?? "ok"),
    ["BAD_REQUEST", "BAD_REQUEST", "FRAME_TOO_LARGE", "ok"],
  );
  assert.match(replies[2].error.message, /1 MiB/);
});

test("timeouts: task.wait returns timedOut; a client request without reply is TIMEOUT", async () => {
  const { taskId } = await cli.request("task.spawn", { cwd: repo, prompt: "stall again" });
  const w = await cli.request("task.wait", {
    taskIds: [taskId],
    timeoutMs: 50,
  });
  assert.equal(w.timedOut, true);
  assert.equal(w.results[0]!.status, "starting");
  await assert.rejects(
    cli.request("task.wait", { taskIds: [taskId] }, { timeoutMs: 50 }),
    code("TIMEOUT", /daemon status/),
  );
  const ab = await cli.request("task.abort", { taskIds: [taskId] });
  assert.deepEqual(ab, { aborted_ids: [taskId], missing_ids: [], foreign_ids: [] });
});
