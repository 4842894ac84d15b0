// Ownership through a real daemon process with real pi children (scripted model, headless runtime): owner B cannot
// respond to, close or abort owner A's task, nor spawn in A's name, nor speak as A's child with its own task's
// token; a mixed abort reports foreign and missing ids without acting on them, and A's task still completes.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { connect, type DaemonClient } from "../../src/client/index.js";
import type { DshError } from "../../src/core/errors.js";
import { killUnder, processesUnder } from "../helpers/procs.js";
import { cliClient, makeRepo, startDaemonProc, startShared, until, type Shared } from "./proc-harness.js";

const SCRIPT: Script = {
  conversations: [
    {
      name: "a",
      match: "MARK-OWNER-A",
      steps: [
        // Slow first step: B tries everything while A's child is mid-cycle.
        { toolCalls: [{ name: "write", arguments: { path: "a.txt", content: "a\n" } }], delayMs: 4000 },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "A done" } }] },
        { text: "A finished" },
      ],
    },
    {
      name: "quick",
      match: "MARK-OWNER-QUICK",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "q.txt", content: "q\n" } }] },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "quick done" } }] },
        { text: "quick finished" },
      ],
    },
    {
      name: "b",
      match: "MARK-OWNER-B",
      steps: [{ text: "B waits", delayMs: 120_000 }],
    },
  ],
};

let shared: Shared;
before(async () => {
  shared = await startShared(SCRIPT, "dsh-own-");
});
after(async () => {
  await shared?.close();
});

const code = (c: string) => (e: DshError) => e.code === c && e.message.length > 0;
type Ev = { type: string };
const journal = (home: string, id: string): Ev[] =>
  readFileSync(join(home, "tasks", id, "events.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Ev);

test("owner B is refused on owner A's running task (respond, close, abort, spawn as A, A's child hello); A's task completes untouched", async () => {
  const dir = join(shared.dir, "o");
  const repo = makeRepo(dir);
  const home = join(dir, "home");
  const d = await startDaemonProc(home, shared.childEnv);
  const idA = "a11ce000aaaa-owner";
  const idB = "b0b00000bbbb-owner";
  const clients: DaemonClient[] = [];
  try {
    const a = await connect(home, { kind: "owner", ownerId: idA, timeoutMs: 120_000 });
    const b = await connect(home, { kind: "owner", ownerId: idB, timeoutMs: 120_000 });
    const cli = await cliClient(home);
    clients.push(a, b, cli);
    const { taskId } = await a.request("task.spawn", {
      model: shared.modelName,
      cwd: repo,
      prompt: "MARK-OWNER-A go",
      isolated: true,
    });
    const { taskId: taskB } = await b.request("task.spawn", {
      model: shared.modelName,
      cwd: repo,
      prompt: "MARK-OWNER-B go",
      isolated: true,
    });
    await until(
      "A running",
      async () => ((await cli.request("task.get", { taskId })).status === "running" ? true : undefined),
      60_000,
    );

    await assert.rejects(b.request("task.respond", { taskId, message: "hijack" }), code("NOT_OWNER"));
    await assert.rejects(b.request("task.close", { taskId }), code("NOT_OWNER"));
    await assert.rejects(
      b.request("task.spawn", { model: shared.modelName, cwd: repo, prompt: "x", owner: idA }),
      code("NOT_OWNER"),
    );
    const missing = "t000000000zz";
    const mixed = await b.request("task.abort", { taskIds: [taskId, missing] });
    assert.deepEqual(mixed, { aborted_ids: [], foreign_ids: [taskId], missing_ids: [missing] });
    // "all" means B's own tasks: naming A as owner changes nothing on an owner connection.
    const all = await b.request("task.abort", {
      all: true,
      owner: idA,
    });
    assert.deepEqual(all.aborted_ids, [taskB], JSON.stringify(all));
    // B's child token (read from B's own record) does not open A's task.
    const tokenB = (JSON.parse(readFileSync(join(home, "tasks", taskB, "task.json"), "utf8")) as { token: string })
      .token;
    await assert.rejects(connect(home, { kind: "child", taskId, token: tokenB }), code("UNAUTHORIZED"));

    const w = await cli.request("task.wait", { taskIds: [taskId], timeoutMs: 90_000 }, { timeoutMs: 95_000 });
    const r = w.results[0]!;
    assert.equal(r.status, "completed", JSON.stringify(r));
    const types = journal(home, taskId).map((e) => e.type);
    for (const t of ["respond", "interrupted", "closed"])
      assert.ok(!types.includes(t), `A's journal has no ${t}: ${types.join(",")}`);
    assert.ok(
      !JSON.stringify(shared.model.requests().map((q) => q.body)).includes("hijack"),
      "B's follow-up never reached the model",
    );
    // A's delivery went to A only.
    await until(
      "A's delivery queued",
      () => (existsSync(join(home, "owners", idA, "outbox.jsonl")) ? true : undefined),
      30_000,
    );
    assert.match(readFileSync(join(home, "owners", idA, "outbox.jsonl"), "utf8"), new RegExp(taskId));
    const outB = join(home, "owners", idB, "outbox.jsonl");
    assert.ok(!existsSync(outB) || !readFileSync(outB, "utf8").includes(taskId), "B got no delivery of A's task");
    // The owner itself may still act: A closes its task.
    const closed = await a.request("task.close", { taskId, closePane: true });
    assert.equal(closed.status, "closed");
    await b.request("task.close", { taskId: taskB, closePane: true });
    await until("every child gone after close", () => (processesUnder(home).length === 0 ? true : undefined), 30_000);
  } finally {
    for (const c of clients) c.close();
    d.proc.kill("SIGTERM");
    await d.exited;
    killUnder(home);
  }
});

test("owner B neither reads nor checks owner A's tasks, open or closed (get, patch, wait, fetch, check, list); the CLI sees all", async () => {
  const dir = join(shared.dir, "r");
  const repo = makeRepo(dir);
  const home = join(dir, "home");
  const d = await startDaemonProc(home, shared.childEnv);
  const idA = "a11ce000aaaa-reader";
  const idB = "b0b00000bbbb-reader";
  const clients: DaemonClient[] = [];
  try {
    const a = await connect(home, { kind: "owner", ownerId: idA, timeoutMs: 120_000 });
    const b = await connect(home, { kind: "owner", ownerId: idB, timeoutMs: 120_000 });
    const cli = await cliClient(home);
    clients.push(a, b, cli);
    const spawnA = (prompt: string) =>
      a.request("task.spawn", {
        model: shared.modelName,
        cwd: repo,
        prompt,
        isolated: true,
        checks: ["exit 3"],
      });
    const closedA = (await spawnA("MARK-OWNER-QUICK one")).taskId;
    const openA = (await spawnA("MARK-OWNER-QUICK two")).taskId;
    const w = await cli.request("task.wait", { taskIds: [closedA, openA], timeoutMs: 90_000 }, { timeoutMs: 95_000 });
    for (const r of w.results) assert.equal(r.verified, false, JSON.stringify(r));
    await a.request("task.close", { taskId: closedA });
    const receipts = (id: string) =>
      JSON.stringify(
        (JSON.parse(readFileSync(join(home, "tasks", id, "task.json"), "utf8")) as { checkRun?: unknown }).checkRun,
      );
    const before = { [closedA]: receipts(closedA), [openA]: receipts(openA) };

    for (const taskId of [closedA, openA]) {
      await assert.rejects(b.request("task.get", { taskId }), code("NOT_OWNER"), `task.get ${taskId}`);
      await assert.rejects(b.request("task.patch", { taskId }), code("NOT_OWNER"), `task.patch ${taskId}`);
      await assert.rejects(b.request("task.check", { taskId }), code("NOT_OWNER"), `task.check ${taskId}`);
      await assert.rejects(b.request("task.wait", { taskIds: [taskId], timeoutMs: 1000 }), code("NOT_OWNER"));
      await assert.rejects(b.request("task.fetch", { taskId, part: "result" }), code("NOT_OWNER"));
      assert.equal(receipts(taskId), before[taskId], "A's check receipts were not rewritten");
    }
    await assert.rejects(b.request("task.list", { owner: idA }), code("NOT_OWNER"));
    const listedB = await b.request("task.list", {});
    assert.deepEqual(listedB.tasks, [], "B lists only its own tasks (none)");
    // A reads and checks its own; the CLI sees everyone's.
    assert.equal((await a.request("task.get", { taskId: closedA })).taskId, closedA);
    assert.ok((await a.request("task.patch", { taskId: openA })).patch?.includes("q.txt"));
    assert.equal((await a.request("task.list", {})).tasks.length, 2);
    assert.equal((await cli.request("task.list", {})).tasks.length, 2);
    assert.equal((await cli.request("task.get", { taskId: openA })).taskId, openA);
    await a.request("task.close", { taskId: openA, closePane: true });
    await until("every child gone after close", () => (processesUnder(home).length === 0 ? true : undefined), 30_000);
  } finally {
    for (const c of clients) c.close();
    d.proc.kill("SIGTERM");
    await d.exited;
    killUnder(home);
  }
});
