// A task that failed before any child took a prompt (a setup that failed, a launch that never got going) says so:
// its summary does not send anyone to a session that was never written, and it warns of no missing session file.
import { test } from "node:test";
import assert from "node:assert/strict";
import { buildAgentResult, type HarvestInput } from "../../src/core/result/agent-result.js";

const input: HarvestInput = {
  taskId: "tmg3k2a1b2c3",
  role: "worker",
  agent: { name: "worker-fake-b2c3", kind: "pi", model: "fake/fake-model", thinking: "off", runtime: "headless" },
  timing: { createdAt: 1000, settledAt: 2000 },
  raw: { external: false, runtime: "done", sessionError: true },
  sessionPath: "/h/tasks/tmg3k2a1b2c3/session.jsonl",
  sessionChangedAfterPrompt: false,
  resultPath: "/h/tasks/tmg3k2a1b2c3/result.md",
  settled: true,
  error: { code: "SETUP_FAILED", message: "worktree setup `npm ci` exited 1: npm ERR! missing package-lock.json" },
};

test("SETUP_FAILED with no child ever prompted: no 'inspect the session', no 'no session file'", () => {
  const r = buildAgentResult(input);
  assert.equal(r.status, "failed");
  assert.doesNotMatch(r.summary, /inspect the session/, r.summary);
  assert.match(r.summary, /before .*child/i, r.summary);
  assert.ok(!(r.warnings ?? []).some((w) => /^no session file/.test(w)), JSON.stringify(r.warnings));
});

test("a prompted child that wrote no session still gets the warning and the session sentence", () => {
  const r = buildAgentResult({ ...input, timing: { createdAt: 1000, promptedAt: 1500, settledAt: 2000 } });
  assert.equal(r.summary, "The child failed; inspect the session.");
  assert.ok(
    (r.warnings ?? []).some((w) => /^no session file/.test(w)),
    JSON.stringify(r.warnings),
  );
});
