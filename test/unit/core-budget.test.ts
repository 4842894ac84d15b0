// Spend caps (issue 26), pure: which cap a cycle's usage crosses, what the owner is told, how respond raises it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  capCrossed,
  capNeeds,
  capsFor,
  dayExhausted,
  dayReservation,
  dayUse,
  formatUsd,
  givenCaps,
  raiseCaps,
  type TaskCaps,
} from "../../src/core/budget.js";
import { SessionFactsBuilder, type SessionEntry } from "../../src/core/session/session-facts.js";

const ROOT = join(import.meta.dirname, "..", "..", "..");

const usage = (cost: number, outputTokens: number, assistant: number) => ({
  assistant,
  toolCalls: 0,
  outputTokens,
  inputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  cost,
});

test("caps come from the spawn, else the config's defaults; each remembers its original amount", () => {
  assert.deepEqual(capsFor({ maxCost: 5 }, { maxOutputTokens: 1000, maxCost: 1 }), {
    cost: { limit: 5, step: 5 },
    outputTokens: { limit: 1000, step: 1000 },
  });
  assert.equal(capsFor({}, {}), undefined, "no cap at all");
});

test("a cap is crossed once the spend reaches it, checked cost, then output tokens, then turns", () => {
  const caps: TaskCaps = {
    cost: { limit: 5, step: 5 },
    outputTokens: { limit: 100, step: 100 },
    turns: { limit: 3, step: 3 },
  };
  assert.equal(capCrossed(caps, usage(4.99, 99, 2)), undefined);
  assert.deepEqual(capCrossed(caps, usage(7, 99, 2)), { cap: "cost", limit: 5, spent: 7, step: 5 });
  assert.deepEqual(capCrossed(caps, usage(1, 100, 2)), { cap: "outputTokens", limit: 100, spent: 100, step: 100 });
  assert.deepEqual(capCrossed(caps, usage(7, 120, 5)), { cap: "cost", limit: 5, spent: 7, step: 5 });
  assert.deepEqual(capCrossed(caps, usage(0, 0, 3)), { cap: "turns", limit: 3, spent: 3, step: 3 });
  assert.equal(capCrossed(undefined, usage(100, 1e6, 100)), undefined);
});

test("what the owner is told names the cap, the spend and what a respond buys", () => {
  assert.equal(
    capNeeds({ cap: "cost", limit: 5, spent: 7, step: 5 }),
    "cost cap 5.00 $ reached (7.00 $ spent); respond to continue with another 5.00 $",
  );
  assert.equal(
    capNeeds({ cap: "outputTokens", limit: 1000, spent: 1213, step: 1000 }),
    "output-token cap 1000 reached (1213 spent); respond to continue with another 1000",
  );
  assert.equal(
    capNeeds({ cap: "turns", limit: 3, spent: 3, step: 3 }),
    "turn cap 3 reached (3 spent); respond to continue with another 3",
  );
  assert.equal(formatUsd(0.0012), "0.0012 $");
  assert.equal(formatUsd(12.345), "12.35 $");
});

test("respond raises every reached cap by its original amount on top of the spend, or by an amount given again", () => {
  const caps: TaskCaps = { cost: { limit: 5, step: 5 }, turns: { limit: 10, step: 10 } };
  assert.deepEqual(raiseCaps(caps, usage(7, 0, 4), {}), {
    cost: { limit: 12, step: 5 },
    turns: { limit: 10, step: 10 },
  });
  // --max-cost again: that much more from now on, and the new amount for the next raise.
  assert.deepEqual(raiseCaps(caps, usage(7, 0, 4), { maxCost: 2 }), {
    cost: { limit: 9, step: 2 },
    turns: { limit: 10, step: 10 },
  });
  // A cap given at respond for a task that had none starts counting from the spend so far.
  assert.deepEqual(raiseCaps(undefined, usage(1, 500, 2), { maxOutputTokens: 300 }), {
    outputTokens: { limit: 800, step: 300 },
  });
  assert.equal(raiseCaps(undefined, usage(1, 1, 1), {}), undefined);
});

for (const dir of ["", "pi1"]) {
  test(`pi ${dir || "0.73"}: a turn cap counts turns that spent: the empty aborted message pi writes when the turn is stopped is none`, () => {
    // A recorded stop: one tool-calling turn, then pi's abort leaves an assistant message with no content and no usage.
    const lines = readFileSync(join(ROOT, "fixtures", "sessions", dir, "abort-mid-tool.jsonl"), "utf8")
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as SessionEntry);
    const stub = lines.at(-1)!.message as { stopReason: string; content: unknown[] };
    assert.deepEqual([stub.stopReason, stub.content], ["aborted", []]);
    const caps: TaskCaps = { turns: { limit: 1, step: 1 } };
    const b = new SessionFactsBuilder();
    let hit: ReturnType<typeof capCrossed>;
    for (const e of lines) {
      b.apply(e);
      hit ??= capCrossed(caps, b.facts().usage);
    }
    // The pause as the daemon saw it (the first turn), and the usage once pi wrote its stub agree: one turn spent.
    assert.deepEqual(hit, { cap: "turns", limit: 1, spent: 1, step: 1 });
    const after = b.facts().usage;
    assert.equal(after.assistant, 1, "usage.assistant");
    assert.equal(capCrossed(caps, after)?.spent, 1, "cap.spent after the stub");
    // respond: the spend plus the original amount, as the docs say ("another 1").
    assert.deepEqual(raiseCaps(caps, after, {}), { turns: { limit: 2, step: 1 } });
    assert.deepEqual(raiseCaps(caps, after, { maxTurns: 3 }), { turns: { limit: 4, step: 3 } });
  });
}

test("givenCaps keeps only the caps a request gave (a relayed respond forwards them, not its other params)", () => {
  const params = { taskId: "t", message: "go on", maxTurns: 3, maxCost: 0.5 };
  assert.deepEqual(givenCaps(params), { maxCost: 0.5, maxTurns: 3 });
  assert.deepEqual(givenCaps({}), {});
});

test("the day's use: spend plus what queued or running tasks reserve beyond their spend; settled tasks count their spend only", () => {
  const caps = capsFor({ maxCost: 2 });
  assert.equal(dayReservation(caps, 1), 2, "a cost cap is the reservation");
  assert.equal(dayReservation(capsFor({ maxTurns: 3 }), 0.25), 0.25, "no cost cap: the estimate");
  const use = dayUse([
    { spent: 0.3 }, // settled
    { spent: 0.2, reserved: 1 }, // running: 0.80 more reserved
    { spent: 1.5, reserved: 1 }, // running past its reservation: its spend counts
    { spent: 0, reserved: 2 }, // queued
  ]);
  assert.deepEqual(use, { spent: 2, reserved: 2.8, holders: 3 });
  assert.equal(dayExhausted(use, 4.8), true);
  assert.equal(dayExhausted(use, 4.81), false);
  assert.equal(dayExhausted(dayUse([]), 0.5), false);
});
