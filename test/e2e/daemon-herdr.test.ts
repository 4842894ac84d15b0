// The daemon on the Herdr runtime against the fake Herdr, once speaking protocol 20 (Herdr 0.8.2) and once 22
// (Herdr 0.9); every message validates against that protocol's schema.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { HERDR_PROTOCOLS, type HerdrProtocol, herdrSchemaErrors, schemaFor } from "../helpers/herdr-schema.js";
import { piBin } from "../helpers/pi.js";
import { createHerdrRuntime } from "../../src/runtime/herdr/index.js";
import { SCRIPT, startHarness, type Harness } from "./daemon-harness.js";
import { defineRuntimeScenarios } from "./scenarios.js";
import { startFakeHerdr, type FakeHerdr } from "../../fixtures/fake-herdr/server.js";

let fake: FakeHerdr;
let h: Harness;

for (const p of HERDR_PROTOCOLS) describe(`protocol ${p}`, () => suite(p));

function suite(protocol: HerdrProtocol): void {
  before(async () => {
    fake = await startFakeHerdr({ quietMs: 1000, protocol });
    h = await startHarness(SCRIPT, { runtime: "herdr", herdrSocketPath: fake.socketPath });
  });
  after(async () => {
    await h?.close();
    await fake?.close();
  });

  defineRuntimeScenarios(
    () => h,
    "herdr",
    async (hh, taskId) => {
      // The user closes the pane behind Herdr's back.
      await fake.losePane(hh.daemon.supervisor.tasks.get(taskId)!.rec.handle!.paneId!);
    },
  );

  test(`herdr: every message the daemon exchanged with Herdr validates against Herdr's protocol-${protocol} schema`, () => {
    assert.ok(fake.log.length > 20, `only ${fake.log.length} messages logged`);
    for (const { kind, message } of fake.log) {
      assert.equal(
        herdrSchemaErrors(schemaFor(kind, message as Record<string, unknown>), message, protocol),
        "",
        JSON.stringify(message),
      );
    }
  });

  test("herdr: task.list --external shows an agent the daemon did not spawn, observationally, and not ours", async () => {
    const rt = createHerdrRuntime({ socketPath: fake.socketPath });
    const handle = await rt.launch({
      taskId: "texternal0001",
      name: "someone-else",
      argv: [piBin, "--model", h.modelName],
      env: { ...h.childEnv },
      cwd: h.repo,
      taskDir: h.dir,
      repoName: "repo",
    });
    try {
      type Listing = {
        tasks: unknown[];
        external: { name: string; status: string; external: boolean; paneId: string }[];
      };
      // Herdr sees the agent once the pane's process is up (slower with pi 1.x's wrapper): ask until it is listed.
      let listing: Listing = await h.cli.request<Listing>("task.list", { external: true });
      for (let i = 0; i < 200 && listing.external.length === 0; i++) {
        await new Promise((r) => setTimeout(r, 100));
        listing = await h.cli.request<Listing>("task.list", { external: true });
      }
      const { tasks, external } = listing;
      assert.ok(tasks.length > 0);
      // On a miss, what the fake Herdr holds says why (the pane forgotten, the agent released, or listed as ours).
      const held = [...fake.core.model.panes.values()].map((p) => ({ id: p.id, agent: p.agent?.name ?? null }));
      assert.equal(external.length, 1, JSON.stringify({ external, pane: handle.paneId, held }));
      assert.equal(external[0]!.name, "someone-else");
      assert.equal(external[0]!.paneId, handle.paneId);
      assert.ok(["idle", "running", "blocked"].includes(external[0]!.status));
    } finally {
      await rt.close(handle);
    }
  });
}
