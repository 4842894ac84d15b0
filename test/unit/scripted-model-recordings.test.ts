// The committed recordings (fixtures/sessions by real pi 0.73.1, fixtures/sessions/pi1 by pi 1.x) have the shapes
// their README promises.
// Guards re-recordings: a pi or script change that alters them fails here, not in a distant consumer.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const dir = join(import.meta.dirname, "..", "..", "..", "fixtures", "sessions");

function load(name: string, sub = ""): { lines: Record<string, any>[]; raw: string } {
  const raw = readFileSync(join(dir, sub, `${name}.jsonl`), "utf8");
  return {
    raw,
    lines: raw
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l)),
  };
}
/** role[:stopReason] of each message entry, in order (pi 1.x's per-run `system` entry left out). */
function shape(lines: Record<string, any>[]): string[] {
  return lines
    .filter((e) => e.type === "message" && e.message.role !== "system")
    .map((e) => e.message.role + (e.message.stopReason ? `:${e.message.stopReason}` : ""));
}

const expected: Record<string, string[]> = {
  "completed-write": ["user", "assistant:toolUse", "toolResult", "assistant:stop"],
  "multi-tool": [
    "user",
    "assistant:toolUse",
    "toolResult",
    "assistant:toolUse",
    "toolResult",
    "toolResult",
    "toolResult",
    "assistant:toolUse",
    "toolResult",
    "assistant:stop",
  ],
  "http-500-no-retry": ["user", "assistant:error"],
  "http-500-with-retry": ["user", "assistant:error", "assistant:error"],
  "abort-mid-tool": ["user", "assistant:toolUse", "toolResult", "assistant:aborted"],
  "follow-up": [
    "user",
    "assistant:toolUse",
    "toolResult",
    "assistant:stop",
    "user",
    "assistant:toolUse",
    "toolResult",
    "assistant:stop",
  ],
  "crew-report": ["user", "assistant:toolUse", "toolResult", "assistant:toolUse", "toolResult"],
};

for (const [name, roles] of Object.entries(expected))
  for (const sub of ["", "pi1"]) {
    test(`recording ${sub || "pi 0.73"} ${name}: header, placeholder cwd, message sequence`, () => {
      const { lines, raw } = load(name, sub);
      assert.deepEqual(
        lines.slice(0, 3).map((e) => e.type),
        ["session", "model_change", "thinking_level_change"],
      );
      assert.equal(lines[0]!.version, 3);
      assert.equal(lines[0]!.cwd, `/tmp/dsh-fixture/${name}/work`);
      assert.doesNotMatch(raw, /dsh-record-/, "temp dir paths must be replaced by the placeholder");
      assert.deepEqual(shape(lines), roles);
      // Every entry after the header chains to its predecessor (a linear branch).
      for (let i = 2; i < lines.length; i++) assert.equal(lines[i]!.parentId, lines[i - 1]!.id);
      if (sub === "pi1") {
        // 1.x records each run's system prompt before its user message.
        assert.equal(lines.filter((e) => e.type === "message")[0]!.message.role, "system");
        // ...and marks each retried attempt with a context_edit that omits it; only the retry recording has one.
        const edits = lines.filter((e) => e.type === "context_edit");
        assert.equal(edits.length, name === "http-500-with-retry" ? 1 : 0);
        if (edits[0]) assert.equal(lines[lines.indexOf(edits[0]) - 1]!.id, edits[0].targetId);
      }
    });
  }

test("recordings carry the details consumers key on", () => {
  const last = (name: string) => load(name).lines.at(-1)!.message;
  assert.equal(last("http-500-no-retry").errorMessage, "500 scripted upstream failure");
  assert.equal(last("abort-mid-tool").content.length, 0);
  const abortTool = load("abort-mid-tool").lines.at(-2)!.message;
  assert.deepEqual([abortTool.toolName, abortTool.isError], ["bash", true]);
  const crew = load("crew-report").lines;
  const call = crew.at(-2)!.message.content.find((c: any) => c.type === "toolCall");
  assert.deepEqual([call.name, call.arguments.outcome], ["crew_report", "completed"]);
  assert.equal(crew.at(-1)!.message.toolCallId, call.id);
  assert.equal(crew.at(-1)!.message.content[0].text, "{}");
  const batch = load("multi-tool").lines.filter((e) => e.type === "message")[3]!.message;
  assert.deepEqual(
    batch.content.filter((c: any) => c.type === "toolCall").map((c: any) => c.name),
    ["write", "write", "read"],
  );
  assert.equal(last("follow-up").content[0].text, "Second cycle done: notes.md has two lines.");
});
