// Real pi 0.73.1 (interactive TUI) in the tmux runtime against the scripted model: initial prompt, a follow-up
// typed into the pane, then close.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createTmuxRuntime } from "../../src/runtime/tmux/runtime.js";
import { startPiHarness, type PiHarness } from "../helpers/pi.js";
import { privateTmux, waitFor } from "../helpers/tmux.js";

const tmux = privateTmux("dsh-test-pi");
let harness: PiHarness | undefined;
after(async () => {
  await tmux.kill();
  await harness?.cleanup();
});

/** Assistant texts in the session file, in order ("" until the file exists). */
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

/** The server's sessions and panes and pi's process state, for a failure message. */
async function whatIsLeft(pid: number): Promise<string> {
  const panes = await tmux
    .run([
      "list-panes",
      "-a",
      "-F",
      "#{session_name} #{pane_id} #{pane_pid} dead=#{pane_dead} status=#{pane_dead_status}",
    ])
    .catch((e: Error) => `list-panes: ${e.message}`);
  let proc = "gone";
  try {
    proc = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.slice(0, 1) ?? "?";
  } catch {
    // no such process
  }
  return `pi's pane is not alive; tmux: ${panes || "(no panes)"}; pi pid ${pid} state ${proc}`;
}

test("tmux + real pi: the initial prompt runs, a multi-line follow-up typed into the pane gets one second answer, close ends it", async () => {
  harness = await startPiHarness({
    prefix: "dsh-tmux-pi-",
    script: {
      conversations: [
        { steps: [{ text: "FIRST-ANSWER from scripted model" }, { text: "SECOND-ANSWER after follow-up" }] },
      ],
    },
  });
  const runtime = createTmuxRuntime({ socketName: tmux.socketName, configFile: "/dev/null" });
  const sessionFile = join(harness.dir, "sessions", "child.jsonl");
  const h = await runtime.launch({
    taskId: "tpitmux00001",
    name: "worker-pi-a1",
    cwd: harness.work,
    taskDir: harness.dir,
    env: harness.env,
    argv: [harness.piBin, "--model", harness.modelName, "--session", sessionFile, "first prompt from the owner"],
  });
  await waitFor(
    "the first answer in the session file",
    async () => assistantTexts(sessionFile).length === 1,
    45_000,
    100,
  );
  assert.deepEqual(assistantTexts(sessionFile), ["FIRST-ANSWER from scripted model"]);
  // One CI run found the server up with no session here (cause unknown): say what was left, to find it next time.
  assert.equal(await runtime.isAlive(h), true, await whatIsLeft(h.pid!));
  await waitFor(
    "the answer on screen",
    async () => /FIRST-ANSWER/.test(await runtime.readOutput(h, { lines: 200 })),
    15_000,
    100,
  );

  // Multi-line text arrives as one message (bracketed paste), not one submit per line.
  await runtime.sendText(h, "second prompt:\nplease continue");
  await waitFor("the second answer", async () => assistantTexts(sessionFile).length === 2, 45_000, 100);
  assert.deepEqual(assistantTexts(sessionFile), ["FIRST-ANSWER from scripted model", "SECOND-ANSWER after follow-up"]);
  assert.match(readFileSync(sessionFile, "utf8"), /second prompt:\\nplease continue/);
  await new Promise((r) => setTimeout(r, 500)); // a stray second submit would show up as a third request
  assert.equal(harness.model.requests().length, 2);

  const pid = h.pid!;
  await runtime.close(h);
  assert.equal(await runtime.isAlive(h), false);
  assert.equal(await runtime.agentState!(h), "missing");
  await waitFor(
    "pi to exit",
    async () => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    },
    15_000,
  );
});
