// Events in, effects out: a task's modules read its evidence and commands and return the lifecycle events they found;
// the runner (task-runner.ts) alone feeds them to the machine (checked from the source in runner-ports.test.ts). The
// events themselves are tested here on plain objects, without a runner, a daemon or a socket.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { SessionFacts } from "../../src/core/session/session-facts.js";
import type { TaskState } from "../../src/core/lifecycle/task-cycle.js";
import { childEvent, onFiles, onRuntime, type EvidencePort } from "../../src/daemon/task/evidence.js";
import { abortEvent, closeEvent } from "../../src/daemon/task/task-commands.js";

function facts(over: Partial<SessionFacts> = {}): SessionFacts {
  return {
    entries: 3,
    invalidLines: 0,
    usage: usage(0),
    retryMayFollow: false,
    retryableErrors: 0,
    cycleSettled: false,
    lastToolCalls: [],
    lastToolResults: [],
    ...over,
  } as SessionFacts;
}

function usage(cost: number): SessionFacts["usage"] {
  const tokens = { outputTokens: 0, inputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
  return { assistant: 1, toolCalls: 1, ...tokens, cost };
}

type Phase = TaskState["phase"];

/** An evidence port as a plain object: only what the evidence reads; the rest is never touched here. */
function port(phase: Phase, over: Record<string, unknown> = {}): EvidencePort & { journaled: unknown[] } {
  const journaled: unknown[] = [];
  return {
    rec: { taskId: "t1", cycle: phase.name === "closed" ? 1 : phase.cycle, timing: {}, runtime: "headless" },
    state: { phase, childConnected: false },
    journaled,
    journal: async (e: unknown) => void journaled.push(e),
    ports: { clock: { now: () => 1000 }, log: { debug() {}, warn() {} } },
    ...over,
  } as unknown as EvidencePort & { journaled: unknown[] };
}

const running: Phase = { name: "running", cycle: 1 } as Phase;
const filesWith = (f: SessionFacts | undefined) => ({ facts: () => f, sessionMtimeMs: 0 });

test("onFiles: the session's change becomes cap_reached, session_settled, evidence_changed or nothing", () => {
  const overCap = facts({
    lastStopReason: "toolUse",
    lastToolCalls: [{ id: "c1", name: "bash" }] as SessionFacts["lastToolCalls"],
    usage: usage(5),
  });
  const settled = facts({ cycleSettled: true, lastStopReason: "stop", lastTimestampMs: 5000 });
  const cases: { name: string; live: EvidencePort; what?: "session" | "result"; want: unknown }[] = [
    { name: "queued", live: port({ name: "queued", cycle: 1 } as Phase), want: undefined },
    { name: "closed", live: port({ name: "closed" } as Phase), want: undefined },
    { name: "awaiting the prompt", live: port({ name: "awaiting_prompt", cycle: 1 } as Phase), want: undefined },
    {
      name: "a cap crossed while the turn goes on",
      live: port(running, {
        files: filesWith(overCap),
        rec: { taskId: "t1", cycle: 1, timing: {}, caps: { cost: { limit: 1, step: 1 } } },
      }),
      want: "cap_reached",
    },
    {
      name: "a cap crossed, seen on result.md",
      live: port(running, {
        files: filesWith(overCap),
        rec: { taskId: "t1", cycle: 1, timing: {}, caps: { cost: { limit: 1, step: 1 } } },
      }),
      what: "result",
      want: { type: "evidence_changed", what: "result" },
    },
    {
      name: "the session settled the cycle, no extension",
      live: port(running, { files: filesWith(settled), promptSentAt: 4000 }),
      want: { type: "session_settled", retryMayFollow: false, fresh: true, stopReason: "stop" },
    },
    {
      name: "the session settled the cycle, the extension connected",
      live: port(running, { files: filesWith(settled), child: {} }),
      want: { type: "evidence_changed", what: "session" },
    },
    {
      name: "a running cycle's session grew",
      live: port(running, { files: filesWith(facts()) }),
      want: { type: "evidence_changed", what: "session" },
    },
  ];
  for (const c of cases) {
    const got = onFiles(c.live, c.what);
    if (c.want === "cap_reached") assert.equal(got?.type, "cap_reached", c.name);
    else assert.deepEqual(got, c.want, c.name);
  }
});

test("onRuntime: a state is evidence, an exit is runtime_gone once (journaled), and none when the daemon ended it", () => {
  const live = port(running) as EvidencePort & { journaled: unknown[] };
  assert.deepEqual(onRuntime(live, { type: "state", state: "working" }), {
    type: "evidence_changed",
    what: "runtime_state",
  });
  assert.equal(live.runtimeState, "working");
  assert.deepEqual(onRuntime(live, { type: "exited", exit: { code: 1 } }), { type: "runtime_gone", how: "exited" });
  assert.deepEqual(live.journaled, [{ type: "runtime_exited", exit: { code: 1 } }]);
  assert.equal(onRuntime(live, { type: "gone" }), undefined, "already missing: nothing new");
  const ended = port(running, { childEnded: true }) as EvidencePort & { journaled: unknown[] };
  assert.equal(onRuntime(ended, { type: "gone" }), undefined);
  assert.deepEqual(ended.journaled, [{ type: "runtime_gone" }]);
});

test("childEvent: the extension's events become the machine's, stamped with their cycle", async () => {
  const live = port({ name: "awaiting_prompt", cycle: 2 } as Phase, { promptSentAt: 900 });
  assert.deepEqual(await childEvent(live, { type: "prompt_accepted", cycle: 2 }), {
    type: "prompt_accepted",
    cycle: 2,
  });
  assert.equal(live.rec.timing.promptedAt, 900);
  assert.equal(await childEvent(live, { type: "prompt_accepted" }), undefined, "no cycle: nothing to accept");
  assert.deepEqual(await childEvent(port(running), { type: "steer_taken", cycle: 1, n: 2 }), {
    type: "steer_taken",
    cycle: 1,
    n: 2,
  });
  assert.equal(await childEvent(port(running), { type: "steer_missed", cycle: 1, n: 2 }), undefined);
  const f = port(running);
  assert.equal(await childEvent(f, { type: "finalize_prompt", cycle: 1, why: "no report" }), undefined);
  assert.deepEqual(f.journaled, [{ type: "finalize_prompt", cycle: 1, why: "no report" }]);
  assert.equal(await childEvent(port({ name: "closed" } as Phase), { type: "agent_end", cycle: 1 }), undefined);
  assert.deepEqual(await childEvent(port(running), { type: "agent_end", cycle: 1, stopReason: "stop" }), {
    type: "agent_end",
    cycle: 1,
    willRetry: false,
    stopReason: "stop",
  });
});

test("abort and close: the command's event when the machine allows it, else none", () => {
  const stops: string[] = [];
  const cmd = (phase: Phase, status: string) =>
    ({
      state: { phase, childConnected: false },
      rec: { taskId: "t1", status, runtime: "headless" },
      stopWatching: () => stops.push(phase.name),
    }) as unknown as Parameters<typeof abortEvent>[0];
  assert.deepEqual(abortEvent(cmd(running, "working")), { type: "abort" });
  assert.equal(abortEvent(cmd({ name: "closed" } as Phase, "closed")), undefined);
  assert.deepEqual(closeEvent(cmd(running, "working"), true), { type: "close", closePane: true, headless: true });
  assert.equal(closeEvent(cmd({ name: "closed" } as Phase, "closed"), false), undefined);
  assert.deepEqual(stops, ["running", "running"], "the watches stop before the event is fed, and only then");
});
