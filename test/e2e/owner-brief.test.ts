// A task spawned for an owner without a brief is still delivered with one: the first line of its task (capped), never
// "". Real pi, the in-process daemon; the delivery is read from the owner's outbox.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { SCRIPT, startHarness, type Harness } from "./daemon-harness.js";

let h: Harness;
before(async () => {
  h = await startHarness(SCRIPT);
});
after(async () => {
  await h?.close();
});

test("--owner with no --brief: the result and its delivery carry the task's first line as the brief", async () => {
  const owner = "0b1ef00dcafe-briefless";
  const first = `MARK-QUICK tidy the logger ${"and more words ".repeat(12)}`;
  const { taskId } = await h.spawn({ prompt: `${first}\nsecond line`, owner });
  const r = await h.wait(taskId);
  assert.equal(r.status, "completed", JSON.stringify(r));
  assert.ok(r.brief && r.brief.length > 0 && r.brief.length <= 80, JSON.stringify(r.brief));
  assert.ok(first.startsWith(r.brief.replace(/…$/, "")), r.brief);
  const outbox = readFileSync(join(h.home, "owners", owner, "outbox.jsonl"), "utf8");
  assert.ok(outbox.includes(taskId), "delivered to the owner");
  assert.ok(!outbox.includes('"brief":""'), outbox.slice(0, 600));
  // A CLI task keeps what was asked: no brief given, none made up.
  const cli = await h.spawn({ prompt: "MARK-QUICK a cli one" });
  assert.equal((await h.wait(cli.taskId)).brief, undefined);
});
