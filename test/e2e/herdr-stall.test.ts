// On the Herdr runtime a child that never says hello fails AGENT_STALLED from our own evidence, and the failure names
// what Herdr said of the pane's agent (its raw word), so a user can tell Herdr's view from ours. The fake Herdr's
// broken pi detection (#3955 mode: a pi reads idle) gives a word that cannot be ours: the child never was idle.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeHerdr, type FakeHerdr } from "../../fixtures/fake-herdr/server.js";
import { SCRIPT, startHarness, type Harness } from "./daemon-harness.js";

let fake: FakeHerdr;
let h: Harness;
before(async () => {
  // A pi that answers --version, shows its token on screen (as a crash dump might), then never says hello. Named
  // `pi` and not exec'ing its sleep, so Herdr detects a pi agent in the pane.
  const bin = join(mkdtempSync(join(tmpdir(), "dsh-herdr-stall-")), "bin");
  mkdirSync(bin);
  const mute = join(bin, "pi");
  writeFileSync(
    mute,
    '#!/bin/sh\nif [ "$1" = --version ]; then echo 0.73.1; exit 0; fi\necho "raw: $DSH_HERDR_TASK_TOKEN"\nsleep 600\n',
  );
  chmodSync(mute, 0o755);
  fake = await startFakeHerdr({ quietMs: 1000 });
  fake.misbehave({ detection: "busy_reads_idle" });
  h = await startHarness(
    SCRIPT,
    { runtime: "herdr", herdrSocketPath: fake.socketPath, readinessTimeoutMs: 1500 },
    { DSH_HERDR_PI_BIN: mute },
  );
});
after(async () => {
  await h?.close();
  await fake?.close();
});

test("herdr: a child that never says hello fails AGENT_STALLED naming Herdr's own word for the pane's agent, and no token", async () => {
  const { taskId } = await h.spawn({ prompt: "MARK-WORKER never starts", runtime: "herdr", isolated: true });
  const r = await h.wait(taskId);
  assert.equal(r.status, "failed", JSON.stringify(r));
  assert.equal(r.error?.code, "AGENT_STALLED", JSON.stringify(r.error));
  const message = r.error?.message ?? "";
  assert.match(message, /Herdr read the pane's agent as idle/, message);
  const token = (JSON.parse(readFileSync(join(h.home, "tasks", taskId, "task.json"), "utf8")) as { token: string })
    .token;
  assert.match(token, /^\S{16,}$/);
  assert.ok(!message.includes(token), "the message carries the task token");
  assert.match(message, /raw: \[redacted\]/, "the screen is still quoted");
});
