// KeyedQueue (src/core/keyed-queue.ts): per key one operation at a time in call order, a failure does not stop the
// next one, other keys run beside, and idle() waits for all of it. Operations end when the test opens their gate (no
// timed waits).
import { test } from "node:test";
import assert from "node:assert/strict";
import { KeyedQueue } from "../../src/core/keyed-queue.js";

/** A promise the test resolves by hand. */
function gate(): { wait: Promise<void>; open(): void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}
const turn = () => new Promise((r) => setImmediate(r));

test("one key runs in call order, one at a time, past a failure; another key runs beside it", async () => {
  const q = new KeyedQueue();
  const log: string[] = [];
  let running = 0;
  let most = 0;
  const gates = new Map<string, ReturnType<typeof gate>>();
  const op =
    (name: string, fail = false) =>
    async () => {
      running++;
      most = Math.max(most, running);
      log.push(`${name}+`);
      const g = gate();
      gates.set(name, g);
      await g.wait;
      log.push(`${name}-`);
      running--;
      if (fail) throw new Error(name);
      return name;
    };
  const a1 = q.run("a", op("a1"));
  const a2 = q.run("a", op("a2", true));
  const a3 = q.run("a", op("a3"));
  const b1 = q.run("b", op("b1"));
  await turn();
  assert.deepEqual(log, ["a1+", "b1+"], "a2 waits for a1; b1 runs beside a1");
  gates.get("b1")!.open();
  await b1;
  assert.deepEqual(log, ["a1+", "b1+", "b1-"], "key b did not wait for key a");
  gates.get("a1")!.open();
  await a1;
  await turn();
  gates.get("a2")!.open();
  await assert.rejects(a2, /a2/);
  await turn();
  gates.get("a3")!.open();
  assert.deepEqual(await Promise.all([a1, a3, b1]), ["a1", "a3", "b1"]);
  assert.deepEqual(
    log.filter((l) => l.startsWith("a")),
    ["a1+", "a1-", "a2+", "a2-", "a3+", "a3-"],
  );
  assert.equal(most, 2, "two keys at once, never two of one key");
});

test("idle() resolves only after everything queued so far has run", async () => {
  const q = new KeyedQueue();
  let done = 0;
  const gates = [gate(), gate(), gate(), gate()];
  for (let i = 0; i < 3; i++) void q.run("k", async () => (await gates[i]!.wait, done++));
  void q.run("j", async () => (await gates[3]!.wait, done++)).catch(() => undefined);
  let idle = false;
  const waiting = q.idle().then(() => (idle = true));
  for (const g of gates) {
    await turn();
    assert.equal(idle, false, `idle before ${done} of 4 ran`);
    g.open();
  }
  await waiting;
  assert.equal(done, 4);
});
