// Endings nobody wanted reach a real owner pi's model (issue 17): a prompt pi refused for want of an API key, and a
// timeout. The owner pi (RPC mode, with the owner extension) hears each as {subagent_id, brief, status:"error", error}
// in its next model request, never as silence or a TUI-only card.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import type { RpcPi } from "../../fixtures/scripted-model/rpc-child.js";
import type { RecordedRequest } from "../../fixtures/scripted-model/server.js";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { startHarness, type Harness } from "./daemon-harness.js";
import { startOwnerPi } from "./owner-harness.js";
import { rpcCommand, until } from "../helpers/wait.js";

const SCRIPT: Script = {
  conversations: [
    { name: "slow", match: "CHILD-SLOW", steps: [{ text: "slow", delayMs: 120_000 }] },
    {
      name: "quick",
      match: "CHILD-QUICK",
      steps: [{ toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "quick" } }] }],
    },
    { name: "owner", match: "OWNER-", afterEnd: "repeat", steps: [{ text: "Noted." }] },
  ],
};

let h: Harness;
let owner: RpcPi;
before(async () => {
  h = await startHarness(SCRIPT, { runtime: "headless", readinessTimeoutMs: 30_000 });
  owner = startOwnerPi(h, {
    sessionPath: join(h.dir, "owner", "owner.jsonl"),
    lifetimeMs: 600_000,
  });
});
after(async () => {
  await owner?.close().catch(() => undefined);
  await h?.close();
});

const command = (cmd: Record<string, unknown>) => rpcCommand(owner, cmd);
/** Error deliveries the owner's model has seen in its requests, by subagent id. */
function errorsSeen(): Map<string, { status: string; error: string }> {
  const out = new Map<string, { status: string; error: string }>();
  for (const r of h.model.requests().filter((x: RecordedRequest) => x.conversation === "owner")) {
    for (const m of (r.body as { messages: { content?: unknown }[] }).messages ?? []) {
      const t =
        typeof m.content === "string"
          ? m.content
          : Array.isArray(m.content)
            ? m.content.map((p: { text?: string }) => p.text ?? "").join("")
            : "";
      if (!t.startsWith('{"subagent_id"')) continue;
      const j = JSON.parse(t) as { subagent_id: string; status?: string; error?: string };
      if (j.status === "error") out.set(j.subagent_id, { status: j.status, error: j.error ?? "" });
    }
  }
  return out;
}

let ownerId = "";
test("the owner pi starts a session (its extension attaches at session start)", async () => {
  assert.equal((await command({ type: "prompt", message: "OWNER-HELLO" })).success, true);
  await owner.waitFor((e) => e.type === "agent_end", 60_000);
  ownerId = (await command({ type: "get_state" })).data.sessionId as string;
  assert.match(ownerId, /\S/);
});

test("a child whose built-in provider has no API key: the owner's next model request holds PROMPT_FAILED with pi's words", async () => {
  const s = await h.spawn({
    prompt: "CHILD-QUICK",
    model: "anthropic/claude-haiku-4-5",
    owner: ownerId,
    brief: "no key",
  });
  const seen = await until("the error in the owner's model context", () => errorsSeen().get(s.taskId), 90_000);
  assert.match(seen.error, /^PROMPT_FAILED: pi did not run the prompt: No API key found for anthropic/);
});

test("a child that times out: the owner's model gets the TIMEOUT error", async () => {
  const s = await h.spawn({ prompt: "CHILD-SLOW", owner: ownerId, brief: "too slow", timeoutMs: 15_000 });
  const seen = await until("the timeout in the owner's model context", () => errorsSeen().get(s.taskId), 120_000);
  assert.match(seen.error, /^TIMEOUT: no result within timeoutMs/);
});
