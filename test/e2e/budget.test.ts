// Caps that pause and ask (issue 26), end to end with real pi against the scripted model priced in its models.json:
// --max-cost and --max-output-tokens stop the child's turn (pi's abort; the child and its session stay) and settle
// the cycle blocked with the cap and the spend named; the owner's model hears it as an error-shaped delivery
// (status "blocked", naming the command a person runs), never a report or a completion; respond continues the conversation with the cap raised; budget.perDay refuses a spawn by name.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import type { AgentResult } from "../../src/core/types.js";
import { readOutbox } from "../../src/store/outbox.js";
import { connect } from "../../src/client/index.js";
import { runDaemon } from "../../src/daemon/daemon.js";
import { runCli } from "../helpers/cli.js";
import { until } from "../helpers/wait.js";
import { readJournal, startHarness, type Harness } from "./daemon-harness.js";

// Only output tokens cost (2000 $ per million): 500 output tokens are exactly 1.00 $.
const PRICES = { input: 0, output: 2000, cacheRead: 0, cacheWrite: 0 };
const write = (path: string, extra: object = {}) => ({
  toolCalls: [{ name: "write", arguments: { path, content: `${path}\n` } }],
  usage: { prompt: 1000, completion: 500 },
  ...extra,
});
/** Four turns: three writes (the third slow, so a stop lands while it is asked for), then the report. */
const steps = (tag: string) => [
  write(`${tag}-a.txt`),
  write(`${tag}-b.txt`),
  write(`${tag}-c.txt`, { delayMs: 3000 }),
  {
    toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: `Wrote the ${tag} files` } }],
    usage: { prompt: 1000, completion: 500 },
  },
];
const SCRIPT: Script = {
  conversations: [
    { name: "cost", match: "MARK-COST", steps: steps("cost") },
    { name: "tokens", match: "MARK-TOKENS", steps: steps("tokens") },
    // A turn cap of 1 is reached by the first message: the second is slow, so the stop lands while it is asked for
    // (a fast second turn could be in the session before the daemon read the first: "2 spent", a CI run showed it).
    {
      name: "turns",
      match: "MARK-TURNS",
      steps: [write("turns-a.txt"), write("turns-b.txt", { delayMs: 3000 }), ...steps("turns").slice(2)],
    },
    { name: "quick", match: "MARK-QUICK", steps: [{ text: "ok" }] },
  ],
};

let h: Harness;
before(async () => {
  h = await startHarness(SCRIPT, { runtime: "headless" }, {}, { cost: PRICES });
});
after(async () => {
  await h?.close();
});

const env = () => ({ ...process.env, ...h.childEnv, DSH_HERDR_HOME: h.home, NO_COLOR: "1" });
const taskJson = (taskId: string) =>
  JSON.parse(readFileSync(join(h.home, "tasks", taskId, "task.json"), "utf8")) as {
    caps?: Record<string, { limit: number; step: number }>;
    handle?: { pid?: number };
  };
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The paused cycle as the owner sees it: blocked, the cap in words, no error, no completion. */
function assertPaused(r: AgentResult, needs: string, cap: AgentResult["cap"]): void {
  assert.equal(r.status, "blocked");
  assert.equal(r.nextAction, "answer");
  assert.equal(r.summary, needs);
  assert.deepEqual(r.cap, cap);
  assert.equal(r.error, undefined, "a pause is no error");
}

test("--max-cost stops the turn and asks: blocked naming the cap and the spend; respond continues with another amount", async () => {
  const owner = "sess-budget-cost";
  const { taskId } = await h.spawn({ prompt: "MARK-COST write three files", owner, maxCost: 1.5 });
  const r = await h.wait(taskId);
  const needs = "cost cap 1.50 $ reached (2.00 $ spent); respond to continue with another 1.50 $";
  assertPaused(r, needs, { cap: "cost", limit: 1.5, spent: 2, step: 1.5 });
  // The settle record is the verdict, with the cap as its reason.
  const settle = readJournal(h, taskId).find((e) => e.type === "settle")!;
  assert.deepEqual(settle.reason, { kind: "cap", cap: "cost", limit: 1.5, spent: 2, step: 1.5 });
  // The owner's model hears the pause as a blocked error naming the cap, the spend and the person's command.
  const d = await until("the owner's delivery", async () =>
    (await readOutbox(h.home, owner)).find((x) => x.deliveryId === `${taskId}-c1-blocked`),
  );
  const model = (d.payload as { model: { status: string; error: string; result?: unknown } }).model;
  assert.equal(model.result, undefined);
  assert.equal(model.status, "blocked");
  assert.match(model.error, /^CAP_REACHED: cost cap 1\.50 \$ reached \(2\.00 \$ spent\)/);
  assert.ok(model.error.includes(`dsh-herdr respond ${taskId} --max-cost 1.5 "go on"`), model.error);
  assert.equal(
    (await readOutbox(h.home, owner)).some((x) => x.deliveryId.endsWith("-completed")),
    false,
  );
  // Never a kill: the child runs on, its turn stopped (pi's abort: the third write was never done).
  const pid = taskJson(taskId).handle!.pid!;
  assert.ok(alive(pid), "the child was not ended");
  await until("pi's aborted turn in the session", () =>
    readFileSync(r.sessionPath!, "utf8").includes('"stopReason":"aborted"'),
  );
  const wt = r.worktree?.path ?? h.repo;
  assert.equal(existsSync(join(wt, "cost-c.txt")), false, "the stopped turn wrote nothing more");

  // respond continues the conversation on the same child and session: the cap is the spend plus 1.50 $.
  const resp = await runCli(["respond", taskId, "go on"], { env: env() });
  assert.equal(resp.code, 0, resp.err);
  assert.deepEqual(taskJson(taskId).caps, { cost: { limit: 3.5, step: 1.5 } });
  const done = await until(
    "the second cycle settled",
    async () => {
      const x = await h.cli.request("task.get", { taskId });
      return x.status === "completed" && x;
    },
    90_000,
  );
  assert.equal(done.cap, undefined, "the completed cycle carries no cap");
  assert.equal(done.summary, "Wrote the cost files");
  assert.ok(existsSync(join(wt, "cost-c.txt")), "the work went on");
  assert.equal(taskJson(taskId).handle!.pid, pid, "the same child took the follow-up");
  assert.ok(done.usage!.cost! >= 3, `spent ${done.usage!.cost}`);
});

test("--max-output-tokens pauses the same way, also across a daemon restart; --max-output-tokens given again with respond sets the next amount", async () => {
  const r0 = await runCli(
    [
      "spawn",
      "--model",
      h.modelName,
      "--max-output-tokens",
      "800",
      "--owner",
      "sess-budget-tokens",
      "--wait",
      "--json",
      "MARK-TOKENS files",
    ],
    { env: env(), cwd: h.repo },
  );
  const r = (JSON.parse(r0.out) as { results: AgentResult[] }).results[0]!;
  assertPaused(r, "output-token cap 800 reached (1000 spent); respond to continue with another 800", {
    cap: "outputTokens",
    limit: 800,
    spent: 1000,
    step: 800,
  });
  assert.equal(r0.code, 0, r0.err);
  const show = await runCli(["show", r.taskId], { env: env() });
  assert.match(show.out, /→ blocked/);
  assert.match(show.out, /summary: output-token cap 800 reached \(1000 spent\); respond to continue with another 800/);
  // A daemon restart keeps the pause: the settle record's reason is the verdict, the caps are in task.json.
  h.cli.close();
  await h.daemon.stop();
  h.daemon = await runDaemon(h.home, {
    childEnv: h.childEnv,
    config: { readinessTimeoutMs: 60_000, runtime: "headless" },
  });
  h.cli = await connect(h.home, { kind: "cli", timeoutMs: 120_000 });
  const kept = await h.cli.request("task.get", { taskId: r.taskId });
  assert.deepEqual([kept.status, kept.summary, kept.cap], [r.status, r.summary, r.cap]);
  const resp = await runCli(["respond", r.taskId, "--max-output-tokens", "5000", "carry on"], { env: env() });
  assert.equal(resp.code, 0, resp.err);
  assert.deepEqual(taskJson(r.taskId).caps, { outputTokens: { limit: 6000, step: 5000 } });
  const done = await until(
    "the follow-up completed",
    async () => {
      const x = await h.cli.request("task.get", { taskId: r.taskId });
      return x.status === "completed" && x;
    },
    90_000,
  );
  assert.equal(done.summary, "Wrote the tokens files");
});

/** The model's turns in a session: its assistant messages, less pi's empty unbilled stub of a stopped turn. */
const turnsIn = (sessionPath: string) =>
  readFileSync(sessionPath, "utf8")
    .trimEnd()
    .split("\n")
    .map((l) => JSON.parse(l) as { message?: { role?: string; stopReason?: string; content?: unknown[] } })
    .filter((e) => e.message?.role === "assistant")
    .filter((e) => !(e.message!.stopReason === "aborted" && e.message!.content?.length === 0)).length;

test("--max-turns pauses after that many turns; respond gives another turn on top of the turns spent (pi's stopped stub is none); a bad cap flag is a usage error", async () => {
  const { taskId } = await h.spawn({ prompt: "MARK-TURNS", maxTurns: 1 });
  const r = await h.wait(taskId);
  assertPaused(r, "turn cap 1 reached (1 spent); respond to continue with another 1", {
    cap: "turns",
    limit: 1,
    spent: 1,
    step: 1,
  });
  // pi's abort leaves an empty aborted message: the turn it stopped, which spent nothing.
  await until("pi's aborted turn in the session", () =>
    readFileSync(r.sessionPath!, "utf8").includes('"stopReason":"aborted"'),
  );
  assert.equal(turnsIn(r.sessionPath!), 1);
  // respond: the spend (1 turn) plus the original amount, as the docs say, not the stub counted as a second turn.
  const resp = await runCli(["respond", taskId, "go on"], { env: env() });
  assert.equal(resp.code, 0, resp.err);
  assert.deepEqual(taskJson(taskId).caps, { turns: { limit: 2, step: 1 } });
  const again = await until(
    "the second pause",
    async () => {
      const x = await h.cli.request("task.get", { taskId });
      return x.status === "blocked" && x.cap?.limit === 2 && x;
    },
    90_000,
  );
  assert.deepEqual(again.cap, { cap: "turns", limit: 2, spent: 2, step: 1 });
  assert.equal(again.summary, "turn cap 2 reached (2 spent); respond to continue with another 1");
  assert.equal(again.usage!.assistant, 2, "usage.assistant agrees with cap.spent");
  assert.equal(turnsIn(r.sessionPath!), 2, "the turns the session holds");
  for (const bad of [
    ["--max-cost", "-3"],
    ["--max-cost", "free"],
    ["--max-turns", "1.5"],
  ]) {
    const x = await runCli(["spawn", "--model", h.modelName, ...bad, "MARK-QUICK"], { env: env(), cwd: h.repo });
    assert.equal(x.code, 2, `${bad.join(" ")}: ${x.err}`);
  }
});

test("budget.perDay refuses a spawn for an owner whose day is spent, naming the total and the reset time", async () => {
  // sess-budget-cost spent about 4 $ today (above); the budget is 3 $ a day per owner.
  const set = await runCli(["config", "set", "budget.perDay", "3"], { env: env() });
  assert.equal(set.code, 0, set.err);
  assert.match(set.err, /took/);
  const refused = await runCli(
    ["spawn", "--model", h.modelName, "--owner", "sess-budget-cost", "--json", "MARK-QUICK"],
    {
      env: env(),
      cwd: h.repo,
    },
  );
  assert.equal(refused.code, 1);
  const err = (JSON.parse(refused.err) as { error: { code: string; message: string } }).error;
  assert.equal(err.code, "BUDGET_EXCEEDED");
  assert.match(err.message, /owner sess-budget-cost has spent \d+\.\d\d \$ today, its budget\.perDay is 3\.00 \$/);
  assert.match(err.message, /resets at \d{4}-\d\d-\d\d 00:00 \(local, UTC[+-]\d\d:\d\d\)/);
  // Per owner: another owner's day is not spent.
  const other = await runCli(
    ["spawn", "--model", h.modelName, "--owner", "sess-budget-fresh", "--json", "MARK-QUICK"],
    {
      env: env(),
      cwd: h.repo,
    },
  );
  assert.equal(other.code, 0, other.err);
  await h.wait((JSON.parse(other.out) as { taskId: string }).taskId);
  // usage says the same total.
  const u = JSON.parse((await runCli(["usage", "--json", "--owner", "sess-budget-cost"], { env: env() })).out) as {
    total: { cost: number };
  };
  assert.ok(u.total.cost >= 3, `${u.total.cost}`);
  await runCli(["config", "unset", "budget.perDay"], { env: env() });
});
