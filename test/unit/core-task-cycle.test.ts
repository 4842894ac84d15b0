// The lifecycle machine (src/core/lifecycle/task-cycle.ts) and the recovery plan, table-driven: no timers, no socket.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  closedAfterSettle,
  commandAllowed,
  lifecycleOf,
  phaseFound,
  settleVerdict,
  step,
  type CycleEvent,
  type Effect,
  type Phase,
  type TaskState,
} from "../../src/core/lifecycle/task-cycle.js";
import { planRecovery, type RecoveryInput } from "../../src/core/lifecycle/recovery-plan.js";
import { deliveryFor } from "../../src/core/crew/crew-delivery.js";
import type { AgentResult } from "../../src/core/types.js";

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
const settles = (effects: Effect[]) => effects.filter((e) => e.type === "harvest_settled").length;
const running: Phase = { name: "running", cycle: 1 };

test("every way a running cycle ends is exactly one settle, journaled before anything it records is done", () => {
  const endings: [string, CycleEvent, string][] = [
    ["agent_end", { type: "agent_end", willRetry: false, stopReason: "stop" }, "agent_end"],
    ["contract error", { type: "contract_error" }, "contract_error"],
    [
      "prompt pi refused",
      { type: "prompt_failed", cycle: 1, message: "No API key found for anthropic." },
      "prompt_failed",
    ],
    ["pane gone", { type: "runtime_gone", how: "gone" }, "runtime_gone"],
    ["timeout", { type: "timeout_fired", ms: 1000 }, "timeout"],
    ["owner abort", { type: "abort" }, "owner_abort"],
    ["launch failed", { type: "launch_failed", code: "AGENT_STALLED", message: "x" }, "start_failed"],
    ["record lost", { type: "record_lost", message: "gone" }, "record_lost"],
  ];
  for (const [what, ev, kind] of endings) {
    const { state, effects } = run(st(running), ev);
    assert.equal(state.phase.name, "settled", what);
    assert.equal((state.phase as { reason: { kind: string } }).reason.kind, kind, what);
    assert.equal(settles(effects), 1, what);
    const k = kinds(effects);
    const settleJournal = effects.findIndex((e) => e.type === "journal" && e.entry.type === "settle");
    assert.ok(settleJournal >= 0 && settleJournal < k.indexOf("harvest_settled"), `${what}: settle journaled first`);
    assert.ok(k.indexOf("release_slot") < k.indexOf("harvest_settled"), `${what}: the slot frees with the settle`);
    // A settled cycle is final: nothing that arrives later settles it again.
    // (An owner's abort is the one command that may still end a finished cycle: tested below.)
    for (const late of endings.filter((e) => e[1].type !== "abort"))
      assert.equal(settles(step(state, late[1]).effects), 0, `${what} then ${late[0]}`);
  }
});

test("a settled cycle is final: late evidence is journaled, never re-judged; only respond starts a new cycle", () => {
  const settled = run(st(running), { type: "agent_end", willRetry: false }).state;
  const late = step(settled, { type: "evidence_changed", what: "result" });
  assert.equal(late.state, settled);
  assert.deepEqual(kinds(late.effects), ["journal"]);
  assert.equal((late.effects[0] as { entry: { type: string } }).entry.type, "late_evidence");
  for (const ev of [
    { type: "agent_end", willRetry: false },
    { type: "session_settled", retryMayFollow: false, fresh: true },
    { type: "contract_error" },
    { type: "prompt_accepted", cycle: 1 },
    { type: "timeout_fired", ms: 1 },
  ] as CycleEvent[]) {
    assert.equal(step(settled, ev).state.phase, settled.phase, ev.type);
    assert.equal(settles(step(settled, ev).effects), 0, ev.type);
  }
  const next = run(
    settled,
    { type: "harvested", cycle: 1, status: "completed" },
    { type: "respond" },
    { type: "slot_granted" },
  );
  assert.deepEqual(next.state.phase, { name: "awaiting_prompt", cycle: 2 });
  assert.ok(kinds(next.effects).includes("push_prompt"));
});

test("a retry pi will make keeps the cycle running; only the final agent_end settles it", () => {
  const r = run(st(running), { type: "agent_end", willRetry: true, stopReason: "error" });
  assert.equal(r.state.phase.name, "running");
  assert.equal(settles(r.effects), 0);
  assert.equal(run(r.state, { type: "agent_end", willRetry: false, stopReason: "error" }).state.phase.name, "settled");
});

test("races fixed earlier: prompt accepted before the launch returned; a cycle finished while the launch was journaled; close while launching", () => {
  // The child said hello and took its prompt during the launch call.
  const early = run(
    st({ name: "launching", cycle: 1, attempt: 1 }, false),
    { type: "child_hello" },
    { type: "prompt_accepted", cycle: 1 },
    { type: "launch_returned" },
  );
  assert.equal(early.state.phase.name, "running");
  assert.deepEqual(
    early.effects.filter((e) => e.type === "arm_timer").map((e) => (e as { kind: string }).kind),
    ["timeout"],
  ); // armed once, for the running cycle (no readiness barrier: the prompt is taken)
  // ...and even finished it: the late launch_returned arms no timeout for a settled cycle.
  const done = run(
    st({ name: "launching", cycle: 1, attempt: 1 }),
    { type: "prompt_accepted", cycle: 1 },
    { type: "agent_end", willRetry: false },
  );
  const after = step(done.state, { type: "launch_returned" });
  assert.equal(after.state.phase.name, "settled");
  assert.deepEqual(after.effects, []);
  // Closed while launching: closed is final, the launch's later return changes nothing.
  const closed = run(st({ name: "launching", cycle: 1, attempt: 1 }), {
    type: "close",
    closePane: false,
    headless: true,
  });
  assert.deepEqual(closed.state.phase, { name: "closed" });
  assert.deepEqual(step(closed.state, { type: "launch_returned" }).effects, []);
  assert.deepEqual(step(closed.state, { type: "prompt_accepted", cycle: 1 }).effects, []);
});

test("a prompt pi did not run fails the cycle with pi's words; a timeout is TIMEOUT; an unrequested abort is never completed", () => {
  assert.deepEqual(
    settleVerdict({ kind: "prompt_failed", message: "No API key found for anthropic." }).status,
    "failed",
  );
  assert.match(
    settleVerdict({ kind: "prompt_failed", message: "No API key found for anthropic." }).error!.message,
    /^pi did not run the prompt: No API key found for anthropic; /,
  );
  assert.deepEqual(
    [settleVerdict({ kind: "timeout", ms: 5 }).status, settleVerdict({ kind: "timeout", ms: 5 }).error?.code],
    ["interrupted", "TIMEOUT"],
  );
  assert.equal(settleVerdict({ kind: "agent_end", stopReason: "aborted" }).status, "failed");
  assert.equal(settleVerdict({ kind: "agent_end", stopReason: "aborted" }).error?.code, "AGENT_ABORTED");
  assert.equal(settleVerdict({ kind: "session_settled", stopReason: "aborted" }).status, "failed");
  assert.equal(settleVerdict({ kind: "agent_end", stopReason: "stop" }).status, undefined); // the evidence decides
  assert.equal(settleVerdict({ kind: "owner_abort" }).error, undefined);
  // Only a timeout's error replaces one the cycle already carries (the child's own error stands otherwise).
  assert.equal(settleVerdict({ kind: "timeout", ms: 5 }).replacesError, true);
  assert.equal(settleVerdict({ kind: "prompt_failed", message: "x" }).replacesError, undefined);
  assert.equal(settleVerdict({ kind: "start_failed", code: "AGENT_STALLED", message: "x" }).replacesError, undefined);
});

test("failed and interrupted endings end the child; a normal one leaves it for a follow-up (parked after idleChildMs)", () => {
  const ends = (ev: CycleEvent) => kinds(step(st(running), ev).effects).includes("end_child");
  assert.equal(ends({ type: "prompt_failed", cycle: 1, message: "x" }), true);
  assert.equal(ends({ type: "timeout_fired", ms: 1 }), true);
  assert.equal(ends({ type: "abort" }), true);
  assert.equal(ends({ type: "contract_error" }), true);
  assert.equal(ends({ type: "agent_end", willRetry: false, stopReason: "aborted" }), true);
  // A gone runtime settles gone, yet ends nothing: its child is already gone.
  assert.equal(ends({ type: "runtime_gone", how: "gone" }), false);
  const normal = step(st(running), { type: "agent_end", willRetry: false, stopReason: "stop" });
  assert.equal(kinds(normal.effects).includes("end_child"), false);
  assert.ok(normal.effects.some((e) => e.type === "arm_timer" && e.kind === "idle"));
  const parked = step(step(normal.state, { type: "harvested", cycle: 1, status: "completed" }).state, {
    type: "timer_fired",
    kind: "idle",
  });
  assert.equal((parked.state.phase as { parked?: boolean }).parked, true);
  assert.ok(kinds(parked.effects).includes("end_child"));
  // respond on a parked task relaunches pi (on its session file) instead of pushing to a child that is gone.
  const again = run(parked.state, { type: "respond" }, { type: "slot_granted" });
  assert.deepEqual(again.state.phase, { name: "launching", cycle: 2, attempt: 1 });
  assert.ok(kinds(again.effects).includes("relaunch"));
});

test("respond is a queued cycle until a slot frees; a queue failure settles that cycle", () => {
  const settled = run(
    st(running),
    { type: "agent_end", willRetry: false },
    { type: "harvested", cycle: 1, status: "completed" },
  ).state;
  const q = step(settled, { type: "respond" });
  assert.deepEqual(q.state.phase, { name: "queued", cycle: 2 });
  assert.equal(kinds(q.effects).includes("push_prompt"), false);
  const failed = step(q.state, { type: "launch_failed", code: "CONCURRENCY_LIMIT", message: "queueTimeoutMs" });
  assert.deepEqual([failed.state.phase.name, (failed.state.phase as { cycle: number }).cycle], ["settled", 2]);
});

test("every settle yields exactly one owner outcome; only the owner's abort is TUI-only", () => {
  const base = {
    schemaVersion: 1,
    taskId: "tabc123456789",
    role: "worker",
    brief: "b",
    summary: "s",
    agent: {},
    herdrStatus: "unknown",
    timing: { createdAt: 1 },
    nextAction: "inspect",
  } as unknown as AgentResult;
  const cases: [AgentResult, "model" | "tui"][] = [
    [{ ...base, status: "completed", finalMessage: "done" }, "model"],
    [{ ...base, status: "blocked", finalMessage: "need a colour" }, "model"],
    [{ ...base, status: "failed", error: { code: "PROMPT_FAILED", message: "x" } }, "model"],
    [{ ...base, status: "gone" }, "model"],
    [{ ...base, status: "interrupted", error: { code: "TIMEOUT", message: "x" } }, "model"],
    [{ ...base, status: "interrupted" }, "tui"],
  ];
  for (const [r, where] of cases) {
    const d = deliveryFor(r, 1);
    assert.ok(d, r.status);
    assert.equal(d!.model === null ? "tui" : "model", where, `${r.status} ${r.error?.code ?? ""}`);
  }
});

test("planRecovery: what a restarted daemon does with each open task", () => {
  const base: RecoveryInput = {
    cycle: 1,
    harvested: false,
    launched: true,
    alive: true,
    prompted: true,
    accepted: true,
    settling: false,
    endedMeanwhile: false,
  };
  const rows: [string, Partial<RecoveryInput>, string][] = [
    ["closed before the crash", { closed: { closePane: true } }, "finish_close"],
    ["aborted before the crash", { interrupted: {} }, "finish_abort"],
    ["never launched", { launched: false, prompted: false, accepted: false }, "start_again"],
    ["settled and harvested", { harvested: true }, "keep_settled"],
    ["launched, prompt never sent", { prompted: false, accepted: false }, "push_prompt"],
    ["prompt sent unconfirmed, child alive", { accepted: false }, "push_prompt"],
    ["prompt never sent, child gone", { prompted: false, accepted: false, alive: false }, "failed_before_prompt"],
    // It may have run the prompt before it died: gone, never prompted a second time.
    ["prompt sent unconfirmed, child gone", { accepted: false, alive: false }, "gone"],
    ["settle journaled, not harvested", { settling: true }, "settle"],
    ["cycle ended while the daemon was away", { endedMeanwhile: true, alive: false }, "settle"],
    ["running, child gone", { alive: false }, "gone"],
    ["running, child alive", {}, "resume_running"],
  ];
  for (const [what, patch, kind] of rows) assert.equal(planRecovery({ ...base, ...patch }).kind, kind, what);
  // A prompt already sent is never planned to be sent again.
  assert.notEqual(planRecovery({ ...base, accepted: true }).kind, "push_prompt");
  const t = planRecovery({ ...base, interrupted: { code: "TIMEOUT" } });
  assert.deepEqual(t, { kind: "finish_abort", timeout: true });
  const kept = planRecovery({ ...base, harvested: true, alive: false });
  assert.deepEqual(kept.kind === "keep_settled" && phaseFound(kept.found), {
    name: "settled",
    cycle: 1,
    reason: { kind: "settled_before_crash" },
    parked: true,
  });
});

test("a close or abort after a settled cycle says so (its verdict stands); a close in flight does not", () => {
  const settled = run(
    st(running),
    { type: "agent_end", willRetry: false },
    { type: "harvested", cycle: 1, status: "completed" },
  ).state;
  for (const ev of [{ type: "close", closePane: false, headless: true }, { type: "abort" }] as CycleEvent[]) {
    const r = step(settled, ev);
    assert.deepEqual(r.state.phase, { name: "closed", settled: true }, ev.type);
    assert.equal(closedAfterSettle(r.state.phase), true);
    assert.equal(lifecycleOf(r.state.phase), "closed");
  }
  const inFlight = step(st(running), { type: "close", closePane: false, headless: true });
  assert.deepEqual(inFlight.state.phase, { name: "closed" });
  assert.equal(closedAfterSettle(inFlight.state.phase), false);
  // The closed/interrupted override is read from the phase: an interrupted cycle reads interrupted, a completed none.
  assert.equal(lifecycleOf(step(st(running), { type: "abort" }).state.phase), "interrupted");
  assert.equal(lifecycleOf(step(st(running), { type: "timer_fired", kind: "timeout" }).state.phase), "interrupted");
  assert.equal(lifecycleOf(settled.phase), undefined);
  // What the commands may do, asked of the machine.
  assert.equal(commandAllowed(settled, "respond"), true);
  assert.equal(commandAllowed(settled, "abort"), true);
  const failed = step(run(st(running), { type: "contract_error" }).state, {
    type: "harvested",
    cycle: 1,
    status: "failed",
  }).state;
  assert.equal(commandAllowed(failed, "respond"), false);
  assert.equal(commandAllowed(failed, "abort"), false, "a failed cycle has nothing left to abort");
  assert.equal(commandAllowed(st(running), "respond"), false);
  assert.equal(commandAllowed(st(running), "abort"), true);
});

// Caps that pause and ask (issue 26): a cap is an event; its settle reason's verdict is blocked.
const capHit: CycleEvent = { type: "cap_reached", cap: "cost", limit: 5, spent: 7, step: 5 };

test("a cap reached while the cycle runs settles it blocked: journaled first, the turn stopped, the child kept", () => {
  const { state, effects } = run(st(running), capHit);
  assert.deepEqual(state.phase, {
    name: "settled",
    cycle: 1,
    reason: { kind: "cap", cap: "cost", limit: 5, spent: 7, step: 5 },
  });
  assert.equal(settleVerdict({ kind: "cap", cap: "cost", limit: 5, spent: 7, step: 5 }).status, "blocked");
  assert.equal(settleVerdict({ kind: "cap", cap: "cost", limit: 5, spent: 7, step: 5 }).error, undefined, "no error");
  const k = kinds(effects);
  assert.equal(settles(effects), 1);
  assert.equal(k[0], "journal", "the settle record first");
  assert.ok(k.indexOf("stop_turn") > 0 && k.indexOf("stop_turn") < k.indexOf("harvest_settled"), k.join(","));
  assert.equal(k.includes("end_child"), false, "never a kill");
  assert.equal(lifecycleOf(state.phase), undefined, "not interrupted");
  assert.ok(
    effects.some((e) => e.type === "arm_timer" && e.kind === "idle"),
    "kept for a follow-up like any settled cycle",
  );
  // Late evidence (the aborted turn's agent_end, a second cap event) never settles it again.
  for (const late of [
    capHit,
    { type: "agent_end", willRetry: false, stopReason: "aborted" } as CycleEvent,
    { type: "session_settled", stopReason: "aborted", retryMayFollow: false, fresh: true } as CycleEvent,
  ])
    assert.equal(settles(step(state, late).effects), 0, late.type);
  // The harvest records it blocked (the verdict); respond continues the conversation: a new cycle, on the same child.
  const next = run(
    state,
    { type: "harvested", cycle: 1, status: "blocked" },
    { type: "respond" },
    { type: "slot_granted" },
  );
  assert.deepEqual(next.state.phase, { name: "awaiting_prompt", cycle: 2 });
  assert.ok(kinds(next.effects).includes("push_prompt"));
});

test("a cap that settles a cycle with a steer pi has not taken: every record (settle, steer_missed) before the turn is stopped", () => {
  const steered = run(st(running), { type: "steer", n: 1, bytes: 5 }).state;
  const { effects } = run(steered, capHit);
  const k = kinds(effects);
  const lastJournal = k.lastIndexOf("journal");
  assert.ok(
    effects.some((e) => e.type === "journal" && e.entry.type === "steer_missed"),
    "the steer is missed",
  );
  assert.ok(lastJournal < k.indexOf("stop_turn"), `journal before act: ${k.join(",")}`);
  assert.ok(k.indexOf("stop_turn") < k.indexOf("steers_missed"), k.join(","));
});

test("a cap event outside a running cycle is moot; a recovered cap settle stops the turn too", () => {
  for (const phase of [
    { name: "queued", cycle: 1 },
    { name: "launching", cycle: 1, attempt: 1 },
    { name: "awaiting_prompt", cycle: 2 },
    { name: "settled", cycle: 1, reason: { kind: "agent_end" } },
    { name: "closed" },
  ] as Phase[]) {
    const r = step(st(phase), capHit);
    assert.deepEqual(r.state.phase, phase, phase.name);
    assert.deepEqual(r.effects, [], phase.name);
  }
  // A crash after the cap's settle record: recovery settles it from the journal (not twice), and the turn is
  // stopped again (the crash may have come before the abort reached the child).
  const reason = { kind: "cap", cap: "outputTokens", limit: 100, spent: 130, step: 100 } as const;
  const rec = step(st(running), { type: "settle_recovered", reason, journaled: true });
  assert.equal(rec.state.phase.name, "settled");
  assert.ok(kinds(rec.effects).includes("stop_turn"));
  assert.equal(kinds(rec.effects).includes("journal"), false);
});

test("a cap's settle reason reads back from the journal; a malformed one does not", async () => {
  const { parseSettleReason } = await import("../../src/core/lifecycle/task-cycle.js");
  const reason = { kind: "cap", cap: "turns", limit: 3, spent: 3, step: 3 };
  assert.deepEqual(parseSettleReason(JSON.parse(JSON.stringify(reason))), reason);
  assert.equal(parseSettleReason({ ...reason, cap: "money" }), undefined);
  assert.equal(parseSettleReason({ ...reason, spent: "7" }), undefined);
  assert.equal(parseSettleReason({ kind: "cap", cap: "cost", limit: 5 }), undefined);
});

test("the owner's model gets a blocked error naming the cap, the spend and the person's command, never a result", () => {
  const paused = {
    schemaVersion: 1,
    taskId: "tabc123456789",
    role: "worker",
    brief: "b",
    status: "blocked",
    summary: "cost cap 5.00 $ reached (7.00 $ spent); respond to continue with another 5.00 $",
    cap: { cap: "cost", limit: 5, spent: 7, step: 5 },
    agent: {},
    herdrStatus: "unknown",
    timing: { createdAt: 1 },
    nextAction: "answer",
  } as unknown as AgentResult;
  for (const r of [paused, { ...paused, finalMessage: "Writing the second file now." }]) {
    const d = deliveryFor(r, 1)!;
    assert.equal(d.card.status, "blocked");
    const m = d.model as { status: string; error: string; result?: unknown };
    assert.equal(m.result, undefined);
    assert.equal(m.status, "blocked");
    assert.match(m.error, /^CAP_REACHED: cost cap 5\.00 \$ reached \(7\.00 \$ spent\)/);
    assert.ok(m.error.includes('dsh-herdr respond tabc123456789 --max-cost 5 "go on"'), m.error);
    assert.equal(d.deliveryId, "tabc123456789-c1-blocked");
  }
});

test("a relayed cycle settled by this daemon's own verdict: remote_invalid fails it (REMOTE_INVALID), remote_lost makes it gone (REMOTE_LOST), once", async () => {
  const { parseSettleReason } = await import("../../src/core/lifecycle/task-cycle.js");
  const running2 = st({ name: "running", cycle: 2 }, false);
  type Verdict = Extract<CycleEvent, { type: "remote_invalid" | "remote_lost" }>;
  const cases: [Verdict, string, string][] = [
    [
      { type: "remote_invalid", cycle: 2, field: "taskId", message: "machine m sent an invalid result" },
      "failed",
      "REMOTE_INVALID",
    ],
    [{ type: "remote_lost", cycle: 2, message: "machine m no longer knows task t" }, "gone", "REMOTE_LOST"],
  ];
  for (const [ev, status, code] of cases) {
    const r = step(running2, ev);
    assert.equal(r.state.phase.name, "settled", ev.type);
    const phase = r.state.phase as Extract<Phase, { name: "settled" }>;
    assert.equal(phase.cycle, 2);
    // The settle record first (the verdict), then one harvest; no idle child to park.
    assert.equal(kinds(r.effects)[0], "journal");
    assert.equal(settles(r.effects), 1);
    assert.equal(kinds(r.effects).includes("arm_timer"), false);
    const v = settleVerdict(phase.reason);
    assert.equal(v.status, status);
    assert.equal(v.error?.code, code);
    assert.match(v.error!.message, /machine m/);
    // Its reason reads back from the journal as written.
    assert.deepEqual(parseSettleReason(JSON.parse(JSON.stringify(phase.reason))), phase.reason);
    // Not interrupted: the task stays open for its close (and a failed/gone verdict is not aborted).
    assert.equal(lifecycleOf(r.state.phase), undefined);
    assert.equal(commandAllowed(r.state, "abort", status), false);
    // A repeat, another cycle's, or one outside a running cycle is moot: the machine decides once.
    assert.deepEqual(step(r.state, ev).effects, [], `${ev.type} twice`);
    assert.deepEqual(step(running2, { ...ev, cycle: 1 }).effects, [], `${ev.type} of another cycle`);
    for (const phase0 of [{ name: "queued", cycle: 2 }, { name: "closed" }] as Phase[])
      assert.deepEqual(step(st(phase0), ev).effects, [], `${ev.type} in ${phase0.name}`);
  }
  assert.equal(parseSettleReason({ kind: "remote_invalid", message: "m" }), undefined, "field is required");
  assert.equal(parseSettleReason({ kind: "remote_lost" }), undefined, "message is required");
});
