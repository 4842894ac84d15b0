// The crew tools' own lines in a real interactive owner pi (DSH_HERDR_PI_BIN or pi 0.73.1) in a private tmux
// server: a spawn shows `spawned <agent name> · <brief>` instead of the tool's JSON, a failed call shows its error
// text, and a result card renders the report's Markdown through pi's Markdown component (no literal `**`).
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

const REPORT = "Fixed it: **BOLD-WORD** stays and `CODE-WORD` too.\n\n- ITEM-ONE\n- ITEM-TWO";

const SCRIPT: Script = {
  conversations: [
    {
      name: "render-child",
      match: "RENDER-CHILD",
      steps: [{ toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: REPORT } }] }],
    },
    {
      name: "owner",
      match: "OWNER-RENDER",
      steps: [
        {
          toolCalls: [
            {
              name: "crew_spawn",
              arguments: { subagent: "worker", brief: "retry with jitter", task: task("RENDER-CHILD") },
            },
          ],
        },
        { toolCalls: [{ name: "crew_done", arguments: { subagent_id: "tnosuchtask1" } }] },
        { text: "OWNER-ACK" },
      ],
    },
  ],
};

const tmux = privateTmux("dsh-owner-render");
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

test("interactive owner: crew tools show one-line confirmations and errors as text; the card renders Markdown", async () => {
  pane = await runtime.launch({
    taskId: "townerrender",
    name: "owner-render",
    cwd: h.repo,
    taskDir: h.dir,
    env: { ...h.childEnv, DSH_HERDR_HOME: h.home },
    argv: [
      resolvePiBin(),
      "--model",
      h.modelName,
      "--session",
      join(h.dir, "owner-render", "owner.jsonl"),
      "-e",
      ownerExt,
      "OWNER-RENDER go",
    ],
  });
  const screen = () => runtime.readOutput(pane!, { lines: 400 });
  const child = await waitFor(
    "the child settled",
    async () => {
      const r = await h.cli.request("task.list", {});
      return r.tasks.find((t) => t.status === "completed");
    },
    90_000,
    200,
  );
  let last = "";
  const text = await waitFor(
    "the confirmation, the error and the card on screen",
    async () => {
      const s = (last = await screen());
      return s.includes("spawned ") &&
        s.includes("tnosuchtask1") &&
        s.includes(`✅ ${child.taskId}`) &&
        s.includes("ITEM-TWO") &&
        s.includes("OWNER-ACK")
        ? s
        : undefined;
    },
    60_000,
    200,
  ).catch((e: Error) => {
    throw new Error(`${e.message}; the screen:\n${last}`);
  });
  // The spawn's result line: the agent name (its last 4 are the id's) and the brief, not {"subagent_id": ...}.
  assert.match(text, new RegExp(`spawned ${child.agent.name} · retry with jitter`), text);
  assert.ok(child.agent.name.endsWith(child.taskId.slice(-4)));
  assert.match(text, /crew_spawn worker · retry with jitter/, "the call is one line: tool, subagent, brief");
  assert.doesNotMatch(text, /\{"subagent_id":"t[0-9a-z]{11}"\}/, "the tool's JSON stays in the model context");
  // The failed crew_done shows its words, not the {"error": ...} JSON.
  assert.match(text, /No subagent with id "tnosuchtask1"/);
  assert.doesNotMatch(text, /\{"error":/);
  // The card's report went through pi's Markdown: bold and code without their markers.
  assert.match(text, /Fixed it: BOLD-WORD stays and CODE-WORD too\./);
  assert.doesNotMatch(text, /\*\*BOLD-WORD\*\*|`CODE-WORD`/);
  assert.match(text, /ITEM-ONE[\s\S]*ITEM-TWO/);
  // The model still got the JSON.
  const bodies = h.model
    .requests()
    .filter((r) => r.conversation === "owner")
    .map((r) => JSON.stringify(r.body));
  assert.ok(
    bodies.some((b) => b.includes(`{\\"subagent_id\\":\\"${child.taskId}\\"}`)),
    "the spawn result reached the model as JSON",
  );
});
