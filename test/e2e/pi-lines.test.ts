// The first-run failures that differ between pi lines, through a real daemon and real headless pi children (0.73.1,
// or the 1.x that DSH_HERDR_PI_BIN names; CI runs this file on both): a quota error with retries on, an unknown
// model, an undefined alias, and a spawn with no model anywhere (pi's own default).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { startHarness, type Harness } from "./daemon-harness.js";
import { testPiLine } from "../helpers/pi.js";

// OpenAI's quota error. pi 1.x never retries it; pi 0.73.1's rule ("429") retries it up to maxRetries.
const QUOTA = {
  status: 429,
  message: "You exceeded your current quota, please check your plan and billing details.",
  type: "insufficient_quota",
  code: "insufficient_quota",
};
const report = (text: string) => ({
  toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: text } }],
});

const SCRIPT: Script = {
  conversations: [
    { name: "quota", match: "PI-QUOTA", afterEnd: "repeat", steps: [{ httpError: QUOTA }] },
    { name: "default", match: "PI-DEFAULT", steps: [report("answered on pi's default model")] },
  ],
};

let h: Harness;
before(async () => {
  // No defaultModel (the fresh config), and pi's auto-retry on: 2 retries, short delays.
  h = await startHarness(SCRIPT, { runtime: "headless", readinessTimeoutMs: 30_000 });
  const settingsPath = join(h.dir, "agent", "settings.json");
  const settings = JSON.parse(readFileSync(settingsPath, "utf8")) as Record<string, unknown>;
  writeFileSync(
    settingsPath,
    JSON.stringify({
      ...settings,
      retry: { enabled: true, maxRetries: 2, baseDelayMs: 100, provider: { maxRetries: 0 } },
    }),
  );
});
after(async () => {
  await h?.close();
});

test(`pi ${testPiLine()}: a 429 insufficient_quota with retries on settles failed (no hang until the task timeout)`, async () => {
  const { taskId } = await h.spawn({ prompt: "PI-QUOTA do it" });
  // The task timeout is 15 minutes: settling inside this wait means the retry outlook ended, not the timeout.
  const r = await h.wait(taskId, 60_000);
  assert.equal(r.status, "failed", JSON.stringify(r));
  assert.match(JSON.stringify(r), /exceeded your current quota/);
  const quota = h.model.requests().filter((q) => q.conversation === "quota").length;
  // 1.x: one request, never retried; 0.73.1: the first and its two retries.
  assert.equal(quota, testPiLine() === "1.x" ? 1 : 3);
});

test(`pi ${testPiLine()}: an unknown model fails as MODEL_NOT_FOUND with pi's own line, not AGENT_STALLED`, async () => {
  const { taskId } = await h.spawn({ prompt: "PI-DEFAULT never sent", model: "nosuch-provider/no-such-model" });
  const r = await h.wait(taskId, 90_000);
  assert.equal(r.status, "failed");
  assert.equal(r.error?.code, "MODEL_NOT_FOUND", JSON.stringify(r.error));
  assert.match(r.error?.message ?? "", /Model "nosuch-provider\/no-such-model" not found/);
});

test(`pi ${testPiLine()}: an alias nobody defined is refused at spawn with MODEL_UNKNOWN naming the fix`, async () => {
  const before = (await h.cli.request("task.list", { limit: 100 })).tasks.length;
  await assert.rejects(
    h.cli.request("task.spawn", { cwd: h.repo, prompt: "PI-DEFAULT x", model: "flash" }),
    (e: unknown) => {
      const err = e as { code?: string; message?: string };
      assert.equal(err.code, "MODEL_UNKNOWN");
      assert.match(err.message ?? "", /config set modelAliases\.flash provider\/id/);
      return true;
    },
  );
  const listed = await h.cli.request("task.list", { limit: 100 });
  assert.equal(listed.tasks.length, before, "nothing was recorded");
});

test(`pi ${testPiLine()}: no --model and no defaultModel: pi's own default runs and the task settles`, async () => {
  const { taskId } = await h.cli.request("task.spawn", { cwd: h.repo, prompt: "PI-DEFAULT go" });
  const r = await h.wait(taskId, 90_000);
  assert.equal(r.status, "completed", JSON.stringify(r));
  // agent.model and agent.thinking are what pi ran, read from its session, not the placeholders asked for ("default",
  // the daemon's defaultThinking "medium"): pi picked the scripted model and clamped thinking to off (no reasoning).
  assert.equal(r.agent.model, h.modelName);
  assert.equal(r.agent.thinking, "off");
  assert.equal(r.result?.text, "answered on pi's default model");
  // pi chose the only model it has (the scripted one): the request reached it without a --model from us.
  assert.ok(h.model.requests().some((q) => q.conversation === "default"));
});
