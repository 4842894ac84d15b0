// Usage with cost (issue 26), end to end: real pi against the scripted model priced in its models.json writes a
// real usage.cost on each assistant message; the AgentResult's usage adds up exactly what pi wrote (input, cache
// read/write, cost), the card and `list --wide` show the cost, and `dsh-herdr usage` totals it per owner and per day,
// with the daemon and without it.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import type { Script } from "../../fixtures/scripted-model/script.js";
import type { AgentResult } from "../../src/core/types.js";
import { runCli } from "../helpers/cli.js";
import { testPiLine } from "../helpers/pi.js";
import { startHarness, type Harness } from "./daemon-harness.js";

// USD per million tokens (pi's models.json `cost`): large enough that a few hundred tokens cost cents.
const PRICES = { input: 100, output: 2000, cacheRead: 10, cacheWrite: 125 };
const SCRIPT: Script = {
  conversations: [
    {
      name: "priced",
      match: "MARK-PRICED",
      steps: [
        {
          toolCalls: [{ name: "write", arguments: { path: "priced.txt", content: "x\n" } }],
          usage: { prompt: 1500, completion: 11, cached: 400, cacheWrite: 100 },
        },
        {
          toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "Wrote priced.txt" } }],
          usage: { prompt: 1700, completion: 13, cached: 1200 },
        },
      ],
    },
  ],
};

let h: Harness;
before(async () => {
  h = await startHarness(SCRIPT, { runtime: "headless" }, {}, { cost: PRICES });
});
after(async () => {
  await h?.close();
});

/** What pi itself wrote: the sums over the session's assistant messages. */
function sessionSums(path: string) {
  const s = { assistant: 0, input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0 };
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (!line.trim()) continue;
    const e = JSON.parse(line) as { type: string; message?: { role?: string; usage?: Record<string, unknown> } };
    const u = e.message?.role === "assistant" ? e.message.usage : undefined;
    if (!u) continue;
    s.assistant++;
    s.input += u.input as number;
    s.output += u.output as number;
    s.cacheRead += u.cacheRead as number;
    s.cacheWrite += u.cacheWrite as number;
    s.cost += (u.cost as { total: number }).total;
  }
  return s;
}

const env = () => ({ ...process.env, ...h.childEnv, DSH_HERDR_HOME: h.home, NO_COLOR: "1" });
let priced: AgentResult;

test("usage.cost, inputTokens and the cache counts are what pi wrote in its session", async () => {
  const { taskId } = await h.spawn({ prompt: "MARK-PRICED write priced.txt", owner: "sess-usage-a" });
  priced = await h.wait(taskId);
  assert.equal(priced.status, "completed");
  const pi = sessionSums(priced.sessionPath!);
  assert.equal(pi.assistant, 2);
  assert.ok(pi.cost > 0, `pi priced the messages (${pi.cost})`);
  const u = priced.usage!;
  assert.equal(u.assistant, pi.assistant);
  assert.equal(u.outputTokens, pi.output);
  assert.equal(u.inputTokens, pi.input);
  assert.equal(u.cacheReadTokens, pi.cacheRead);
  assert.equal(u.cacheWriteTokens, pi.cacheWrite);
  assert.ok(Math.abs(u.cost! - pi.cost) < 1e-9, `usage.cost ${u.cost} = pi's ${pi.cost}`);
  // The scripted answers' own counts, as pi read them: input excludes the cache. The lines read an OpenAI-style
  // cached_tokens differently: 0.73 takes it as reads plus this request's writes (1500-400-100 + 1700-1200), 1.x as
  // reads alone (1500-500-100 + 1700-1200, and 500 + 1200 read).
  const [input, read] = testPiLine() === "0.73" ? [1000 + 500, 400 + 1200] : [900 + 500, 500 + 1200];
  assert.equal(u.inputTokens, input);
  assert.equal(u.cacheReadTokens, read);
  assert.equal(u.cacheWriteTokens, 100);
  // And pi's price: per million tokens from models.json.
  const expected =
    (input * PRICES.input + 24 * PRICES.output + read * PRICES.cacheRead + 100 * PRICES.cacheWrite) / 1e6;
  assert.ok(Math.abs(u.cost! - expected) < 1e-9, `${u.cost} = ${expected}`);
});

test("the card and list --wide show the cost; usage totals it per owner and per day, with and without the daemon", async () => {
  const { taskId } = await h.spawn({ prompt: "MARK-PRICED again", owner: "sess-usage-b" });
  const second = await h.wait(taskId);
  const cost = (n: number) => (n < 0.01 ? n.toFixed(4) : n.toFixed(2));

  const show = await runCli(["show", priced.taskId], { env: env() });
  assert.equal(show.code, 0, show.err);
  assert.match(show.out, new RegExp(`cost ${cost(priced.usage!.cost!).replace(".", "\\.")} \\$`));
  const u = priced.usage!;
  assert.ok(
    show.out.includes(
      `${u.inputTokens} input + ${u.cacheReadTokens} cache-read + ${u.cacheWriteTokens} cache-write tokens`,
    ),
    show.out,
  );

  const wide = await runCli(["list", "--wide"], { env: env() });
  assert.equal(wide.code, 0, wide.err);
  const header = wide.out.split("\n")[0]!;
  assert.match(header, /\bCOST\b/);
  const row = wide.out.split("\n").find((l) => l.startsWith(priced.taskId))!;
  assert.ok(row.includes(`${cost(priced.usage!.cost!)} $`), row);
  const narrow = await runCli(["list"], { env: env() });
  assert.doesNotMatch(narrow.out.split("\n")[0]!, /COST/, "the plain list keeps its columns");

  const day = new Date(priced.timing.createdAt);
  const dayKey = `${day.getFullYear()}-${String(day.getMonth() + 1).padStart(2, "0")}-${String(day.getDate()).padStart(2, "0")}`;
  const check = (j: {
    total: { cost: number; tasks: number; inputTokens: number };
    owners: { owner: string; cost: number; tasks: number }[];
    days: { day: string; owner: string; cost: number; tasks: number }[];
  }) => {
    const total = priced.usage!.cost! + second.usage!.cost!;
    assert.ok(Math.abs(j.total.cost - total) < 1e-9, `total ${j.total.cost} = ${total}`);
    assert.equal(j.total.tasks, 2);
    assert.equal(j.total.inputTokens, priced.usage!.inputTokens! + second.usage!.inputTokens!);
    const a = j.owners.find((o) => o.owner === "sess-usage-a")!;
    assert.ok(Math.abs(a.cost - priced.usage!.cost!) < 1e-9);
    assert.equal(a.tasks, 1);
    const rows = j.days.filter((d) => d.day === dayKey);
    assert.deepEqual(rows.map((d) => d.owner).sort(), ["sess-usage-a", "sess-usage-b"]);
  };
  const live = await runCli(["usage", "--json"], { env: env() });
  assert.equal(live.code, 0, live.err);
  check(JSON.parse(live.out));
  const human = await runCli(["usage"], { env: env() });
  assert.equal(human.code, 0, human.err);
  assert.match(
    human.out,
    new RegExp(`${dayKey}\\s+sess-usage-a\\s+1\\s+${cost(priced.usage!.cost!).replace(".", "\\.")} \\$`),
  );

  // Without a daemon: the same totals from the task dirs (the daemon wrote them when the cycles settled).
  await h.daemon.stop();
  const offline = await runCli(["usage", "--json"], { env: env() });
  assert.equal(offline.code, 0, offline.err);
  check(JSON.parse(offline.out));
  const { runDaemon } = await import("../../src/daemon/daemon.js");
  h.daemon = await runDaemon(h.home, {
    childEnv: h.childEnv,
    config: { readinessTimeoutMs: 60_000, runtime: "headless" },
  });
  const { connect } = await import("../../src/client/index.js");
  h.cli = await connect(h.home, { kind: "cli", timeoutMs: 120_000 });
});
