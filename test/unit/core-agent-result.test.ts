import { test } from "node:test";
import assert from "node:assert/strict";
import { validate } from "../helpers/agent-result-schema.js";
import { buildAgentResult, type HarvestInput } from "../../src/core/result/agent-result.js";
import { parseResultMd } from "../../src/core/result/result-md.js";
import { SessionReader } from "../../src/core/session/session-reader.js";

// The tail of pi's real run (shared/reference/pi.md §1.4): a write tool call, then the final text.
const SESSION =
  [
    `{"type":"session","version":3,"id":"01a22ae8-a338-719c-ac94-168ce2f5e4fc","timestamp":"2026-11-30T05:23:38.937Z","cwd":"/home/dev/demo/work"}`,
    `{"type":"message","id":"62f4f9f6","parentId":"98006b9d","timestamp":"2026-11-30T05:23:39.066Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"call_fake_1","name":"write","arguments":{"path":"hello.txt","content":"hi"}}],"usage":{"output":42},"stopReason":"toolUse","timestamp":1796016219000}}`,
    `{"type":"message","id":"92fb7544","parentId":"13a07c17","timestamp":"2026-11-30T05:23:39.091Z","message":{"role":"assistant","content":[{"type":"text","text":"Done: wrote hello.txt (DONE-MARKER)"}],"usage":{"output":42},"stopReason":"stop","timestamp":1796016219078}}`,
    "{broken",
  ].join("\n") + "\n";

function facts() {
  const r = new SessionReader();
  r.push(new TextEncoder().encode(SESSION));
  return r.facts();
}

const DIFF = {
  baselineHead: "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
  stat: " 1 file changed, 1 insertion(+)",
  files: ["hello.txt"],
  untracked: [],
  patchPath: "/h/tasks/tmg3k2a1b2c3/diff.patch",
  patchBytes: 120,
  truncated: false,
  dirtyAtStart: [],
};

function input(over: Partial<HarvestInput> = {}): HarvestInput {
  return {
    taskId: "tmg3k2a1b2c3",
    role: "worker",
    agent: {
      name: "worker-fake-b2c3",
      kind: "pi",
      model: "fake/fake-model",
      thinking: "off",
      runtime: "tmux",
      runtimeId: "%3",
    },
    timing: { createdAt: 1000, promptedAt: 1500, settledAt: 43000 },
    raw: { external: false, runtime: "idle", sessionError: false },
    sessionPath: "/s/x.jsonl",
    session: facts(),
    sessionChangedAfterPrompt: true,
    resultPath: "/h/tasks/tmg3k2a1b2c3/result.md",
    diff: DIFF,
    settled: true,
    ...over,
  };
}

function build(over: Partial<HarvestInput> = {}) {
  const r = buildAgentResult(input(over));
  assert.ok(validate(r), JSON.stringify(validate.errors));
  return r;
}

test("with result.md: status, summary, text, tests and files come from the artifact; usage from the session", () => {
  const md = parseResultMd(
    "---\nstatus: completed\nsummary: wrote hello\ntests: none\nfiles: hello.txt\n---\nWrote it.\n",
  );
  const r = build({ resultMd: md, brief: "write hello", owner: "cli" });
  assert.equal(r.status, "completed");
  assert.equal(r.nextAction, "none");
  assert.equal(r.summary, "wrote hello");
  assert.equal(r.finalMessage, "Done: wrote hello.txt (DONE-MARKER)");
  assert.deepEqual(r.result, { path: "/h/tasks/tmg3k2a1b2c3/result.md", text: "Wrote it.", meta: md.meta });
  assert.equal(r.tests, "none");
  assert.deepEqual(r.files, ["hello.txt"]);
  assert.deepEqual(r.usage, {
    assistant: 2,
    toolCalls: 1,
    outputTokens: 84,
    inputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    cost: 0,
  });
  assert.equal(r.timing.elapsedMs, 42000, "elapsed = settledAt - createdAt (queue wait included)");
  assert.equal(r.brief, "write hello");
  assert.equal(r.owner, "cli");
  assert.deepEqual(r.warnings, ["session: 1 invalid line(s) skipped"]);
});

test("without result.md: result.text is the final message and the summary its first line", () => {
  const r = build();
  assert.equal(r.result?.text, "Done: wrote hello.txt (DONE-MARKER)");
  assert.deepEqual(r.result?.meta, {});
  assert.equal(r.summary, "Done: wrote hello.txt (DONE-MARKER)");
  assert.equal(r.tests, undefined);
  assert.equal(r.files, undefined);
});

test("a stale session gives no final message: stale + empty-harvest warnings, status sentence summary", () => {
  const r = build({ sessionChangedAfterPrompt: false });
  assert.equal(r.finalMessage, undefined);
  assert.equal(r.result, undefined);
  assert.equal(r.summary, "The child finished without a summary.");
  assert.ok(r.warnings?.some((w) => w.startsWith("stale session")));
  assert.ok(r.warnings?.some((w) => w.startsWith("empty harvest")));
});

test("result.md verdicts drive the status; a session error beats them", () => {
  const blocked = build({ resultMd: parseResultMd("---\nstatus: blocked\nsummary: which API key?\n---\n") });
  assert.equal(blocked.status, "blocked");
  assert.equal(blocked.nextAction, "answer");
  assert.equal(build({ resultMd: parseResultMd("---\nstatus: failed\n---\nno") }).status, "failed");
  const err = build({
    raw: { external: false, runtime: "idle", sessionError: true },
    resultMd: parseResultMd("---\nstatus: completed\n---\n"),
    error: { code: "INTERNAL", message: "x" },
  });
  assert.equal(err.status, "failed");
  assert.equal(err.nextAction, "inspect");
  assert.deepEqual(err.error, { code: "INTERNAL", message: "x" });
  // an explicit raw.resultStatus (e.g. from crew_report) wins over the file
  assert.equal(
    build({
      raw: { external: false, runtime: "idle", sessionError: false, resultStatus: "blocked" },
      resultMd: parseResultMd("---\nstatus: completed\n---\n"),
    }).status,
    "blocked",
  );
});

test("result.md problems surface as warnings, never as a failed harvest", () => {
  const r = build({ resultMd: parseResultMd("---\nstatus: [oops\n---\nbody"), warnings: ["diff: git timed out"] });
  assert.equal(r.status, "completed");
  assert.ok(r.warnings?.some((w) => /not valid YAML/.test(w)));
  assert.equal(r.warnings?.at(-1), "diff: git timed out");
  const odd = build({ resultMd: parseResultMd("---\nstatus: done-ish\n---\nbody") });
  assert.ok(odd.warnings?.some((w) => /"done-ish" is not completed/.test(w)));
});

test("reviewer that changed files is warned about", () => {
  const r = build({ role: "reviewer" });
  assert.ok(r.warnings?.includes("reviewer changed files: hello.txt"));
});

test("live snapshots: running and starting carry wait and no empty-harvest warning", () => {
  const running = build({
    raw: { external: false, runtime: "working", sessionError: false },
    session: undefined,
    sessionChangedAfterPrompt: false,
    settled: undefined,
    timing: { createdAt: 1000 },
  });
  assert.equal(running.status, "running");
  assert.equal(running.nextAction, "wait");
  assert.equal(running.usage, undefined);
  assert.equal(running.warnings, undefined);
  assert.equal(running.timing.elapsedMs, undefined);
  const starting = build({
    raw: { external: false, runtime: "working", sessionError: false, lifecycle: "starting" },
    session: undefined,
    settled: undefined,
  });
  assert.equal(starting.status, "starting");
  assert.equal(starting.summary, "The child is starting.");
});

test("external records: idle, observational, no verdict warnings", () => {
  const r = build({
    raw: { external: true, runtime: "done", sessionError: true },
    settled: undefined,
    diff: undefined,
  });
  assert.equal(r.status, "idle");
  assert.equal(r.nextAction, "none");
  assert.equal(r.warnings?.some((w) => w.startsWith("empty harvest")) ?? false, false);
});
