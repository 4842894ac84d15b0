// KeyedQueue (src/core/keyed-queue.ts): per key one operation at a time in call order, a failure does not stop the
// next one, other keys run beside, and idle() waits for all of it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { KeyedQueue } from "../../src/core/keyed-queue.js";

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

test("one key runs in call order, one at a time, past a failure; another key runs beside it", async () => {
  const q = new KeyedQueue();
  const log: string[] = [];
  let running = 0;
  let most = 0;
  const op =
    (name: string, ms: number, fail = false) =>
    async () => {
      running++;
      most = Math.max(most, running);
      log.push(`${name}+`);
      await tick(ms);
      log.push(`${name}-`);
      running--;
      if (fail) throw new Error(name);
      return name;
    };
  const a1 = q.run("a", op("a1", 30));
  const a2 = q.run("a", op("a2", 5, true));
  const a3 = q.run("a", op("a3", 5));
  const b1 = q.run("b", op("b1", 5));
  await assert.rejects(a2, /a2/);
  assert.deepEqual(await Promise.all([a1, a3, b1]), ["a1", "a3", "b1"]);
  assert.deepEqual(
    log.filter((l) => l.startsWith("a")),
    ["a1+", "a1-", "a2+", "a2-", "a3+", "a3-"],
  );
  assert.ok(log.indexOf("b1-") < log.indexOf("a1-"), "key b did not wait for key a");
  assert.equal(most, 2, "two keys at once, never two of one key");
});

test("idle() resolves only after everything queued so far has run", async () => {
  const q = new KeyedQueue();
  let done = 0;
  for (let i = 0; i < 3; i++) void q.run("k", async () => (await tick(10), done++));
  void q.run("j", async () => (await tick(15), done++)).catch(() => undefined);
  await q.idle();
  assert.equal(done, 4);
});
