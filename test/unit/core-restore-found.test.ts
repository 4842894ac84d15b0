// Recovery hands the machine what it found of a task's cycle (FoundCycle); the machine chooses the phase (phaseFound).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import fc from "fast-check";
import { repoRoot } from "../helpers/pi.js";
import { phaseFound, step, type FoundCycle, type Phase, type TaskState } from "../../src/core/lifecycle/task-cycle.js";
import { planRecovery, type RecoveryInput } from "../../src/core/lifecycle/recovery-plan.js";

const agentEnd = { kind: "agent_end", stopReason: "stop" } as const;

test("phaseFound: each finding gives its phase; a settled one without a journaled reason settled before the crash", () => {
  const table: [FoundCycle, Phase][] = [
    [
      { found: "prompt_out", cycle: 2 },
      { name: "running", cycle: 2 },
    ],
    [
      { found: "prompt_pending", cycle: 1 },
      { name: "awaiting_prompt", cycle: 1 },
    ],
    [
      { found: "follow_up", cycle: 3 },
      { name: "queued", cycle: 3 },
    ],
    [
      { found: "follow_up", cycle: 3, childEnded: true },
      { name: "queued", cycle: 3, parked: true },
    ],
    [
      { found: "settled", cycle: 1, reason: agentEnd, status: "completed" },
      { name: "settled", cycle: 1, reason: agentEnd, status: "completed" },
    ],
    [
      { found: "settled", cycle: 2, childEnded: true },
      { name: "settled", cycle: 2, reason: { kind: "settled_before_crash" }, parked: true },
    ],
  ];
  for (const [found, phase] of table) {
    assert.deepEqual(phaseFound(found), phase, JSON.stringify(found));
    const s: TaskState = { phase: { name: "queued", cycle: 1 }, childConnected: false };
    assert.deepEqual(step(s, { type: "restored", found, childAlive: false }).state.phase, phase, "step restores it");
  }
});

test("a settled child that still runs is parked again after idleChildMs; a running cycle gets its timeout again", () => {
  const s: TaskState = { phase: { name: "queued", cycle: 1 }, childConnected: false };
  const limits = { timeoutMs: 1000, idleMs: 50, readinessMs: 10 };
  const settled = step(
    s,
    { type: "restored", found: { found: "settled", cycle: 1, reason: agentEnd }, childAlive: true },
    limits,
  );
  assert.ok(settled.effects.some((e) => e.type === "arm_timer" && e.kind === "idle"));
  const ended = step(
    s,
    { type: "restored", found: { found: "settled", cycle: 1, childEnded: true }, childAlive: false },
    limits,
  );
  assert.ok(!ended.effects.some((e) => e.type === "arm_timer"));
  const running = step(s, { type: "restored", found: { found: "prompt_out", cycle: 1 }, childAlive: true }, limits);
  assert.ok(running.effects.some((e) => e.type === "arm_timer" && e.kind === "timeout"));
});

const inputArb: fc.Arbitrary<RecoveryInput> = fc.record({
  cycle: fc.integer({ min: 1, max: 4 }),
  harvested: fc.boolean(),
  launched: fc.boolean(),
  alive: fc.boolean(),
  prompted: fc.boolean(),
  accepted: fc.boolean(),
  settling: fc.boolean(),
  endedMeanwhile: fc.boolean(),
});

test("property: a recovery plan's finding restores the cycle the record holds, settled only when it was harvested", () => {
  fc.assert(
    fc.property(inputArb, (i) => {
      const plan = planRecovery(i);
      if (!("found" in plan)) return;
      const phase = phaseFound(plan.found);
      assert.equal(phase.name !== "closed" && phase.cycle, i.cycle);
      assert.equal(phase.name === "settled", i.harvested);
    }),
  );
});

test("no module outside src/core names the phase a task is restored to", () => {
  const files = (dir: string): string[] =>
    readdirSync(dir).flatMap((n) => {
      const p = join(dir, n);
      return statSync(p).isDirectory() ? files(p) : p.endsWith(".ts") ? [p] : [];
    });
  const src = join(repoRoot, "src");
  const bad = files(src)
    .filter((f) => !relative(src, f).startsWith("core/"))
    .filter((f) => /type:\s*"restored",\s*phase:|"restored"[^;]*\bphase:\s*\{/s.test(readFileSync(f, "utf8")))
    .map((f) => relative(src, f));
  assert.deepEqual(bad, []);
});
