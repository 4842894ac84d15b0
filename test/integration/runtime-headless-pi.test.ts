// Real pi 0.73.1 in --mode rpc under the headless runtime against the scripted model: prompts go through the
// stdin FIFO as RPC commands, abort as {"type":"abort"}, close by SIGTERM to the process group.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createHeadlessRuntime } from "../../src/runtime/headless/runtime.js";
import { startPiHarness, type PiHarness } from "../helpers/pi.js";
import { waitFor } from "../helpers/tmux.js";

let harness: PiHarness | undefined;
after(async () => {
  await harness?.cleanup();
});

function assistantTexts(sessionFile: string): string[] {
  let text = "";
  try {
    text = readFileSync(sessionFile, "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .filter(Boolean)
    .map(
      (l) => JSON.parse(l) as { type: string; message?: { role: string; content: { type: string; text?: string }[] } },
    )
    .filter((e) => e.type === "message" && e.message?.role === "assistant")
    .map((e) =>
      e
        .message!.content.filter((c) => c.type === "text")
        .map((c) => c.text)
        .join(""),
    );
}

test("headless + real pi --mode rpc: prompt, follow-up, abort and close through the runtime", async () => {
  harness = await startPiHarness({
    prefix: "dsh-headless-pi-",
    script: {
      conversations: [
        { steps: [{ text: "FIRST-ANSWER from scripted model" }, { text: "SECOND-ANSWER after follow-up" }] },
      ],
    },
  });
  // pi ends on SIGTERM within a second when idle; 10 s of grace so a loaded machine does not escalate to SIGKILL.
  const runtime = createHeadlessRuntime({ closeGraceMs: 10_000 });
  const taskDir = join(harness.dir, "task");
  const sessionFile = join(taskDir, "session.jsonl");
  const h = await runtime.launch({
    taskId: "tpihead00001",
    name: "worker-pi-b2",
    cwd: harness.work,
    taskDir,
    env: harness.env,
    argv: [harness.piBin, "--mode", "rpc", "--model", harness.modelName, "--session", sessionFile],
  });
  try {
    assert.equal(await runtime.isAlive(h), true);
    await runtime.sendText(h, "first prompt from the owner");
    await waitFor("the first answer", async () => assistantTexts(sessionFile).length === 1, 45_000, 100);
    await runtime.sendText(h, "second prompt: please continue");
    await waitFor("the second answer", async () => assistantTexts(sessionFile).length === 2, 45_000, 100);
    assert.deepEqual(assistantTexts(sessionFile), [
      "FIRST-ANSWER from scripted model",
      "SECOND-ANSWER after follow-up",
    ]);
    assert.match(readFileSync(sessionFile, "utf8"), /second prompt: please continue/);

    await runtime.sendKeys(h, ["Escape"]);
    await waitFor(
      "the abort response",
      async () => /"command":"abort","success":true/.test(await runtime.readOutput(h, { lines: 20 })),
      15_000,
    );
    assert.match(await runtime.readOutput(h, { lines: 400 }), /"type":"agent_end"/);
    assert.equal(await runtime.isAlive(h), true, "pi in rpc mode stays up between prompts (stdin never hits EOF)");
  } finally {
    await runtime.close(h);
  }
  assert.equal(await runtime.isAlive(h), false);
  // pi handles SIGTERM itself and exits 143.
  assert.deepEqual(await waitFor("exit.json", async () => runtime.exitStatus(h), 10_000), { code: 143, signal: null });
});
