// Usage with cost (issue 26): input, cache and cost totals folded from pi's own per-assistant-message usage, on the
// shapes both pi lines write (0.73.1: {input, output, cacheRead, cacheWrite, totalTokens, cost{..., total}}; 1.x adds
// `reasoning` and `cost.totalFromProvider`), carried into the AgentResult and checked by verify.
import { test } from "node:test";
import assert from "node:assert/strict";
import { validate } from "../helpers/agent-result-schema.js";
import { SessionReader } from "../../src/core/session/session-reader.js";
import { buildAgentResult } from "../../src/core/result/agent-result.js";
import { parseYaml } from "../../src/core/result/result-md.js";
import { type VerifyInput, verifyTask as verifyWith } from "../../src/core/lifecycle/verify.js";

const verifyTask = (i: Omit<VerifyInput, "parseYaml">) => verifyWith({ ...i, parseYaml });
import type { AgentResult } from "../../src/core/types.js";
import { parseJournal } from "../../src/core/lifecycle/journal-record.js";

/** Journal records as the store reads them back (parsed into known kinds). */
const records = (xs: readonly unknown[]) => parseJournal(xs).records;

type Priced = { input: number; output: number; cacheRead: number; cacheWrite: number; total: number };
function assistant(line: "0.73" | "1.x", u: Priced, stopReason = "toolUse", id = "a1"): string {
  const usage: Record<string, unknown> = {
    input: u.input,
    output: u.output,
    cacheRead: u.cacheRead,
    cacheWrite: u.cacheWrite,
    totalTokens: u.input + u.output + u.cacheRead + u.cacheWrite,
    cost: {
      input: u.total / 2,
      output: u.total / 2,
      cacheRead: 0,
      cacheWrite: 0,
      total: u.total,
      ...(line === "1.x" ? { totalFromProvider: false } : {}),
    },
  };
  if (line === "1.x") usage.reasoning = 0;
  const content =
    stopReason === "toolUse"
      ? [{ type: "toolCall", id: `call_${id}`, name: "write", arguments: { path: "a", content: "b" } }]
      : [{ type: "text", text: "done" }];
  return JSON.stringify({
    type: "message",
    id,
    parentId: null,
    timestamp: "2026-12-01T09:48:02.100Z",
    message: {
      role: "assistant",
      content,
      api: "openai-completions",
      provider: "scripted",
      model: "scripted-model",
      usage,
      stopReason,
      timestamp: 1796016219000,
    },
  });
}
const user = (text: string) =>
  JSON.stringify({
    type: "message",
    id: "u",
    parentId: null,
    timestamp: "2026-12-01T09:48:02.000Z",
    message: { role: "user", content: text, timestamp: 1 },
  });
const read = (lines: string[]) => {
  const r = new SessionReader();
  r.push(new TextEncoder().encode(lines.map((l) => l + "\n").join("")));
  return r.facts();
};

for (const line of ["0.73", "1.x"] as const) {
  test(`pi ${line}: input, cache read/write tokens and cost are summed over every assistant message`, () => {
    const f = read([
      user("go"),
      assistant(line, { input: 1000, output: 20, cacheRead: 300, cacheWrite: 40, total: 0.0125 }, "toolUse", "a1"),
      assistant(line, { input: 1100, output: 30, cacheRead: 0, cacheWrite: 5, total: 0.25 }, "stop", "a2"),
    ]);
    assert.deepEqual(f.usage, {
      assistant: 2,
      toolCalls: 1,
      outputTokens: 50,
      inputTokens: 2100,
      cacheReadTokens: 300,
      cacheWriteTokens: 45,
      cost: 0.2625,
    });
    assert.deepEqual(f.cycle.usage, f.usage);
  });
}

test("cost per cycle restarts with the next prompt; the session totals keep counting", () => {
  const f = read([
    user("one"),
    assistant("1.x", { input: 10, output: 1, cacheRead: 0, cacheWrite: 0, total: 1 }, "stop", "a1"),
    user("two"),
    assistant("1.x", { input: 20, output: 2, cacheRead: 7, cacheWrite: 0, total: 2.5 }, "stop", "a2"),
  ]);
  assert.equal(f.usage.cost, 3.5);
  assert.equal(f.usage.inputTokens, 30);
  assert.equal(f.cycle.usage.cost, 2.5);
  assert.equal(f.cycle.usage.inputTokens, 20);
  assert.equal(f.cycle.usage.cacheReadTokens, 7);
});

test("usage that is not numbers (a foreign writer, a broken line) counts nothing rather than NaN", () => {
  const bad = JSON.stringify({
    type: "message",
    id: "x",
    parentId: null,
    timestamp: "2026-12-01T09:48:02.100Z",
    message: {
      role: "assistant",
      content: [{ type: "text", text: "hi" }],
      usage: { input: "12", output: -3, cacheRead: null, cacheWrite: Infinity, cost: { total: "0.5" } },
      stopReason: "stop",
    },
  });
  const noUsage = JSON.stringify({
    type: "message",
    id: "y",
    parentId: null,
    timestamp: "2026-12-01T09:48:02.100Z",
    message: { role: "assistant", content: [{ type: "text", text: "hi" }], stopReason: "stop" },
  });
  const f = read([user("go"), bad, noUsage]);
  assert.deepEqual(f.usage, {
    assistant: 2,
    toolCalls: 0,
    outputTokens: 0,
    inputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    cost: 0,
  });
});

test("many small prices add up without floating-point dust (0.1 + 0.2 is 0.3)", () => {
  const lines = [user("go")];
  for (let i = 0; i < 10; i++)
    lines.push(assistant("1.x", { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, total: 0.1 }, "toolUse", `a${i}`));
  const f = read(lines);
  assert.equal(f.usage.cost, 1);
  assert.equal(read([user("x"), lines[1]!, lines[2]!, lines[3]!]).usage.cost, 0.3);
});

function result(facts: ReturnType<typeof read>): AgentResult {
  return buildAgentResult({
    taskId: "tmg3k2a1b2c3",
    role: "worker",
    agent: { name: "worker-scripted-b2c3", kind: "pi", model: "scripted/scripted-model", thinking: "off" },
    timing: { createdAt: 1796017900000, promptedAt: 1796017900500, settledAt: 1796017960000 },
    raw: { external: false, runtime: "idle", sessionError: false },
    session: facts,
    sessionChangedAfterPrompt: true,
  });
}

test("the AgentResult carries the new usage fields and validates against the schema", () => {
  const f = read([
    user("go"),
    assistant("0.73", { input: 1000, output: 20, cacheRead: 300, cacheWrite: 40, total: 0.0125 }, "stop"),
  ]);
  const r = result(f);
  assert.deepEqual(r.usage, {
    assistant: 1,
    toolCalls: 0,
    outputTokens: 20,
    inputTokens: 1000,
    cacheReadTokens: 300,
    cacheWriteTokens: 40,
    cost: 0.0125,
  });
  assert.ok(validate(r), JSON.stringify(validate.errors));
  // An older result.json without the new fields still validates (additive).
  const old = { ...r, usage: { assistant: 1, toolCalls: 0, outputTokens: 20 } };
  assert.ok(validate(old), JSON.stringify(validate.errors));
  assert.equal(validate({ ...r, usage: { ...r.usage, cost: -1 } }), false, "a negative cost is refused");
});

test("verify names a cost or input-token count that disagrees with the session", () => {
  const f = read([
    user("go"),
    assistant("1.x", { input: 1000, output: 20, cacheRead: 0, cacheWrite: 0, total: 0.5 }, "stop"),
  ]);
  const r = result(f);
  const events = records([{ type: "settle", cycle: 1, why: "agent_end", reason: { kind: "agent_end" } }]);
  assert.deepEqual(verifyTask({ events, result: r, session: f }), []);
  const tampered = { ...r, usage: { ...r.usage!, cost: 0.1, inputTokens: 3 } };
  const fields = verifyTask({ events, result: tampered, session: f }).map((d) => d.field);
  assert.deepEqual(fields.sort(), ["usage.cost", "usage.inputTokens"]);
});
