// Real pi 0.73.1 against the scripted model: a print-mode run that writes a file, and an rpc-mode run with a
// follow-up cycle. Both share one model server. Timings are reported as test diagnostics.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { startPiHarness, type PiHarness, testPiLine } from "../helpers/pi.js";
import { startRpcPi } from "../../fixtures/scripted-model/rpc-child.js";
import { SessionReader } from "../../src/core/session/session-reader.js";

let h: PiHarness;

before(async () => {
  h = await startPiHarness({
    script: {
      conversations: [
        {
          name: "write",
          match: "[write]",
          steps: [
            {
              thinking: "I should write the file.",
              toolCalls: [
                { name: "write", arguments: { path: "hello.txt", content: "hello from the scripted model\n" } },
              ],
            },
            { text: "Done: wrote hello.txt (DONE-MARKER)", usage: { prompt: 1500, completion: 9 } },
          ],
        },
        {
          name: "rpc",
          match: "[rpc]",
          steps: [
            { toolCalls: [{ name: "bash", arguments: { command: "echo first > notes.md && echo wrote-first" } }] },
            { text: "Cycle one done." },
            {
              match: "FOLLOW-UP",
              toolCalls: [{ name: "bash", arguments: { command: "echo second >> notes.md && echo appended-ok" } }],
            },
            { match: "appended-ok", text: "Cycle two done." },
          ],
        },
      ],
    },
  });
});

after(async () => {
  await h?.cleanup();
});

function readSession(path: string): Record<string, any>[] {
  return readFileSync(path, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, any>);
}

function readerFacts(path: string) {
  const reader = new SessionReader({ maxRetries: 0 });
  reader.push(readFileSync(path));
  return reader.facts();
}

test("print mode: pi writes the file through a write tool call and the session JSONL records it", async (t) => {
  const sessionPath = join(h.dir, "sessions", "print.jsonl");
  const before = h.model.requests().length;
  const start = Date.now();
  const r = await h.runPi(["-p", "--model", h.modelName, "--session", sessionPath, "[write] Create hello.txt please"]);
  const wall = Date.now() - start;
  assert.equal(r.exitCode, 0, String(r.stderr));
  assert.equal(String(r.stdout).trim(), "Done: wrote hello.txt (DONE-MARKER)");
  assert.equal(readFileSync(join(h.work, "hello.txt"), "utf8"), "hello from the scripted model\n");

  const mine = h.model.requests().slice(before);
  assert.deepEqual(
    mine.map((q) => [q.conversation, q.step]),
    [
      ["write", 0],
      ["write", 1],
    ],
  );
  t.diagnostic(`print run: first request ${mine[0]!.at - start} ms after spawn, wall ${wall} ms`);

  // pi 1.x records the run's system prompt as a first role:"system" message; 0.73.1 does not.
  const line = testPiLine();
  const lines = readSession(sessionPath).filter((e) => !(e.type === "message" && e.message.role === "system"));
  if (line === "1.x") assert.equal(readSession(sessionPath)[3]!.message.role, "system");
  assert.deepEqual(
    lines.map((e) => e.type),
    ["session", "model_change", "thinking_level_change", "message", "message", "message", "message"],
  );
  assert.equal(lines[0]!.cwd, h.work);
  assert.deepEqual([lines[1]!.provider, lines[1]!.modelId], ["scripted", "scripted-model"]);
  const msgs = lines.slice(3).map((e) => e.message);
  assert.deepEqual(
    msgs.map((m) => m.role),
    ["user", "assistant", "toolResult", "assistant"],
  );
  const call = msgs[1].content.find((c: any) => c.type === "toolCall");
  assert.equal(call.name, "write");
  assert.deepEqual(call.arguments, { path: "hello.txt", content: "hello from the scripted model\n" });
  assert.equal(msgs[1].content[0].type, "thinking");
  assert.equal(msgs[1].stopReason, "toolUse");
  assert.equal(msgs[2].toolCallId, call.id);
  assert.equal(msgs[2].isError, false);
  assert.equal(msgs[3].stopReason, "stop");
  assert.equal(msgs[3].usage.output, 9);
  assert.equal(msgs[3].usage.input, 1500);

  const facts = readerFacts(sessionPath);
  assert.equal(facts.lastStopReason, "stop");
  assert.equal(facts.finalText, "Done: wrote hello.txt (DONE-MARKER)");
  assert.equal(facts.cycleSettled, true);
  assert.equal(facts.usage.assistant, 2);
  assert.equal(facts.usage.toolCalls, 1);
  assert.equal(facts.usage.outputTokens, 20 + 9);
});

test("rpc mode: the session file is announced before it exists, and a follow-up prompt runs a second cycle", async (t) => {
  const sessionPath = join(h.dir, "sessions", "rpc.jsonl");
  const before = h.model.requests().length;
  const pi = startRpcPi({ env: h.env, cwd: h.work, sessionPath, model: h.modelName });
  try {
    pi.send({ type: "get_state", id: "s1" });
    const state = await pi.waitFor((e) => e.type === "response" && e.id === "s1");
    assert.equal((state.data as { sessionFile: string }).sessionFile, sessionPath);
    assert.equal(
      existsSync(sessionPath),
      false,
      "pi writes the session lazily: no file before the first assistant message",
    );
    const ready = Date.now();

    pi.send({ type: "prompt", message: "[rpc] Start notes.md" });
    const end1 = await pi.waitFor((e) => e.type === "agent_end");
    const cycle1 = Date.now();
    assert.ok(existsSync(sessionPath));
    assert.equal(readerFacts(sessionPath).finalText, "Cycle one done.");
    assert.ok(Array.isArray(end1.messages));

    pi.send({ type: "prompt", message: "FOLLOW-UP: append a second line" });
    await pi.waitFor((e) => e.type === "agent_end");
    const exit = await pi.close();
    assert.equal(exit.exitCode, 0, exit.stderr);

    const mine = h.model.requests().slice(before);
    assert.deepEqual(
      mine.map((q) => q.step),
      [0, 1, 2, 3],
    );
    t.diagnostic(
      `rpc run: ready (get_state) ${ready - pi.spawnedAt} ms, first request ${mine[0]!.at - pi.spawnedAt} ms, ` +
        `cycle 1 ${cycle1 - ready} ms, wall ${Date.now() - pi.spawnedAt} ms`,
    );

    assert.equal(readFileSync(join(h.work, "notes.md"), "utf8"), "first\nsecond\n");
    const lines = readSession(sessionPath);
    const roles = lines.filter((e) => e.type === "message" && e.message.role !== "system").map((e) => e.message.role);
    assert.deepEqual(roles, [
      "user",
      "assistant",
      "toolResult",
      "assistant",
      "user",
      "assistant",
      "toolResult",
      "assistant",
    ]);
    // One file, one header: the follow-up appends.
    assert.equal(lines.filter((e) => e.type === "session").length, 1);

    const facts = readerFacts(sessionPath);
    assert.equal(facts.cycle.index, 2);
    assert.equal(facts.finalText, "Cycle two done.");
    assert.equal(facts.lastStopReason, "stop");
    assert.equal(facts.cycleSettled, true);
  } finally {
    pi.child.kill("SIGKILL");
  }
});
