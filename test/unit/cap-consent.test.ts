// A spend cap is lifted by a person: an owner pi's respond to a task paused at a cap, or one that gives a cap, is
// refused by name unless config.json owner.mayRaiseCaps allows it; the CLI (a person) may.
import { test } from "node:test";
import assert from "node:assert/strict";
import { DshError } from "../../src/core/errors.js";
import { assertMayRaiseCaps } from "../../src/daemon/methods/cap-consent.js";
import type { AgentResult } from "../../src/core/types.js";

const paused = {
  rec: { taskId: "tabc123456789" },
  result: { status: "blocked", cap: { cap: "turns", limit: 1, spent: 1, step: 1 } } as AgentResult,
};
const asked = { rec: { taskId: "tabc123456789" }, result: { status: "blocked" } as AgentResult };
const owner = { kind: "owner" as const };
const cli = { kind: "cli" as const };

test("an owner's respond to a cap-paused task is refused CAP_NEEDS_PERSON, naming the person's command", () => {
  assert.throws(
    () => assertMayRaiseCaps({}, owner, paused, {}),
    (e: unknown) =>
      e instanceof DshError &&
      e.code === "CAP_NEEDS_PERSON" &&
      e.message.includes('dsh-herdr respond tabc123456789 --max-turns 1 "go on"') &&
      /ask the user/i.test(e.message),
  );
  assert.throws(() => assertMayRaiseCaps({ owner: { mayLand: true } }, owner, paused, {}), /CAP_NEEDS_PERSON|person/);
  // Giving a cap with a respond is raising one too.
  assert.throws(
    () => assertMayRaiseCaps({}, owner, asked, { maxCost: 5 }),
    (e: unknown) => e instanceof DshError && e.code === "CAP_NEEDS_PERSON",
  );
});

test("allowed: the person at the CLI, an owner with owner.mayRaiseCaps, and an owner answering a child's own question", () => {
  assertMayRaiseCaps({}, cli, paused, { maxTurns: 3 });
  assertMayRaiseCaps({ owner: { mayRaiseCaps: true } }, owner, paused, {});
  assertMayRaiseCaps({ owner: { mayRaiseCaps: true } }, owner, asked, { maxCost: 2 });
  assertMayRaiseCaps({}, owner, asked, {});
});
