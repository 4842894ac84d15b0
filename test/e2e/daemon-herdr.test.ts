import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { herdrSchemaErrors, schemaFor } from "../helpers/herdr-schema.js";
import { SCRIPT, startHarness, type Harness } from "./daemon-harness.js";
import { defineRuntimeScenarios } from "./scenarios.js";
import { startFakeHerdr, type FakeHerdr } from "../../fixtures/fake-herdr/server.js";

let fake: FakeHerdr;
let h: Harness;
before(async () => {
  fake = await startFakeHerdr({ quietMs: 1000 });
  h = await startHarness(SCRIPT, { runtime: "herdr", herdrSocketPath: fake.socketPath });
});
after(async () => {
  await h?.close();
  await fake?.close();
});

defineRuntimeScenarios(() => h, "herdr", async (hh, taskId) => {
  // The user closes the pane behind Herdr's back.
  await fake.losePane(hh.daemon.supervisor.tasks.get(taskId)!.rec.handle!.paneId!);
});

test("herdr: every message the daemon exchanged with Herdr validates against Herdr's published schema", () => {
  assert.ok(fake.log.length > 20, `only ${fake.log.length} messages logged`);
  for (const { kind, message } of fake.log) {
    assert.equal(herdrSchemaErrors(schemaFor(kind, message as Record<string, unknown>), message), "", JSON.stringify(message));
  }
});
