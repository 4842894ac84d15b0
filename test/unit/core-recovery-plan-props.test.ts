// Property tests of the recovery plan (src/core/lifecycle/recovery-plan.ts): whatever a restarted daemon finds (a handle or
// none, a launch record or none, a child alive or gone), a cycle that settled or was closed is never run again.
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { planRecovery, type RecoveryInput } from "../../src/core/lifecycle/recovery-plan.js";
import { phaseFound } from "../../src/core/lifecycle/task-cycle.js";

const inputArb: fc.Arbitrary<RecoveryInput> = fc
  .record({
    cycle: fc.integer({ min: 1, max: 4 }),
    harvested: fc.boolean(),
    closed: fc.option(fc.record({ closePane: fc.boolean() }), { nil: undefined }),
    interrupted: fc.option(fc.record({ code: fc.constantFrom(undefined, "TIMEOUT", "ABORTED") }), { nil: undefined }),
    launched: fc.boolean(),
    alive: fc.boolean(),
    prompted: fc.boolean(),
    accepted: fc.boolean(),
    settling: fc.boolean(),
    endedMeanwhile: fc.boolean(),
    status: fc.constantFrom(undefined, "completed", "failed", "blocked", "gone", "interrupted", "working"),
  })
  .map((r) => {
    const i: RecoveryInput = { ...r };
    if (r.closed === undefined) delete i.closed;
    if (r.interrupted === undefined) delete i.interrupted;
    else if (r.interrupted.code === undefined) i.interrupted = {};
    if (r.status === undefined) delete i.status;
    return i;
  });

/** Plans that run the task's cycle again: a new launch, or a new prompt of that cycle. */
const RERUNS = new Set(["start_again", "relaunch_follow_up", "push_prompt"]);

test("no recovery plan runs a settled (harvested or journaled settle) or closed cycle again", () => {
  fc.assert(
    fc.property(inputArb, (i) => {
      const plan = planRecovery(i);
      if (i.closed) assert.equal(plan.kind, "finish_close");
      if (i.harvested || i.settling || i.closed)
        assert.ok(!RERUNS.has(plan.kind), `${plan.kind} for ${JSON.stringify(i)}`);
      // A harvested cycle keeps its stored verdict (unless closed or interrupted first).
      if (i.harvested && !i.closed && !i.interrupted) assert.equal(plan.kind, "keep_settled", JSON.stringify(i));
    }),
    { numRuns: 2000 },
  );
});

test("a cycle that settled failed with no handle (its launch stalled) keeps its verdict after a restart", () => {
  const plan = planRecovery({
    cycle: 1,
    harvested: true,
    launched: false,
    alive: false,
    prompted: false,
    accepted: false,
    settling: true,
    endedMeanwhile: false,
    status: "failed",
  });
  assert.equal(plan.kind, "keep_settled");
  // The phase the machine chooses from what recovery found.
  assert.deepEqual(plan.kind === "keep_settled" && phaseFound(plan.found), {
    name: "settled",
    cycle: 1,
    reason: { kind: "settled_before_crash" },
    parked: true,
    status: "failed",
  });
});
