// A relayed task's other id (its id on the machine, which its agent name ends with) resolves like its own; a headless
// child's rpc events read as text (src/cli/format/rpc-log.ts); ssh's line picks the fix (src/core/machines.ts); which
// provider keys doctor counts (src/cli/doctor/daemon.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import { resolveTaskId } from "../../src/core/id-match.js";
import { sshFailureFix } from "../../src/core/machines.js";
import { renderRpcLog } from "../../src/cli/format/rpc-log.js";
import { credentialGaps } from "../../src/cli/doctor/daemon.js";

test("a remote task: its id there, a suffix or prefix of it, and its agent name find the local id", () => {
  const known = [
    { taskId: "tmx1localaaaa", name: "worker-m-zq9w", aliases: ["tmx1remotzq9w"] },
    { taskId: "tmx1localbbbb", name: "worker-m-bbbb" },
  ];
  for (const typed of ["zq9w", "tmx1remotzq9w", "tmx1remot", "worker-m-zq9w", "aaaa"])
    assert.equal(resolveTaskId(typed, known), "tmx1localaaaa", typed);
  assert.equal(resolveTaskId("bbbb", known), "tmx1localbbbb");
  assert.throws(() => resolveTaskId("tmx1", known), /matches 2 tasks/);
});

test("rpc events as text: the prompt's first line, assistant text, tool calls and their end, errors; partial line left", () => {
  const ev = (o: object) => JSON.stringify(o) + "\n";
  const text =
    ev({ type: "agent_start" }) +
    ev({
      type: "message_end",
      message: { role: "user", content: [{ type: "text", text: "# Task t1: brief\n\nline two" }] },
    }) +
    ev({
      type: "message_update",
      message: { role: "assistant", content: [] },
      assistantMessageEvent: { type: "text_delta", delta: "Wri" },
    }) +
    ev({
      type: "message_end",
      message: {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "hmm" },
          { type: "text", text: "Writing it.\nThen testing." },
          { type: "toolCall", name: "write", arguments: { path: "a.txt", content: "x".repeat(5000) } },
          { type: "toolCall", name: "bash", arguments: { command: "npm test" } },
          { type: "toolCall", name: "crew_report", arguments: { outcome: "completed", report: "ok" } },
        ],
      },
    }) +
    ev({
      type: "tool_execution_end",
      toolName: "write",
      result: { content: [{ type: "text", text: "ok" }] },
      isError: false,
    }) +
    ev({
      type: "tool_execution_end",
      toolName: "bash",
      result: { content: [{ type: "text", text: "exit 1\nmore" }] },
      isError: true,
    }) +
    ev({
      type: "message_end",
      message: { role: "assistant", content: [], stopReason: "error", errorMessage: "No API key for provider" },
    }) +
    ev({ type: "auto_retry_start", attempt: 1, maxAttempts: 3, errorMessage: "529 overloaded" }) +
    "pi: a warning line\n" +
    ev({ type: "agent_end", messages: [] }) +
    '{"type":"message_end","message":{"role":"assis';
  assert.deepEqual(renderRpcLog(text), [
    "› # Task t1: brief  (+2 lines)",
    "Writing it.",
    "Then testing.",
    "→ write a.txt",
    "→ bash npm test",
    '→ crew_report {"outcome":"completed","report":"ok"}',
    "  ✓ write",
    "  ✗ bash: exit 1",
    "! error: No API key for provider",
    "! retry 1/3: 529 overloaded",
    "pi: a warning line",
    "· end of the run",
  ]);
});

test("ssh's line picks the fix: an unknown host key names machine trust, a refused key the key, no answer the address", () => {
  const m = { ssh: "dev@b.lan", port: 2222 };
  assert.match(sshFailureFix("b", m, "Host key verification failed."), /dsh-herdr machine trust b\b.*--yes/);
  assert.match(sshFailureFix("b", m, "dev@b.lan: Permission denied (publickey)."), /ssh-copy-id -p 2222 dev@b\.lan/);
  assert.match(
    sshFailureFix("b", m, "ssh: connect to host b.lan port 2222: Connection refused"),
    /machine set b --ssh/,
  );
  assert.match(sshFailureFix("b", m, undefined), /ssh -o BatchMode=yes -p 2222 dev@b\.lan true/);
});

test("doctor's key gaps: the default model's provider FAILs; without one only a daemon with none of the shell's keys does; a GITHUB_TOKEN is no provider key", () => {
  const side = (names: string[]) => ({
    who: "the daemon",
    names: new Set(names),
    locale: undefined,
    piDir: undefined,
    agentDir: "/nonexistent/agent",
    authProviders: [],
    apply: "restart",
  });
  const shell = { HOME: "/nonexistent", ANTHROPIC_API_KEY: "x", OPENAI_API_KEY: "y", GITHUB_TOKEN: "z" };
  const v = (gs: { variable: string }[]) => gs.map((g) => g.variable);
  const withModel = credentialGaps(shell, side(["OPENAI_API_KEY"]), "anthropic/claude-sonnet-4-5");
  assert.deepEqual([v(withModel.fail), v(withModel.warn)], [["ANTHROPIC_API_KEY"], []]);
  const none = credentialGaps(shell, side([]));
  assert.deepEqual([v(none.fail), v(none.warn)], [["ANTHROPIC_API_KEY", "OPENAI_API_KEY"], []]);
  const some = credentialGaps(shell, side(["OPENAI_API_KEY"]));
  assert.deepEqual([v(some.fail), v(some.warn)], [[], ["ANTHROPIC_API_KEY"]]);
  const copilot = credentialGaps(shell, side(["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]), "github-copilot/gpt-5");
  assert.deepEqual(v(copilot.fail), ["GITHUB_TOKEN"], "the default model's provider: its generic variable counts");
});
