// Property tests of the lifecycle machine (src/core/lifecycle/task-cycle.ts): random event sequences, with duplicates,
// reordering, late and foreign cycles, timers that fire when armed (and stale ones that fire after a cancel), against
// the invariants the daemon relies on.
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  inBarrier,
  isInFlight,
  lifecycleOf,
  settleVerdict,
  step,
  type CycleEvent,
  type Effect,
  type TaskState,
  type TimerKind,
} from "../../src/core/lifecycle/task-cycle.js";

const KINDS: TimerKind[] = ["timeout", "idle", "readiness", "follow_up"];

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
  // This daemon's own verdicts on a relayed cycle (the machine's word refused, the task gone there).
  cycleArb.map<CycleEvent>((cycle) => ({ type: "remote_invalid", cycle, field: "taskId", message: "refused" })),
  cycleArb.map<CycleEvent>((cycle) => ({ type: "remote_lost", cycle, message: "lost" })),
  // A spend cap reached as the session grows (issue 26): repeated, late, while not running.
  fc
    .constantFrom("cost", "outputTokens", "turns")
    .map<CycleEvent>((cap) => ({ type: "cap_reached", cap: cap as "cost", limit: 5, spent: 7, step: 5 })),
  // Steers (respond to a cycle in flight) and pi's answers, for any cycle: a small pool of ids so they repeat.
  fc.integer({ min: 1, max: 3 }).map<CycleEvent>((n) => ({ type: "steer", n, bytes: 5 })),
  fc
    .record({ cycle: cycleArb, n: fc.integer({ min: 1, max: 3 }) })
    .map<CycleEvent>((r) => ({ type: "steer_taken", ...r })),
  // A timer that fires whether or not it is armed (a stale callback racing its cancel): the machine must not care.
  fc.constantFrom(...KINDS).map<CycleEvent>((kind) => ({ type: "timer_fired", kind })),
  // The settled harvest records its status (the daemon feeds it after each settled harvest; late or foreign too).
  fc
    .record({ cycle: cycleArb, status: fc.constantFrom("completed", "blocked", "failed", "gone", "interrupted") })
    .map<CycleEvent>((r) => ({ type: "harvested", ...r })),
  fc.constant<CycleEvent>({ type: "settle_recovered", reason: { kind: "contract_error" }, journaled: true }),
);
/** A step of a sequence: an event, or "the armed timer number `pick` fires" (resolved against what is armed). */
type Move = CycleEvent | { type: "fire_armed"; pick: number };
const moveArb: fc.Arbitrary<Move> = fc.oneof(
  { weight: 4, arbitrary: eventArb },
  { weight: 1, arbitrary: fc.nat(3).map<Move>((pick) => ({ type: "fire_armed", pick })) },
  // The settled harvest as the daemon feeds it: for the cycle that just settled, with the status the evidence gave.
  {
    weight: 1,
    arbitrary: fc
      .constantFrom("completed", "blocked", "failed")
      .map<Move>((status) => ({ type: "harvested", cycle: 0, status })),
  },
);
// Events are often repeated (a duplicate push, a second agent_end): sequences draw from a small pool too.
const sequenceArb = fc.array(moveArb, { minLength: 1, maxLength: 60 });

interface Trace {
  states: TaskState[];
  effects: Effect[][];
  /** The events as fed (fire_armed resolved to a timer_fired, harvested{cycle 0} to the current cycle). */
  events: CycleEvent[];
  /** The timers armed after each step (from the effects: arm adds, cancel removes, a fire removes). */
  armed: Set<TimerKind>[];
}
const LIMITS = { timeoutMs: 5000, idleMs: 3000, readinessMs: 1000 };
function run(moves: Move[]): Trace {
  let state: TaskState = { phase: { name: "queued", cycle: 1 }, childConnected: false };
  const armed = new Set<TimerKind>();
  const t: Trace = { states: [state], effects: [], events: [], armed: [new Set()] };
  for (const m of moves) {
    let ev: CycleEvent;
    if (m.type === "fire_armed") {
      const kinds = [...armed];
      if (kinds.length === 0) continue;
      ev = { type: "timer_fired", kind: kinds[m.pick % kinds.length]! };
    } else if (m.type === "harvested" && m.cycle === 0) {
      if (state.phase.name !== "settled") continue;
      ev = { ...m, cycle: state.phase.cycle };
    } else ev = m;
    // A timer that fires is no longer armed (idle_expired and timeout_fired are the same firings by their old names).
    if (ev.type === "timer_fired") armed.delete(ev.kind);
    if (ev.type === "idle_expired") armed.delete("idle");
    if (ev.type === "timeout_fired") armed.delete("timeout");
    const r = step(state, ev, LIMITS);
    for (const e of r.effects) {
      if (e.type === "arm_timer") armed.add(e.kind);
      if (e.type === "cancel_timer") armed.delete(e.kind);
    }
    state = r.state;
    t.states.push(state);
    t.effects.push(r.effects);
    t.events.push(ev);
    t.armed.push(new Set(armed));
  }
  return t;
}
const settles = (effects: Effect[]) =>
  effects.filter((e) => e.type === "journal" && e.entry.type === "settle") as Extract<Effect, { type: "journal" }>[];

test("one settle record per cycle, whatever arrives twice, late or for another cycle", () => {
  fc.assert(
    fc.property(sequenceArb, (moves) => {
      const seen = new Map<number, number>();
      for (const effs of run(moves).effects)
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
    fc.property(sequenceArb, (moves) => {
      const t = run(moves);
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
    fc.property(sequenceArb, (moves) => {
      const t = run(moves);
      for (let i = 1; i < t.states.length; i++) {
        const before = t.states[i - 1]!.phase;
        const after = t.states[i]!.phase;
        if (before.name !== "settled") continue;
        const ev = t.events[i - 1]!;
        if (after.name === "settled") {
          assert.equal(after.cycle, before.cycle);
          assert.deepEqual(after.reason, before.reason, `${ev.type} re-judged a settled cycle`);
          // Its recorded status (the verdict the commands ask) is set once and never changes.
          if (before.status !== undefined) assert.equal(after.status, before.status, `${ev.type} changed the status`);
        } else if (after.name === "closed") {
          assert.ok(ev.type === "close" || ev.type === "abort", ev.type);
          // The abort of a settled cycle closes it and ends its child; the verdict stands (no settle, no harvest).
          if (ev.type === "abort") {
            const effs = t.effects[i - 1]!;
            assert.ok(effs.some((e) => e.type === "journal" && e.entry.type === "closed" && e.entry.via === "abort"));
            assert.ok(effs.some((e) => e.type === "end_child"));
            assert.equal(effs.filter((e) => e.type === "harvest_settled").length, 0);
          }
        } else {
          // A follow-up: respond here, or (a relayed task) the other machine took the next cycle.
          assert.ok(ev.type === "respond" || ev.type === "remote_started", ev.type);
          assert.equal(after.cycle, before.cycle + 1);
        }
        // An abort of a settled cycle closes it: never a second settle, never interrupted.
        if (ev.type === "abort") assert.equal(settles(t.effects[i - 1]!).length, 0);
        // A respond only follows a cycle the harvest recorded as completed or blocked.
        if (ev.type === "respond" && after.name === "queued")
          assert.ok(before.status === "completed" || before.status === "blocked", String(before.status));
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
    "type_prompt",
    "diagnose_start",
    "push_steer",
    "stop_turn",
  ]);
  fc.assert(
    fc.property(sequenceArb, (moves) => {
      const t = run(moves);
      t.effects.forEach((effs, i) => {
        const journals = effs.map((e, k) => (e.type === "journal" ? k : -1)).filter((k) => k >= 0);
        const acts = effs.map((e, k) => (ACTS.has(e.type) ? k : -1)).filter((k) => k >= 0);
        if (journals.length && acts.length) assert.ok(Math.max(...journals) < Math.min(...acts), JSON.stringify(effs));
        // A settle recovery found journaled already is the verdict: it is carried out, never written twice.
        const ev = t.events[i]!;
        const journaled = "journaled" in ev && ev.journaled === true;
        const n = settles(effs).length;
        const harvests = effs.filter((e) => e.type === "harvest_settled").length;
        if (journaled) assert.equal(n, 0, JSON.stringify(effs));
        else assert.equal(harvests, n, `settles ${n}, harvests ${harvests}: ${JSON.stringify(effs)}`);
      });
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
    fc.property(sequenceArb, (moves) => {
      const t = run(moves);
      for (let i = 1; i < t.states.length; i++) {
        const before = t.states[i - 1]!.phase;
        const ev = t.events[i - 1]!;
        // The task's timeout is an ending too.
        const timedOut = ev.type === "timer_fired" && ev.kind === "timeout";
        const inFlight = before.name === "launching" || before.name === "awaiting_prompt" || before.name === "running";
        if (!inFlight || !(ENDINGS.has(ev.type) || timedOut)) continue;
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
    fc.property(sequenceArb, (moves) => {
      const t = run(moves);
      for (let i = 1; i < t.states.length; i++) {
        const ev = t.events[i - 1]!;
        if (ev.type !== "cap_reached") continue;
        const before = t.states[i - 1]!.phase;
        const after = t.states[i]!.phase;
        const effs = t.effects[i - 1]!;
        assert.ok(!effs.some((e) => e.type === "end_child"), JSON.stringify(effs));
        if (before.name !== "running") {
          assert.deepEqual(effs, []);
          continue;
        }
        // Not interrupted either (the lifecycle override is read from the phase now, not set by an effect).
        assert.equal(lifecycleOf(after), undefined, JSON.stringify(after));
        assert.equal(after.name, "settled");
        const reason = (after as Extract<typeof after, { name: "settled" }>).reason;
        assert.equal(reason.kind, "cap");
        assert.equal(settleVerdict(reason).status, "blocked", "a cap is never a completion");
        assert.ok(effs.some((e) => e.type === "stop_turn"));
      }
    }),
    { numRuns: 2000 },
  );
});

test("every in-flight ending yields exactly one harvest (one owner outcome) per cycle over the whole life", () => {
  fc.assert(
    fc.property(sequenceArb, (moves) => {
      const t = run(moves);
      const harvests = new Map<number, number>();
      for (let i = 1; i < t.states.length; i++) {
        const before = t.states[i - 1]!.phase;
        const after = t.states[i]!.phase;
        const n = t.effects[i - 1]!.filter((e) => e.type === "harvest_settled").length;
        if (after.name === "settled" && before.name !== "settled") {
          // Every way into settled is one harvest (a relayed cycle's remote_settled included).
          assert.equal(n, 1, `${t.events[i - 1]!.type}: ${n} harvests`);
          harvests.set(after.cycle, (harvests.get(after.cycle) ?? 0) + 1);
        } else assert.equal(n, 0, `${t.events[i - 1]!.type} in ${before.name}: a harvest without a settle`);
      }
      for (const [c, n] of harvests) assert.equal(n, 1, `cycle ${c}: ${n} owner outcomes`);
    }),
    { numRuns: 2000 },
  );
});

test("timers: armed only where their phase needs them, all gone once settled or closed", () => {
  fc.assert(
    fc.property(sequenceArb, (moves) => {
      const t = run(moves);
      for (let i = 0; i < t.states.length; i++) {
        const p = t.states[i]!.phase;
        const armed = t.armed[i]!;
        const at = `after ${t.events
          .slice(0, i)
          .map((e) => e.type)
          .join(",")}: ${[...armed]} in ${JSON.stringify(p)}`;
        if (p.name === "closed") assert.equal(armed.size, 0, at);
        if (p.name === "settled") {
          for (const k of armed) assert.equal(k, "idle", at);
          if (p.parked) assert.ok(!armed.has("idle"), at);
        }
        if (p.name === "queued") assert.equal(armed.size, 0, at);
        if (armed.has("readiness")) assert.ok(inBarrier(p), at);
        if (armed.has("timeout")) assert.ok(isInFlight(p), at);
        if (armed.has("follow_up")) assert.ok(p.name === "awaiting_prompt" && p.attempt === undefined, at);
        if (armed.has("idle")) assert.ok(p.name === "settled" && !p.parked, at);
      }
    }),
    { numRuns: 2000 },
  );
});

test("a steer never moves the phase, and each steer journaled is taken or missed at most once, never both", () => {
  fc.assert(
    fc.property(sequenceArb, (moves) => {
      const t = run(moves);
      const fate = new Map<string, string>();
      t.events.forEach((ev, i) => {
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

test("the readiness barrier: attempt counts to 2; a second stall launches nothing more, the start's diagnosis settles", () => {
  fc.assert(
    fc.property(sequenceArb, (moves) => {
      const t = run(moves);
      const retries = new Map<number, number>();
      for (let i = 1; i < t.states.length; i++) {
        const p = t.states[i]!.phase;
        if (p.name === "launching" || p.name === "awaiting_prompt")
          assert.ok(p.attempt === undefined || p.attempt === 1 || p.attempt === 2, JSON.stringify(p));
        for (const e of t.effects[i - 1]!) {
          if (e.type === "relaunch" && e.attempt === 2) {
            const c = (p as { cycle: number }).cycle;
            retries.set(c, (retries.get(c) ?? 0) + 1);
            assert.ok(retries.get(c)! <= 1, `cycle ${c} retried twice`);
          }
          if (e.type === "journal" && e.entry.type === "stalled" && e.entry.attempt === 2) {
            // The second stall gives up: no relaunch, its diagnosis asked, the cycle waits for launch_failed.
            const effs = t.effects[i - 1]!;
            assert.ok(!effs.some((x) => x.type === "relaunch"), JSON.stringify(effs));
            assert.ok(
              effs.some((x) => x.type === "diagnose_start"),
              JSON.stringify(effs),
            );
            assert.deepEqual(p.name === "launching" && p.stalled, true, JSON.stringify(p));
          }
        }
      }
    }),
    { numRuns: 2000 },
  );
});

test("a long run reaches every phase: the generator is not hollow", () => {
  const seen = new Set<string>();
  fc.assert(
    fc.property(sequenceArb, (moves) => {
      const t = run(moves);
      for (const s of t.states) seen.add(s.phase.name === "launching" && s.phase.stalled ? "stalled" : s.phase.name);
      for (const effs of t.effects)
        for (const e of effs) {
          if (e.type === "relaunch") seen.add(`relaunch${e.attempt}`);
          if (e.type === "stop_turn") seen.add("cap");
          if (e.type === "journal" && (e.entry.type === "steer_taken" || e.entry.type === "steer_missed"))
            seen.add(e.entry.type);
        }
    }),
    { numRuns: 5000, seed: 23 },
  );
  for (const name of [
    "queued",
    "launching",
    "awaiting_prompt",
    "running",
    "settled",
    "closed",
    "stalled",
    "relaunch1",
    "relaunch2",
    "cap",
    "steer_taken",
    "steer_missed",
  ])
    assert.ok(seen.has(name), `never reached ${name}: ${[...seen]}`);
});
