// Spend caps (issue 26), pure: which cap a cycle's usage crosses, what the owner is told, how respond raises it.
import { test } from "node:test";
import assert from "node:assert/strict";
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
