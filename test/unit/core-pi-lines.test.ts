// The pure pieces of running on both pi lines: the retry outlook per line, pi's start-failure lines, model choice.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  errorEndingOutlook,
  isRetryOmission,
  piLineOfEntry,
  piLineOfVersion,
} from "../../src/core/session/retry-outlook.js";
import { classifyPiStartFailure } from "../../src/core/session/pi-failure.js";
import { resolveSpawnModel } from "../../src/core/session/model-choice.js";
import { DshError } from "../../src/core/errors.js";

const on = { enabled: true, maxRetries: 2 };
const quota =
  '429: {"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}';

test("piLineOfVersion and piLineOfEntry tell the lines apart", () => {
  assert.equal(piLineOfVersion("0.73.1"), "0.73");
  assert.equal(piLineOfVersion("1.6.0"), "1.x");
  assert.equal(piLineOfVersion("2.0.0-beta.1"), "1.x");
  assert.equal(piLineOfVersion("pi"), undefined);
  assert.equal(piLineOfEntry({ type: "message", message: { role: "system" } }), "1.x");
  assert.equal(piLineOfEntry({ type: "context_edit" }), "1.x");
  assert.equal(piLineOfEntry({ type: "message", message: { role: "user" } }), undefined);
});

test("errorEndingOutlook: 0.73 by its own rule and settings; 1.x always waits for pi's own signal", () => {
  assert.equal(
    errorEndingOutlook("0.73", { errorMessage: quota, settings: on, retryableInARow: 1 }),
    "retry",
    "0.73 retries any 429",
  );
  assert.equal(
    errorEndingOutlook("0.73", { errorMessage: quota, settings: on, retryableInARow: 3 }),
    "final",
    "past maxRetries",
  );
  assert.equal(
    errorEndingOutlook("0.73", {
      errorMessage: quota,
      settings: { enabled: false, maxRetries: 3 },
      retryableInARow: 1,
    }),
    "final",
  );
  assert.equal(
    errorEndingOutlook("0.73", { errorMessage: "Invalid API key", settings: on, retryableInARow: 0 }),
    "final",
  );
  assert.equal(errorEndingOutlook("1.x", { errorMessage: quota, settings: on, retryableInARow: 1 }), "await_settle");
  assert.equal(
    errorEndingOutlook("1.x", { errorMessage: "500 upstream", settings: on, retryableInARow: 1 }),
    "await_settle",
  );
});

test("isRetryOmission: a context_edit that omits exactly that attempt", () => {
  assert.equal(isRetryOmission({ type: "context_edit", targetId: "a1", replacement: null }, "a1"), true);
  assert.equal(isRetryOmission({ type: "context_edit", targetId: "a0", replacement: null }, "a1"), false);
  assert.equal(isRetryOmission({ type: "context_edit", targetId: "a1", replacement: { x: 1 } }, "a1"), false);
  assert.equal(isRetryOmission({ type: "message" }, "a1"), false);
});

test("classifyPiStartFailure finds pi's model-not-found line in either line's output", () => {
  const out =
    'Error: Model "nope/none" not found. Use --list-models to see available models.\nWarning: No models available.';
  assert.deepEqual(classifyPiStartFailure(`--- stderr ---\n${out}`), {
    code: "MODEL_NOT_FOUND",
    line: 'Model "nope/none" not found. Use --list-models to see available models.',
  });
  assert.equal(classifyPiStartFailure("some other crash"), undefined);
  assert.equal(classifyPiStartFailure(""), undefined);
});

test("resolveSpawnModel: alias, provider/id, none (pi's default); an undefined bare alias is MODEL_UNKNOWN naming the fix", () => {
  const cfg = { modelAliases: { fast: "openai/gpt-5-mini" } };
  assert.equal(resolveSpawnModel("fast", cfg), "openai/gpt-5-mini");
  assert.equal(resolveSpawnModel("anthropic/claude-sonnet-4-5", cfg), "anthropic/claude-sonnet-4-5");
  assert.equal(resolveSpawnModel(undefined, cfg), undefined);
  assert.equal(resolveSpawnModel(undefined, { ...cfg, defaultModel: "fast" }), "openai/gpt-5-mini");
  assert.throws(
    () => resolveSpawnModel("flash", cfg),
    (e: unknown) =>
      e instanceof DshError &&
      e.code === "MODEL_UNKNOWN" &&
      /config set modelAliases\.flash provider\/id/.test(e.message) &&
      /fast/.test(e.message),
  );
  assert.throws(
    () => resolveSpawnModel(undefined, { modelAliases: {}, defaultModel: "flash" }),
    (e: unknown) => e instanceof DshError && e.code === "MODEL_UNKNOWN" && /configured defaultModel/.test(e.message),
  );
  assert.throws(
    () => resolveSpawnModel("toString", cfg),
    (e: unknown) => e instanceof DshError && e.code === "MODEL_UNKNOWN",
    "no prototype keys",
  );
});
