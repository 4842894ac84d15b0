// The launch's endings are events the pipeline returns, not dispatches of its own: what pi could not start with and
// what a failed start reads as are judged here from plain objects, no runner, no machine, no daemon.
import { test } from "node:test";
import assert from "node:assert/strict";
import { DshError } from "../../src/core/errors.js";
import { diagnoseStart, startFailed, type DiagnosePort, type StartFailedPort } from "../../src/daemon/task/pipeline.js";

function diagnosePort(over: { stalledOutput?: string; stopped?: boolean } = {}) {
  const calls = { stopWatching: 0 };
  const port = {
    rec: { taskId: "t-1", runtime: "tmux", model: "nope/none" },
    ...(over.stalledOutput !== undefined ? { stalledOutput: over.stalledOutput } : {}),
    ports: {
      runtimeFor: () => ({ readOutput: async () => "" }),
      stopped: () => over.stopped === true,
      store: { taskPaths: (id: string) => ({ dir: `/home/tasks/${id}` }) },
    },
    stopWatching: () => void calls.stopWatching++,
  } as unknown as DiagnosePort;
  return { port, calls };
}

test("diagnoseStart returns launch_failed in pi's own words when pi said why it could not start", async () => {
  const line = 'Error: Model "nope/none" not found. Use --list-models to see available models.';
  const { port, calls } = diagnosePort({ stalledOutput: `starting pi\n${line}` });
  const ev = await diagnoseStart(port, "no hello");
  assert.deepEqual(ev, {
    type: "launch_failed",
    code: "MODEL_NOT_FOUND",
    message: 'pi could not start the child: Model "nope/none" not found. Use --list-models to see available models.',
  });
  assert.equal(calls.stopWatching, 1, "the watches end before the machine hears the failure");
});

test("diagnoseStart returns AGENT_STALLED with the last output when pi named no start failure", async () => {
  const { port } = diagnosePort({ stalledOutput: "some unrelated output" });
  const ev = await diagnoseStart(port, "no hello");
  assert.equal(ev?.type, "launch_failed");
  assert.equal(ev?.code, "AGENT_STALLED");
  assert.match(
    ev?.message ?? "",
    /no sign of life twice \(no hello\).*nope\/none.*\/home\/tasks\/t-1.*some unrelated output/,
  );
});

test("diagnoseStart returns nothing once the daemon is stopping: the next daemon's recovery decides", async () => {
  const { port, calls } = diagnosePort({ stalledOutput: "x", stopped: true });
  assert.equal(await diagnoseStart(port, "no hello"), undefined);
  assert.equal(calls.stopWatching, 0);
});

function startPort(phase: string, stopped = false) {
  const calls = { stopWatching: 0 };
  const port = {
    state: { phase: { name: phase, cycle: 1 }, childConnected: false },
    ports: { stopped: () => stopped },
    stopWatching: () => void calls.stopWatching++,
  } as unknown as StartFailedPort;
  return { port, calls };
}

test("startFailed reads any error as LAUNCH_FAILED with its message, and keeps a DshError's own code", () => {
  const { port, calls } = startPort("launching");
  assert.deepEqual(startFailed(port, new Error("spawn tmux ENOENT")), {
    type: "launch_failed",
    code: "LAUNCH_FAILED",
    message: "spawn tmux ENOENT",
  });
  assert.deepEqual(startFailed(port, "not even an Error"), {
    type: "launch_failed",
    code: "LAUNCH_FAILED",
    message: "not even an Error",
  });
  assert.deepEqual(startFailed(port, new DshError("BUDGET_EXCEEDED", "the day's budget is spent")), {
    type: "launch_failed",
    code: "BUDGET_EXCEEDED",
    message: "the day's budget is spent",
  });
  assert.equal(calls.stopWatching, 3);
});

test("startFailed returns nothing for a task closed or settled meanwhile, or a daemon stopping", () => {
  for (const [phase, stopped] of [
    ["closed", false],
    ["settled", false],
    ["launching", true],
  ] as const) {
    const { port, calls } = startPort(phase, stopped);
    assert.equal(startFailed(port, new Error("x")), undefined, `${phase} stopped=${stopped}`);
    assert.equal(calls.stopWatching, 0);
  }
});
