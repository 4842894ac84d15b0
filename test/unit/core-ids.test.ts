import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { agentName, assertTaskId, isValidTaskId, modelSlug, newTaskId } from "../../src/core/ids.js";
import { isDshError } from "../../src/core/errors.js";

test("newTaskId: 12 chars, t + lowercase base36, and valid", () => {
  const id = newTaskId(1760000000000, new Uint8Array([1, 2, 3]));
  assert.equal(id.length, 12);
  assert.match(id, /^t[0-9a-z]{11}$/);
  assert.ok(isValidTaskId(id));
  assert.equal(newTaskId(0, new Uint8Array([0, 0, 0])), "t00000000000");
});

test("newTaskId: ids made in a later millisecond sort later as strings, whatever the random bytes", () => {
  const arb = fc.tuple(
    fc.integer({ min: 0, max: 36 ** 8 - 2 }),
    fc.nat(36 ** 8),
    fc.uint8Array({ minLength: 3, maxLength: 3 }),
    fc.uint8Array({ minLength: 3, maxLength: 3 }),
  );
  fc.assert(
    fc.property(arb, ([t, d, r1, r2]) => {
      const later = Math.min(t + 1 + d, 36 ** 8 - 1);
      return newTaskId(t, r1) < newTaskId(later, r2);
    }),
  );
});

test("newTaskId refuses a bad clock or too few random bytes with BAD_PARAMS", () => {
  for (const now of [-1, 1.5, Number.NaN, 36 ** 8]) {
    assert.throws(
      () => newTaskId(now, new Uint8Array(3)),
      (e) => isDshError(e) && e.code === "BAD_PARAMS",
    );
  }
  assert.throws(() => newTaskId(1, new Uint8Array(2)), /at least 3 random bytes/);
});

test("isValidTaskId refuses hostile and malformed strings", () => {
  for (const bad of [
    "../x",
    "/etc",
    "",
    "t",
    "tmg3k2a1b2c",
    "tmg3k2a1b2c3d",
    "TMG3K2A1B2C3",
    "xmg3k2a1b2c3",
    "tmg3k2a1b2c/",
    "tmg3k2a1b2c3\n",
    "t".repeat(10_000),
    "tmg3k2a1.2c3",
    null,
    42,
    undefined,
  ]) {
    assert.equal(isValidTaskId(bad), false, String(bad).slice(0, 20));
  }
  assert.throws(
    () => assertTaskId("../x"),
    (e) => isDshError(e) && e.code === "BAD_TASK_ID" && /tmg3k2a1b2c3/.test(e.message),
  );
  assert.equal(assertTaskId("tmg3k2a1b2c3"), "tmg3k2a1b2c3");
});

test("agentName: <role>-<model slug>-<last 4 of task id>", () => {
  assert.equal(agentName("worker", "flash", "tmg3k2a1a1b2"), "worker-flash-a1b2");
  assert.equal(agentName("reviewer", "grok4.7", "tmg3k2a1a1b2"), "review-grok4-7-a1b2");
  assert.equal(
    agentName("worker", "commandcode/deepseek/deepseek-v4.1-flash", "tmg3k2a1b2c3"),
    "worker-v4-1-flash-b2c3",
  );
  assert.equal(modelSlug("xai/grok-4.7"), "grok-4-7");
  assert.equal(modelSlug("fake/fake-model"), "fake-model");
  assert.equal(modelSlug("///"), "model");
  assert.equal(modelSlug("a/averyveryverylongmodelnamewithoutdashes"), "averyveryver");
  // the slug is safe inside tmux window names and Herdr labels
  fc.assert(fc.property(fc.string(), (m) => /^[a-z0-9-]{1,12}$/.test(modelSlug(m))));
});
