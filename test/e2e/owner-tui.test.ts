// The owner's TUI cards through pi's own registerMessageRenderer: a real interactive owner pi 0.73.1 in a private
// tmux server, real headless children, the scripted model. The screen shows cards (icon, id, brief, Needs first,
// the unchanged report), never the model-bound JSON.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { resolvePiBin } from "../../src/pi/launch.js";
import { createTmuxRuntime } from "../../src/runtime/tmux/runtime.js";
import type { RuntimeHandle } from "../../src/runtime/types.js";
import { privateTmux, waitFor } from "../helpers/tmux.js";
import { startHarness, type Harness } from "./daemon-harness.js";
import { ownerExt } from "./owner-harness.js";

const task = (goal: string) => ({ goal, context: [], instructions: ["Report with crew_report."] });

const SCRIPT: Script = {
  conversations: [
    {
      name: "tui-done",
      match: "TUI-CHILD-DONE",
      steps: [
        {
          toolCalls: [
            { name: "crew_report", arguments: { outcome: "completed", report: "REPORT-LINE-ONE\n\nREPORT-LINE-TWO" } },
          ],
        },
      ],
    },
    {
      name: "tui-ask",
      match: "TUI-CHILD-ASK",
      steps: [
        {
          toolCalls: [
            {
              name: "crew_report",
              arguments: { outcome: "needs_input", report: "ASK-REPORT-TEXT", needs: "NEEDS-QUESTION-TEXT" },
            },
          ],
          delayMs: 500,
        },
      ],
    },
    {
      name: "owner",
      match: "OWNER-TUI",
      steps: [
        {
          match: "OWNER-TUI",
          toolCalls: [
            {
              name: "crew_spawn",
              arguments: { subagent: "worker", brief: "tui-done-brief", task: task("TUI-CHILD-DONE") },
            },
            {
              name: "crew_spawn",
              arguments: { subagent: "worker", brief: "tui-ask-brief", task: task("TUI-CHILD-ASK") },
            },
          ],
        },
        { text: "OWNER-ACK" },
      ],
    },
  ],
};

const tmux = privateTmux("dsh-owner-tui");
let h: Harness;
let pane: RuntimeHandle | undefined;
const runtime = createTmuxRuntime({ socketName: tmux.socketName, configFile: "/dev/null" });

before(async () => {
  h = await startHarness(SCRIPT, { runtime: "headless", defaultModel: "scripted/scripted-model" });
});
after(async () => {
  if (pane) await runtime.close(pane).catch(() => undefined);
  await tmux.kill();
  await h?.close();
});

test("interactive owner: result and needs-input cards render through the registered renderer, never as JSON", async () => {
  const sessionFile = join(h.dir, "owner-tui", "owner.jsonl");
  pane = await runtime.launch({
    taskId: "townertui001",
    name: "owner-tui",
    cwd: h.repo,
    taskDir: h.dir,
    env: { ...h.childEnv, DSH_HERDR_HOME: h.home },
    argv: [resolvePiBin(), "--model", h.modelName, "--session", sessionFile, "-e", ownerExt, "OWNER-TUI spawn two"],
  });
  const screen = () => runtime.readOutput(pane!, { lines: 400 });
  const { tasks } = await waitFor(
    "both children spawned and settled",
    async () => {
      const r = await h.cli.request("task.list", {});
      return r.tasks.length === 2 && r.tasks.every((t) => t.status === "completed" || t.status === "blocked")
        ? r
        : undefined;
    },
    90_000,
    200,
  );
  const done = tasks.find((t) => t.brief === "tui-done-brief")!;
  const ask = tasks.find((t) => t.brief === "tui-ask-brief")!;
  const text = await waitFor(
    "both cards on screen",
    async () => {
      const s = await screen();
      return s.includes(`✅ ${done.taskId}`) && s.includes(`❓ ${ask.taskId}`) && s.includes("REPORT-LINE-TWO")
        ? s
        : undefined;
    },
    60_000,
    200,
  );
  assert.match(text, new RegExp(`✅ ${done.taskId} · tui-done-brief`));
  // Bold comes from pi's theme, not from markdown markers shown literally.
  assert.match(text, /^\s*Needs\s*$/m);
  assert.doesNotMatch(text, /\*\*(Needs|✅|❓)/);
  assert.match(text, /REPORT-LINE-ONE[\s\S]*REPORT-LINE-TWO/);
  // Needs comes before the report on a needs-input card.
  const askAt = text.indexOf(`❓ ${ask.taskId}`);
  assert.ok(
    text.indexOf("NEEDS-QUESTION-TEXT", askAt) > askAt &&
      text.indexOf("NEEDS-QUESTION-TEXT", askAt) < text.indexOf("ASK-REPORT-TEXT", askAt),
    text,
  );
  // The model-bound delivery JSON stays out of the TUI: the card is drawn from details, not from the content.
  assert.doesNotMatch(text, /\{"subagent_id":"[^"]+","brief"/);
  assert.doesNotMatch(text, /"crew_status"/, "status snapshots are hidden in the TUI");
  // And the same deliveries did reach the model as JSON.
  const bodies = h.model
    .requests()
    .filter((r) => r.conversation === "owner")
    .map((r) => JSON.stringify(r.body));
  assert.ok(
    bodies.some((b) => b.includes(`\\"subagent_id\\":\\"${done.taskId}\\"`)),
    "the completed delivery reached the model",
  );
});
