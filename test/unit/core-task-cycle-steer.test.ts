// Steering (issue 25 item 8): `respond` to a task whose cycle is in flight is a steer of that cycle (its message
// joins the running turn; no new cycle, no settle); to a settled completed/blocked one it is a follow-up (a new
// cycle). The lifecycle machine (src/core/lifecycle/task-cycle.ts) decides which, journals the steer before its push, pushes
// pending steers to a child that (re)connects, and marks a steer the cycle ended without as missed. Table-driven.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  respondAs,
  step,
  type CycleEvent,
  type Effect,
  type Phase,
  type TaskState,
} from "../../src/core/lifecycle/task-cycle.js";

const st = (phase: Phase, childConnected = true): TaskState => ({ phase, childConnected });
const run = (s: TaskState, ...evs: CycleEvent[]) => {
  const effects: Effect[] = [];
  for (const e of evs) {
    const r = step(s, e);
    s = r.state;
    effects.push(...r.effects);
  }
  return { state: s, effects };
};
const kinds = (effects: Effect[]) => effects.map((e) => e.type);
const journals = (effects: Effect[]) =>
  effects.flatMap((e) => (e.type === "journal" ? [e.entry as { type: string; [k: string]: unknown }] : []));
const running: Phase = { name: "running", cycle: 1 };
const settledOk: Phase = { name: "settled", cycle: 1, reason: { kind: "agent_end", stopReason: "stop" } };

test("respondAs: a cycle in flight is steered, a settled completed/blocked one gets a follow-up, others neither", () => {
  const rows: [string, Phase, string, ReturnType<typeof respondAs>][] = [
    ["queued for a slot", { name: "queued", cycle: 1 }, "starting", "steer"],
    ["a queued follow-up", { name: "queued", cycle: 2 }, "running", "steer"],
    ["launching", { name: "launching", cycle: 1, attempt: 1 }, "starting", "steer"],
    ["prompt on its way", { name: "awaiting_prompt", cycle: 1 }, "starting", "steer"],
    ["running", running, "running", "steer"],
    ["running, status working", running, "working", "steer"],
    ["settled completed", settledOk, "completed", "follow_up"],
    ["settled blocked", settledOk, "blocked", "follow_up"],
    ["settled parked", { ...settledOk, parked: true }, "completed", "follow_up"],
    ["settled failed", settledOk, "failed", undefined],
    ["settled gone", settledOk, "gone", undefined],
    ["settled interrupted", { ...settledOk, reason: { kind: "owner_abort" } }, "interrupted", undefined],
    ["closed", { name: "closed" }, "closed", undefined],
  ];
  for (const [what, phase, status, want] of rows) assert.equal(respondAs(phase, status), want, what);
});

test("a steer of a running cycle is journaled, then pushed; the cycle goes on (no new cycle, no settle)", () => {
  const r = step(st(running), { type: "steer", n: 1, bytes: 12 });
  assert.deepEqual(r.state.phase, running, "same phase, same cycle");
  assert.deepEqual(kinds(r.effects), ["journal", "push_steer"], "journal first, then the push");
  assert.deepEqual(journals(r.effects), [{ type: "steered", cycle: 1, n: 1, bytes: 12 }]);
  assert.deepEqual(r.effects[1], { type: "push_steer", cycle: 1, n: 1 });
  assert.deepEqual(r.state.steers, [{ cycle: 1, n: 1 }], "pending until pi takes it");
  // pi took it: journaled once; a repeated answer (a reconnect, a restarted daemon's push) changes nothing.
  const taken = step(r.state, { type: "steer_taken", cycle: 1, n: 1 });
  assert.deepEqual(journals(taken.effects), [{ type: "steer_taken", cycle: 1, n: 1 }]);
  assert.deepEqual(taken.state.steers ?? [], []);
  assert.deepEqual(step(taken.state, { type: "steer_taken", cycle: 1, n: 1 }).effects, []);
  // The same steer fed twice is journaled once, also after pi took it (steer numbers only grow).
  assert.deepEqual(step(r.state, { type: "steer", n: 1, bytes: 12 }).effects, []);
  assert.deepEqual(step(taken.state, { type: "steer", n: 1, bytes: 12 }).effects, []);
  // Its cycle then ends normally: one settle, nothing missed.
  const end = step(taken.state, { type: "agent_end", willRetry: false, stopReason: "stop" });
  assert.equal(end.state.phase.name, "settled");
  assert.equal(kinds(end.effects).includes("steers_missed"), false);
});

test("a steer while the child is away waits for its hello; a child that (re)connects gets every pending steer", () => {
  const away = step(st(running, false), { type: "steer", n: 1, bytes: 3 });
  assert.deepEqual(kinds(away.effects), ["journal"], "journaled, not pushed: no child to push to");
  const two = step(away.state, { type: "steer", n: 2, bytes: 3 });
  const hello = step(two.state, { type: "child_hello" });
  assert.deepEqual(hello.effects, [
    { type: "push_steer", cycle: 1, n: 1 },
    { type: "push_steer", cycle: 1, n: 2 },
  ]);
  // A steer of a cycle whose prompt is still on its way: the prompt goes first, then the steers.
  const starting = run(
    st({ name: "awaiting_prompt", cycle: 1 }, false),
    { type: "steer", n: 1, bytes: 3 },
    { type: "child_hello" },
  );
  assert.deepEqual(
    kinds(starting.effects).filter((k) => k.startsWith("push_")),
    ["push_prompt", "push_steer"],
  );
  // Queued for a slot (no child yet): kept for the cycle, pushed when its child says hello.
  const queued = run(
    st({ name: "queued", cycle: 1 }, false),
    { type: "steer", n: 1, bytes: 3 },
    { type: "admitted" },
    { type: "launch_returned" },
    { type: "child_hello" },
  );
  assert.deepEqual(
    queued.effects.filter((e) => e.type === "push_steer"),
    [{ type: "push_steer", cycle: 1, n: 1 }],
  );
  // No steer, no change to a hello's effects.
  assert.deepEqual(step(st(running, false), { type: "child_hello" }).effects, []);
});

test("a settled, failed or closed task is not steered: the event is moot", () => {
  for (const phase of [settledOk, { name: "closed" } as Phase]) {
    const r = step(st(phase), { type: "steer", n: 1, bytes: 3 });
    assert.deepEqual(r.effects, [], phase.name);
    assert.equal(r.state.steers, undefined, phase.name);
  }
});

test("a cycle that ends before pi took a steer marks it missed: journaled after the settle record, before the harvest", () => {
  const endings: CycleEvent[] = [
    { type: "agent_end", willRetry: false, stopReason: "stop" },
    { type: "contract_error" },
    { type: "runtime_gone", how: "gone" },
    { type: "timeout_fired", ms: 1 },
    { type: "abort" },
    { type: "settle_recovered", reason: { kind: "settled_before_crash" } },
  ];
  for (const ending of endings) {
    const pending = run(st(running), { type: "steer", n: 1, bytes: 3 }, { type: "steer", n: 2, bytes: 3 });
    const taken = step(pending.state, { type: "steer_taken", cycle: 1, n: 1 }).state;
    const r = step(taken, ending);
    assert.equal(r.state.phase.name, "settled", ending.type);
    const k = kinds(r.effects);
    const settleAt = r.effects.findIndex((e) => e.type === "journal" && e.entry.type === "settle");
    const missedAt = r.effects.findIndex((e) => e.type === "journal" && e.entry.type === "steer_missed");
    assert.ok(settleAt >= 0 && missedAt > settleAt, `${ending.type}: the settle is the verdict, recorded first`);
    assert.deepEqual(
      journals(r.effects).filter((j) => j.type === "steer_missed"),
      [{ type: "steer_missed", cycle: 1, n: 2 }],
      `${ending.type}: only the steer pi did not take`,
    );
    assert.ok(k.indexOf("steers_missed") < k.indexOf("harvest_settled"), `${ending.type}: before the harvest`);
    assert.deepEqual(r.effects[k.indexOf("steers_missed")], { type: "steers_missed", cycle: 1, ns: [2] });
    assert.deepEqual(r.state.steers ?? [], [], `${ending.type}: nothing pending after the settle`);
    // A late answer for a missed steer changes nothing.
    assert.deepEqual(step(r.state, { type: "steer_taken", cycle: 1, n: 2 }).effects, []);
  }
  // A retry pi makes keeps the cycle, and its steers, going.
  const retry = run(st(running), { type: "steer", n: 1, bytes: 3 }, { type: "agent_end", willRetry: true });
  assert.deepEqual(retry.state.steers, [{ cycle: 1, n: 1 }]);
  // Closing drops pending steers without a settle.
  const closed = run(
    st(running),
    { type: "steer", n: 1, bytes: 3 },
    { type: "close", closePane: false, headless: true },
  );
  assert.deepEqual(closed.state.steers ?? [], []);
});

test("recovery puts back the steers the journal shows pending; a restored settled phase keeps none", () => {
  const ev: CycleEvent = { type: "steers_restored", steers: [{ cycle: 2, n: 3 }], last: 3 };
  const base = step(st({ name: "queued", cycle: 1 }, false), ev).state;
  const resumed = run(
    base,
    { type: "restored", found: { found: "prompt_out", cycle: 2 }, childAlive: true },
    { type: "child_hello" },
  );
  assert.deepEqual(
    resumed.effects.filter((e) => e.type === "push_steer"),
    [{ type: "push_steer", cycle: 2, n: 3 }],
  );
  assert.deepEqual(step(resumed.state, { type: "steer", n: 3, bytes: 1 }).effects, [], "a restored number is used");
  const kept = step(base, {
    type: "restored",
    found: { found: "settled", cycle: 2, reason: settledOk.reason },
    childAlive: true,
  });
  assert.deepEqual(kept.state.steers ?? [], []);
  // The cycle ended while the daemon was away: the steer is missed at the recovered settle.
  const ended = run(
    base,
    { type: "restored", found: { found: "prompt_out", cycle: 2 }, childAlive: false },
    { type: "settle_recovered", reason: { kind: "settled_before_crash" } },
  );
  assert.deepEqual(
    journals(ended.effects).filter((j) => j.type === "steer_missed"),
    [{ type: "steer_missed", cycle: 2, n: 3 }],
  );
});
