// The daemon on the Herdr runtime against the fake Herdr, once speaking protocol 20 (Herdr 0.8.2) and once 22
// (Herdr 0.9); every message validates against that protocol's schema.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { HERDR_PROTOCOLS, type HerdrProtocol, herdrSchemaErrors, schemaFor } from "../helpers/herdr-schema.js";
import { piBin } from "../helpers/pi.js";
import { dirname } from "node:path";
import { HerdrClient, createTransport } from "../../src/runtime/herdr/index.js";
import { herdrCodeOf } from "../../src/runtime/herdr/errors.js";
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

  for (const detection of ["launch_pending", "busy_reads_idle"] as const) {
    test(`herdr: Herdr's pi detection broken (${detection}) → the task still completes, true to the child's evidence`, async () => {
      fake.misbehave({ detection });
      try {
        const { taskId } = await h.spawn({
          prompt: "MARK-WORKER add a feature file",
          isolated: true,
          runtime: "herdr",
        });
        const r = await h.wait(taskId);
        assert.equal(r.status, "completed", JSON.stringify(r));
        assert.equal(r.summary, "Added feature.txt");
        assert.equal(r.finalMessage, "Added feature.txt\n\nOne new file.");
        // Herdr's raw word, whatever its broken detection made of the child: never taken for the child's state.
        assert.ok(["idle", "done", "working", "unknown"].includes(r.herdrStatus), r.herdrStatus);
        if (detection === "busy_reads_idle") assert.notEqual(r.herdrStatus, "working");
      } finally {
        fake.misbehave({ detection: "screen" });
      }
    });
  }

  test("herdr: task.list --external shows an agent the daemon did not spawn, observationally, and not ours", async () => {
    // Someone else's pi, started the way Herdr users do (agent.start types `pi` into the pane's shell).
    const client = new HerdrClient(createTransport({ socketPath: fake.socketPath }));
    const made = await client.call("workspace.create", {
      cwd: h.repo,
      label: "someone",
      focus: false,
      env: { ...h.childEnv, PATH: `${dirname(piBin)}:${process.env.PATH}` },
    });
    const paneId = (made.root_pane as { pane_id: string }).pane_id;
    // While the new pane's shell is still starting Herdr answers agent_pane_busy; its own CLI retries, as here.
    for (let attempt = 0; ; attempt++) {
      try {
        await client.call(
          "agent.start",
          { name: "someone-else", kind: "pi", pane_id: paneId, args: ["--model", h.modelName], timeout_ms: 60_000 },
          { timeoutMs: 65_000 },
        );
        break;
      } catch (e) {
        if (herdrCodeOf(e) !== "agent_pane_busy" || attempt >= 100) throw e;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    try {
      let listing = await h.cli.request("task.list", { external: true });
      for (let i = 0; i < 200 && (listing.external ?? []).length === 0; i++) {
        await new Promise((r) => setTimeout(r, 100));
        listing = await h.cli.request("task.list", { external: true });
      }
      const { tasks, external = [] } = listing;
      assert.ok(tasks.length > 0);
      // On a miss, what the fake Herdr holds says why (the pane forgotten, the agent released, or listed as ours).
      const held = [...fake.core.model.panes.values()].map((p) => ({ id: p.id, agent: p.agent?.name ?? null }));
      assert.equal(external.length, 1, JSON.stringify({ external, pane: paneId, held }));
      assert.equal(external[0]!.name, "someone-else");
      assert.equal(external[0]!.paneId, paneId);
      assert.ok(["idle", "running", "blocked"].includes(external[0]!.status));
    } finally {
      await client.call("pane.close", { pane_id: paneId });
    }
  });
}
