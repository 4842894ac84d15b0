// Property tests of the lifecycle machine (src/core/task-cycle.ts): random event sequences, with duplicates,
// reordering, late and foreign cycles, against the invariants the daemon relies on.
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { step, type CycleEvent, type Effect, type TaskState } from "../../src/core/task-cycle.js";

const cycleArb = fc.integer({ min: 1, max: 4 });
const eventArb: fc.Arbitrary<CycleEvent> = fc.oneof(
  fc.constant<CycleEvent>({ type: "admitted" }),
  fc.constant<CycleEvent>({ type: "launch_returned" }),
  fc.constant<CycleEvent>({ type: "launch_failed", code: "AGENT_STALLED", message: "stalled" }),
  fc.constant<CycleEvent>({ type: "child_hello" }),
  fc.constant<CycleEvent>({ type: "child_left" }),
  cycleArb.map<CycleEvent>((cycle) => ({ type: "prompt_accepted", cycle })),
  cycleArb.map<CycleEvent>((cycle) => ({ type: "prompt_failed", cycle, message: "No API key" })),
  fc
    .record({
      cycle: fc.option(cycleArb, { nil: undefined }),
      willRetry: fc.boolean(),
      stopReason: fc.constantFrom(undefined, "stop", "error", "aborted"),
    })
    .map<CycleEvent>((r) => ({
      type: "agent_end",
      willRetry: r.willRetry,
      ...(r.cycle !== undefined ? { cycle: r.cycle } : {}),
      ...(r.stopReason !== undefined ? { stopReason: r.stopReason } : {}),
    })),
  fc.constant<CycleEvent>({ type: "contract_error" }),
  fc
    .record({ retryMayFollow: fc.boolean(), fresh: fc.boolean() })
    .map<CycleEvent>((r) => ({ type: "session_settled", ...r })),
  fc.constantFrom<CycleEvent>(
    { type: "evidence_changed", what: "session" },
    { type: "evidence_changed", what: "result" },
  ),
  fc.constantFrom<CycleEvent>({ type: "runtime_gone", how: "gone" }, { type: "runtime_gone", how: "exited" }),
  fc.constant<CycleEvent>({ type: "timeout_fired", ms: 1000 }),
  fc.constant<CycleEvent>({ type: "idle_expired" }),
  fc.constant<CycleEvent>({ type: "respond" }),
  fc.constant<CycleEvent>({ type: "slot_granted" }),
  fc.constant<CycleEvent>({ type: "abort" }),
  fc.record({ closePane: fc.boolean(), headless: fc.boolean() }).map<CycleEvent>((r) => ({ type: "close", ...r })),
  fc.constant<CycleEvent>({ type: "record_lost", message: "gone" }),
  fc.constant<CycleEvent>({ type: "settle_recovered", reason: { kind: "settled_before_crash" } }),
  // A relayed task's events (the other machine's daemon runs the cycle): the same invariants hold.
  cycleArb.map<CycleEvent>((cycle) => ({ type: "remote_started", cycle })),
  fc
    .record({ cycle: cycleArb, status: fc.constantFrom("completed", "failed", "blocked", "gone") })
    .map<CycleEvent>((r) => ({ type: "remote_settled", ...r })),
  // A spend cap reached as the session grows (issue 26): repeated, late, while not running.
  fc
    .constantFrom("cost", "outputTokens", "turns")
    .map<CycleEvent>((cap) => ({ type: "cap_reached", cap: cap as "cost", limit: 5, spent: 7, step: 5 })),
  // Steers (respond to a cycle in flight) and pi's answers, for any cycle: a small pool of ids so they repeat.
  fc.integer({ min: 1, max: 3 }).map<CycleEvent>((n) => ({ type: "steer", n, bytes: 5 })),
  fc
    .record({ cycle: cycleArb, n: fc.integer({ min: 1, max: 3 }) })
    .map<CycleEvent>((r) => ({ type: "steer_taken", ...r })),
);
// Events are often repeated (a duplicate push, a second agent_end): sequences draw from a small pool too.
const sequenceArb = fc.array(eventArb, { minLength: 1, maxLength: 60 });

interface Trace {
  states: TaskState[];
  effects: Effect[][];
}
function run(events: CycleEvent[]): Trace {
  let state: TaskState = { phase: { name: "queued", cycle: 1 }, childConnected: false };
  const t: Trace = { states: [state], effects: [] };
  for (const ev of events) {
    const r = step(state, ev);
    state = r.state;
    t.states.push(state);
    t.effects.push(r.effects);
  }
  return t;
}
const settles = (effects: Effect[]) =>
  effects.filter((e) => e.type === "journal" && e.entry.type === "settle") as Extract<Effect, { type: "journal" }>[];

test("one settle record per cycle, whatever arrives twice, late or for another cycle", () => {
  fc.assert(
    fc.property(sequenceArb, (events) => {
      const seen = new Map<number, number>();
      for (const effs of run(events).effects)
        for (const s of settles(effs)) {
          const c = (s.entry as { cycle: number }).cycle;
          seen.set(c, (seen.get(c) ?? 0) + 1);
        }
      for (const [c, n] of seen) assert.equal(n, 1, `cycle ${c} settled ${n} times`);
    }),
    { numRuns: 2000 },
  );
});

test("closed is final: no phase change and no effect after the close", () => {
  fc.assert(
    fc.property(sequenceArb, (events) => {
      const t = run(events);
      const at = t.states.findIndex((s) => s.phase.name === "closed");
      if (at < 0) return;
      for (let i = at; i < t.states.length; i++) assert.equal(t.states[i]!.phase.name, "closed");
      for (let i = at; i < t.effects.length; i++) assert.deepEqual(t.effects[i], [], `effects after close: ${i}`);
    }),
    { numRuns: 2000 },
  );
});

test("a settled cycle is final: it leaves settled only by respond (a new cycle) or by closing (abort, close)", () => {
  fc.assert(
    fc.property(sequenceArb, (events) => {
      const t = run(events);
      for (let i = 1; i < t.states.length; i++) {
        const before = t.states[i - 1]!.phase;
        const after = t.states[i]!.phase;
        if (before.name !== "settled") continue;
        const ev = events[i - 1]!;
        if (after.name === "settled") {
          assert.equal(after.cycle, before.cycle);
          assert.deepEqual(after.reason, before.reason, `${ev.type} re-judged a settled cycle`);
        } else if (after.name === "closed") assert.ok(ev.type === "close" || ev.type === "abort", ev.type);
        else {
          // A follow-up: respond here, or (a relayed task) the other machine took the next cycle.
          assert.ok(ev.type === "respond" || ev.type === "remote_started", ev.type);
          assert.equal(after.cycle, before.cycle + 1);
        }
        // An abort of a settled cycle closes it: never a second settle, never interrupted.
        if (ev.type === "abort") assert.equal(settles(t.effects[i - 1]!).length, 0);
      }
    }),
    { numRuns: 2000 },
  );
});

test("journal before act, and every settle has exactly one settled harvest (one owner outcome) after it", () => {
  const ACTS = new Set([
    "end_child",
    "harvest_settled",
    "relaunch",
    "push_prompt",
    "push_steer",
    "set_lifecycle",
    "stop_turn",
  ]);
  fc.assert(
    fc.property(sequenceArb, (events) => {
      for (const effs of run(events).effects) {
        const journals = effs.map((e, i) => (e.type === "journal" ? i : -1)).filter((i) => i >= 0);
        const acts = effs.map((e, i) => (ACTS.has(e.type) ? i : -1)).filter((i) => i >= 0);
        if (journals.length && acts.length) assert.ok(Math.max(...journals) < Math.min(...acts), JSON.stringify(effs));
        const n = settles(effs).length;
        const harvests = effs.filter((e) => e.type === "harvest_settled").length;
        assert.equal(harvests, n, `settles ${n}, harvests ${harvests}: ${JSON.stringify(effs)}`);
      }
    }),
    { numRuns: 2000 },
  );
});

test("every in-flight ending settles: after a terminal event the cycle is never left in flight", () => {
  const ENDINGS = new Set([
    "launch_failed",
    "prompt_failed",
    "contract_error",
    "timeout_fired",
    "abort",
    "record_lost",
  ]);
  fc.assert(
    fc.property(sequenceArb, (events) => {
      const t = run(events);
      for (let i = 1; i < t.states.length; i++) {
        const before = t.states[i - 1]!.phase;
        const ev = events[i - 1]!;
        const inFlight = before.name === "launching" || before.name === "awaiting_prompt" || before.name === "running";
        if (!inFlight || !ENDINGS.has(ev.type)) continue;
        if (ev.type === "prompt_failed" && ev.cycle !== before.cycle) continue; // a foreign cycle's word
        if (ev.type === "contract_error" && before.name !== "running") continue; // only a run ends reportless
        const after = t.states[i]!.phase;
        assert.equal(after.name, "settled", `${ev.type} in ${before.name} left ${after.name}`);
        assert.equal(settles(t.effects[i - 1]!).length, 1);
      }
    }),
    { numRuns: 2000 },
  );
});

test("a spend cap never kills and never completes: it settles a running cycle blocked, or does nothing", () => {
  fc.assert(
    fc.property(sequenceArb, (events) => {
      const t = run(events);
      for (let i = 1; i < t.states.length; i++) {
        const ev = events[i - 1]!;
        if (ev.type !== "cap_reached") continue;
        const before = t.states[i - 1]!.phase;
        const after = t.states[i]!.phase;
        const effs = t.effects[i - 1]!;
        assert.ok(!effs.some((e) => e.type === "end_child" || e.type === "set_lifecycle"), JSON.stringify(effs));
        if (before.name !== "running") {
          assert.deepEqual(effs, []);
          continue;
        }
        assert.equal(after.name, "settled");
        assert.equal((after as { reason: { kind: string } }).reason.kind, "cap");
        assert.ok(effs.some((e) => e.type === "stop_turn"));
      }
    }),
    { numRuns: 2000 },
  );
});

test("a steer never moves the phase, and each steer journaled is taken or missed at most once, never both", () => {
  fc.assert(
    fc.property(sequenceArb, (events) => {
      const t = run(events);
      const fate = new Map<string, string>();
      events.forEach((ev, i) => {
        if (ev.type === "steer") assert.deepEqual(t.states[i + 1]!.phase, t.states[i]!.phase);
        for (const e of t.effects[i]!) {
          if (e.type !== "journal") continue;
          const j = e.entry as { type: string; cycle?: number; n?: number };
          if (j.type !== "steered" && j.type !== "steer_taken" && j.type !== "steer_missed") continue;
          const key = `${j.cycle}.${j.n}`;
          if (j.type === "steered") assert.equal(fate.has(key), false, `steer ${key} journaled twice`);
          else assert.equal(fate.get(key), "steered", `steer ${key}: ${j.type} after ${fate.get(key) ?? "nothing"}`);
          fate.set(key, j.type);
        }
      });
    }),
    { numRuns: 2000 },
  );
});
