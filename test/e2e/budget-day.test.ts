// budget.perDay against spawns at once, with real pi against the scripted model priced in its models.json: every
// task queued or running reserves its cost cap (else budget.reservePerTask) until its spend is known, so six spawns
// at once under a 0.50 $ day admit one, not six; and a queued task is checked again when it gets its slot, so one
// whose day was spent while it waited fails BUDGET_EXCEEDED without its prompt reaching the model.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { Script } from "../../fixtures/scripted-model/script.js";
import type { DshError } from "../../src/core/errors.js";
import { runCli } from "../helpers/cli.js";
import { startHarness, type Harness } from "./daemon-harness.js";

// Only output tokens cost (2000 $ per million): 500 output tokens are exactly 1.00 $.
const PRICES = { input: 0, output: 2000, cacheRead: 0, cacheWrite: 0 };
/** Two turns of 1.00 $ each; the first slow, so a spawn behind it is still queued. */
const paid = (tag: string) => [
  {
    toolCalls: [{ name: "write", arguments: { path: `${tag}.txt`, content: "x\n" } }],
    usage: { prompt: 1000, completion: 500 },
    delayMs: 3000,
  },
  {
    toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: `${tag} done` } }],
    usage: { prompt: 1000, completion: 500 },
  },
];
const SCRIPT: Script = {
  conversations: [
    { name: "six", match: "MARK-SIX", steps: paid("six") },
    { name: "first", match: "MARK-FIRST", steps: paid("first") },
    { name: "second", match: "MARK-SECOND", steps: paid("second") },
  ],
};

let h: Harness;
before(async () => {
  h = await startHarness(SCRIPT, { runtime: "headless", maxParallelAgents: 1 }, {}, { cost: PRICES });
  // In config.json, as a person sets it (the harness's own config would override what `config set` writes later).
  const set = await runCli(["config", "set", "budget.perDay", "0.5"], { env: env() });
  assert.equal(set.code, 0, set.err);
});
after(async () => {
  await h?.close();
});

const env = () => ({ ...process.env, ...h.childEnv, DSH_HERDR_HOME: h.home, NO_COLOR: "1" });

test("budget.perDay 0.50 $ and six spawns at once: one is admitted (it reserves 1.00 $), five are refused by name", async () => {
  const owner = "sess-day-six";
  const tries = await Promise.allSettled(
    Array.from({ length: 6 }, (_, k) => h.spawn({ prompt: `MARK-SIX ${k}`, owner })),
  );
  const admitted = tries.filter((t) => t.status === "fulfilled") as PromiseFulfilledResult<{ taskId: string }>[];
  const refused = tries
    .filter((t) => t.status === "rejected")
    .map((t) => (t as PromiseRejectedResult).reason as DshError);
  assert.equal(admitted.length, 1, `admitted ${admitted.length} of 6`);
  assert.equal(refused.length, 5);
  for (const e of refused) {
    assert.equal(e.code, "BUDGET_EXCEEDED", e.message);
    assert.match(
      e.message,
      /owner sess-day-six has spent 0\.00 \$ today and reserves 1\.00 \$ for 1 task\(s\) queued or running/,
    );
    assert.match(e.message, /budget\.reservePerTask/);
  }
  const r = await h.wait(admitted[0]!.value.taskId);
  assert.equal(r.status, "completed");
  assert.equal(r.usage?.cost, 2);
});

test("a queued task is checked again when it gets its slot: the day spent while it waited, it fails BUDGET_EXCEEDED and its prompt never reaches the model", async () => {
  const owner = "sess-day-queue";
  // Reserve 0.10 $ per task: the second spawn fits beside the first while nothing is spent yet.
  const set = await runCli(["config", "set", "budget.reservePerTask", "0.1"], { env: env() });
  assert.equal(set.code, 0, set.err);
  assert.match(set.err, /took/);
  try {
    const first = await h.spawn({ prompt: "MARK-FIRST go", owner });
    const second = await h.spawn({ prompt: "MARK-SECOND go", owner });
    assert.equal(second.queued, true, "one slot: the second waits");
    const a = await h.wait(first.taskId);
    assert.equal(a.usage?.cost, 2);
    const b = await h.wait(second.taskId);
    assert.equal(b.status, "failed", JSON.stringify(b));
    assert.equal(b.error?.code, "BUDGET_EXCEEDED");
    assert.match(b.error?.message ?? "", /owner sess-day-queue has spent 2\.00 \$ today/);
    assert.equal(
      h.model.requests().some((q) => JSON.stringify(q.body).includes("MARK-SECOND")),
      false,
      "the refused task's prompt never reached the model",
    );
  } finally {
    await runCli(["config", "unset", "budget.reservePerTask"], { env: env() });
  }
});
