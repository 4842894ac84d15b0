// Real pi 0.73.1 (interactive TUI) as a Herdr agent in the fake Herdr, against the scripted model: it answers,
// takes a follow-up, quits, and its pane closes; once with the fake speaking protocol 20 (Herdr 0.8.2), once 22
// (Herdr 0.9). Every message on the Herdr socket validates against that protocol's schema.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startFakeHerdr, type FakeHerdr } from "../../fixtures/fake-herdr/server.js";
import { createHerdrRuntime } from "../../src/runtime/herdr/index.js";
import type { RuntimeEvent } from "../../src/runtime/types.js";
import { HERDR_PROTOCOLS, type HerdrProtocol, herdrSchemaErrors, schemaFor } from "../helpers/herdr-schema.js";
import { startPiHarness, type PiHarness } from "../helpers/pi.js";
import { until } from "../helpers/wait.js";

let fake: FakeHerdr;
let pi: PiHarness;

for (const p of HERDR_PROTOCOLS) describe(`protocol ${p}`, () => suite(p));

function suite(protocol: HerdrProtocol): void {
  before(async () => {
    pi = await startPiHarness({
      prefix: "herdr-pi-",
      script: {
        conversations: [
          {
            name: "herdr",
            steps: [{ text: "FIRST-ANSWER from the scripted model" }, { text: "SECOND-ANSWER after the follow-up" }],
          },
        ],
      },
    });
    fake = await startFakeHerdr({ quietMs: 1_000, protocol });
  });

  after(async () => {
    await fake.close();
    await pi.cleanup();
  });

  test("real pi in a Herdr pane: working → done, reads, follow-up, /quit → exited, close → gone", async () => {
    const rt = createHerdrRuntime({ socketPath: fake.socketPath });
    const h = await rt.launch({
      taskId: "tpi000000001",
      name: "worker-pi-a1",
      argv: [pi.piBin, "--model", pi.modelName, "Say the first answer"],
      env: pi.env,
      cwd: pi.work,
      taskDir: pi.dir,
      repoName: "pi-demo",
    });
    const events: RuntimeEvent[] = [];
    const stop = rt.watch?.(h, (e) => events.push(e));
    assert.equal(await rt.isAlive(h), true);
    await until(
      "the first answer on screen",
      async () => ((await rt.readOutput(h, { lines: 200 })).includes("FIRST-ANSWER") ? true : undefined),
      30_000,
      200,
    );
    await until(
      "Herdr's state to settle",
      async () => ((await rt.agentState?.(h)) === "done" ? true : undefined),
      30_000,
      200,
    );
    assert.equal(pi.model.requests().length, 1);

    await rt.sendText(h, "Now the second answer");
    await until(
      "the second answer",
      async () => ((await rt.readOutput(h, { lines: 200 })).includes("SECOND-ANSWER") ? true : undefined),
      30_000,
      200,
    );
    assert.equal(pi.model.requests().length, 2);
    await until("settled again", async () => ((await rt.agentState?.(h)) === "done" ? true : undefined), 30_000, 200);

    await rt.sendText(h, "/quit");
    await until("pi to exit", async () => ((await rt.agentState?.(h)) === "missing" ? true : undefined), 30_000, 200);
    assert.equal(await rt.isAlive(h), false);
    await until(
      "the exited event",
      async () => (events.some((e) => e.type === "exited") ? true : undefined),
      30_000,
      200,
    );
    const states = events.filter((e) => e.type === "state").map((e) => (e as { state: string }).state);
    assert.ok(states.includes("working") && states.includes("done"), `states seen: ${states.join(",")}`);

    await rt.close(h);
    await until("the gone event", async () => (events.some((e) => e.type === "gone") ? true : undefined), 30_000, 200);
    stop?.();
    for (const { kind, message } of fake.log) {
      assert.equal(
        herdrSchemaErrors(schemaFor(kind, message as Record<string, unknown>), message, protocol),
        "",
        JSON.stringify(message),
      );
    }
  });
}
