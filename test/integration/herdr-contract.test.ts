// The Herdr runtime against the fake Herdr, once speaking protocol 20 (Herdr 0.8.2) and once 22 (Herdr 0.9): every
// message both sides exchange validates against Herdr's own schema of that protocol, 0.9's extra optional fields
// are ignored, and each misbehaviour of the server maps to the right error code.
import assert from "node:assert/strict";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { startFakeHerdr, type FakeHerdr } from "../../fixtures/fake-herdr/server.js";
import { DshError } from "../../src/core/errors.js";
import { createHerdrRuntime, herdrPing } from "../../src/runtime/herdr/index.js";
import type { LaunchSpec, RuntimeEvent, RuntimeHandle } from "../../src/runtime/types.js";
import { HERDR_PROTOCOLS, type HerdrProtocol, herdrSchemaErrors, schemaFor } from "../helpers/herdr-schema.js";
import { until } from "../helpers/wait.js";

let dir: string;
let fake: FakeHerdr;
let piPath: string;
let protocol: HerdrProtocol;

/** A shell start-up file for the fake's panes (dash sources $ENV). */
function rcFile(text: string): string {
  const path = join(dir, `rc-${Math.random().toString(36).slice(2)}`);
  writeFileSync(path, text);
  return path;
}

/** A stand-in `pi`: prints its args, cwd and env, answers one line, then exits. */
const FAKE_PI = `#!/bin/sh
echo "child up: args=[$*] cwd=$(pwd) FOO=$FOO"
read line
echo "child got: $line"
sleep 0.3
exit 3
`;

function spec(name: string, extra: Partial<LaunchSpec> = {}): LaunchSpec {
  // Each task has its own directory (the starter's pid and exit files live there).
  const taskDir = join(dir, "tasks", name);
  mkdirSync(taskDir, { recursive: true });
  return {
    taskId: "tabc",
    name,
    argv: [piPath, "do the thing"],
    env: { FOO: "bar baz" },
    cwd: dir,
    taskDir,
    repoName: "demo",
    ...extra,
  };
}

async function rejectsWith(p: Promise<unknown>, code: string, herdrCode?: string): Promise<DshError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof DshError, `expected a DshError, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    if (herdrCode) assert.equal(e.details?.herdrCode, herdrCode);
    return e;
  }
  assert.fail(`expected ${code}`);
}

function assertLogValid(): number {
  assert.deepEqual(fake.rejected, [], "Herdr refused none of the adapter's requests as a whole");
  for (const { kind, message } of fake.log) {
    const errors = herdrSchemaErrors(schemaFor(kind, message as Record<string, unknown>), message, protocol);
    assert.equal(errors, "", `${kind} ${JSON.stringify(message)} is not valid per Herdr's protocol-${protocol} schema`);
  }
  return fake.log.length;
}

for (const p of HERDR_PROTOCOLS) describe(`protocol ${p}`, () => suite(p));

function suite(speaks: HerdrProtocol): void {
  before(async () => {
    protocol = speaks;
    dir = mkdtempSync(join(tmpdir(), "herdr-contract-"));
    piPath = join(dir, "bin", "pi");
    await import("node:fs").then((fs) => fs.mkdirSync(join(dir, "bin")));
    writeFileSync(piPath, FAKE_PI);
    chmodSync(piPath, 0o755);
    fake = await startFakeHerdr({ quietMs: 400, protocol: speaks });
    assert.equal(fake.protocol, speaks);
  });

  after(async () => {
    await fake.close();
    rmSync(dir, { recursive: true, force: true });
  });

  describe("herdr runtime against the fake Herdr", () => {
    test("launch → watch → read → follow-up → exit → close, all messages valid per Herdr's schema", async () => {
      const rt = createHerdrRuntime({ socketPath: fake.socketPath });
      const h = await rt.launch(spec("worker-a1"));
      assert.equal(h.runtime, "herdr");
      assert.equal(h.agentName, "worker-a1");
      const events: RuntimeEvent[] = [];
      const stop = rt.watch?.(h, (e) => events.push(e));
      assert.ok(stop);
      const ws = [...fake.core.model.workspaces.values()].find((w) => w.id === h.workspaceId);
      assert.equal(ws?.label, "DSH · demo");
      assert.equal(fake.core.model.tabs.get(h.tabId as string)?.label, "herdr: worker-a1");
      assert.equal(await rt.isAlive(h), true);
      const first = await until(
        "the child's banner",
        async () => {
          const out = await rt.readOutput(h);
          return out.includes("child up") ? out : undefined;
        },
        10_000,
      );
      assert.match(first, new RegExp(`args=\\[do the thing\\] cwd=${dir} FOO=bar baz`));
      await rt.sendText(h, "follow-up please");
      await until(
        "the child's reply",
        async () => ((await rt.readOutput(h)).includes("child got: follow-up please") ? true : undefined),
        10_000,
      );
      await until("exit", async () => ((await rt.agentState?.(h)) === "missing" ? true : undefined), 10_000);
      assert.equal(await rt.isAlive(h), false);
      assert.deepEqual(await rt.exitStatus(h), { code: 3 }, "the starter recorded the child's exit code");
      await until("the exited event", async () => (events.some((e) => e.type === "exited") ? true : undefined), 10_000);
      // Working is seen before the exit (first, unless a stall let the fake's 400 ms quiet rule report done before the
      // subscription: then the follow-up's output makes it working again).
      const working = events.findIndex((e) => e.type === "state" && e.state === "working");
      assert.ok(working >= 0 && working < events.findIndex((e) => e.type === "exited"), JSON.stringify(events));
      await rt.close(h);
      await rt.close(h); // idempotent
      await until("the gone event", async () => (events.some((e) => e.type === "gone") ? true : undefined), 10_000);
      stop?.();
      const methods = new Set(
        fake.log.filter((e) => e.kind === "request").map((e) => (e.message as { method: string }).method),
      );
      for (const m of [
        "ping",
        "workspace.list",
        "workspace.create",
        "tab.create",
        "pane.rename",
        "pane.get",
        "pane.read",
        "pane.send_input",
        "pane.close",
        "events.subscribe",
      ]) {
        assert.ok(methods.has(m), `the adapter sent ${m}`);
      }
      assert.ok(!methods.has("agent.start"), "the child is started by our own start line, not Herdr's agent.start");
      assert.ok(
        fake.log.some((e) => e.kind === "event"),
        "events were pushed",
      );
      assert.ok(assertLogValid() > 20);
      // The mode is real: the pong and the pane/agent shapes are the protocol's own (0.9's extra fields were sent
      // and ignored above).
      const results = fake.log.filter((e) => e.kind === "response").map((e) => JSON.stringify(e.message));
      const pong = results.find((r) => r.includes('"type":"pong"')) ?? "";
      assert.match(pong, new RegExp(`"protocol":${protocol}`));
      assert.equal(pong.includes('"endpoint_protocol_generation":1'), protocol === 22, pong);
      assert.equal(
        results.some((r) => r.includes('"program_status"')),
        protocol === 22,
      );
      // (agent_instance_id rides on AgentInfo, which the adapter no longer asks for on a local Herdr.)
    });

    test("find: the live agent a launch left behind, by name in its workdir; nothing for another name, cwd or a closed pane", async () => {
      const rt = createHerdrRuntime({ socketPath: fake.socketPath });
      const h = await rt.launch(spec("worker-f1"));
      const other = await rt.launch(spec("worker-f2"));
      try {
        const taskDir = (name: string): string => join(dir, "tasks", name);
        const found = await rt.find!({ taskId: "tabc", taskDir: taskDir("worker-f1"), name: "worker-f1", cwd: dir });
        assert.deepEqual(found, h, "the same handle launch() returned");
        assert.deepEqual(await rt.find!({ taskId: "tabc", taskDir: taskDir("worker-f2"), name: "worker-f2" }), other);
        assert.equal(
          await rt.find!({ taskId: "tabc", taskDir: taskDir("worker-none"), name: "worker-none" }),
          undefined,
        );
        assert.equal(
          await rt.find!({
            taskId: "tabc",
            taskDir: taskDir("worker-f1"),
            name: "worker-f1",
            cwd: join(dir, "elsewhere"),
          }),
          undefined,
          "same name, another workdir",
        );
        await rt.close(h);
        assert.equal(
          await rt.find!({ taskId: "tabc", taskDir: taskDir("worker-f1"), name: "worker-f1", cwd: dir }),
          undefined,
          "closed",
        );
        assert.ok(fake.log.some((e) => (e.message as { method?: string }).method === "pane.list"));
        assertLogValid();
      } finally {
        await rt.close(h);
        await rt.close(other);
      }
    });

    test("a second task reuses the DSH workspace; ownerPaneId splits the owner's pane", async () => {
      const rt = createHerdrRuntime({ socketPath: fake.socketPath });
      const a = await rt.launch(spec("worker-b1"));
      const b = await rt.launch(spec("worker-b2"));
      assert.equal(a.workspaceId, b.workspaceId);
      assert.notEqual(a.tabId, b.tabId);
      const c = await rt.launch(spec("worker-b3", { ownerPaneId: a.paneId as string }));
      assert.equal(c.tabId, a.tabId, "the split lands in the owner's tab");
      assert.ok(fake.log.some((e) => (e.message as { method?: string }).method === "pane.split"));
      const split = fake.log.find((e) => (e.message as { method?: string }).method === "pane.split")?.message as {
        params: Record<string, unknown>;
      };
      assert.equal(split.params.target_pane_id, a.paneId);
      for (const h of [a, b, c]) await rt.close(h);
      assertLogValid();
    });

    test("a shell that never runs the start line: LAUNCH_FAILED naming what Herdr reads, the pane closed", async () => {
      const hung = await startFakeHerdr({ protocol: speaks, shellRc: rcFile("sleep 600\n") });
      try {
        const rt = createHerdrRuntime({ socketPath: hung.socketPath, startTimeoutMs: 1_500 });
        const err = await rejectsWith(rt.launch(spec("worker-c1")), "LAUNCH_FAILED");
        assert.match(err.message, /did not run the start line within 1500 ms \(Herdr reads the pane as unknown/);
        assert.match(err.message, /Fix:/);
        const left = [...hung.core.model.panes.values()].filter((p) => p.label === "worker-c1");
        assert.equal(left.length, 0, "the half-made pane was closed");
      } finally {
        await hung.close();
      }
    });

    test("a pane lost under the adapter reads as missing / gone / PANE_GONE, and close still succeeds", async () => {
      const rt = createHerdrRuntime({ socketPath: fake.socketPath });
      const h = await rt.launch(spec("worker-d1"));
      const events: RuntimeEvent[] = [];
      const stop = rt.watch?.(h, (e) => events.push(e));
      await until("working", async () => (events.length > 0 ? true : undefined), 10_000);
      await fake.losePane(h.paneId as string);
      await until("gone", async () => (events.some((e) => e.type === "gone") ? true : undefined), 10_000);
      assert.equal(await rt.agentState?.(h), "missing");
      assert.equal(await rt.isAlive(h), false);
      await rejectsWith(rt.readOutput(h), "PANE_GONE", "pane_not_found");
      await rt.close(h);
      stop?.();
      assertLogValid();
    });

    test("Herdr's detected state (blocked) comes through agentState and watch", async () => {
      const rt = createHerdrRuntime({ socketPath: fake.socketPath });
      const h = await rt.launch(spec("worker-e1"));
      const events: RuntimeEvent[] = [];
      const stop = rt.watch?.(h, (e) => events.push(e));
      await until(
        "Herdr detects the agent",
        async () => (fake.core.model.panes.get(h.paneId!)?.agent ? true : undefined),
        10_000,
      );
      await fake.setAgentStatus(h.paneId as string, "blocked");
      assert.equal(await rt.agentState?.(h), "blocked");
      await until(
        "blocked event",
        async () => (events.some((e) => e.type === "state" && e.state === "blocked") ? true : undefined),
        10_000,
      );
      await rt.sendKeys(h, ["C-c"]);
      await rejectsWith(rt.sendKeys(h, ["PageUp"]), "BAD_PARAMS");
      stop?.();
      await rt.close(h);
      assertLogValid();
    });

    test("the right pi runs whatever the shell's start-up file does to PATH; its exit code comes back", async () => {
      // The user's shell puts another `pi` first on PATH: a bare `pi` typed into the pane (what Herdr's agent.start
      // types) would run it.
      const decoyDir = join(dir, "decoy");
      mkdirSync(decoyDir, { recursive: true });
      const marker = join(dir, "decoy-ran");
      writeFileSync(join(decoyDir, "pi"), `#!/bin/sh\necho WRONG PI; touch ${marker}; sleep 600\n`);
      chmodSync(join(decoyDir, "pi"), 0o755);
      const shelled = await startFakeHerdr({
        protocol: speaks,
        quietMs: 400,
        shellRc: rcFile(`PATH=${decoyDir}:$PATH; export PATH\nFOO=clobbered\n`),
      });
      try {
        const rt = createHerdrRuntime({ socketPath: shelled.socketPath });
        const h = await rt.launch(spec("worker-r1"));
        const events: RuntimeEvent[] = [];
        const stop = rt.watch?.(h, (e) => events.push(e));
        const out = await until(
          "the child's banner",
          async () => {
            const text = await rt.readOutput(h);
            return text.includes("child up") ? text : undefined;
          },
          10_000,
        );
        assert.match(out, /args=\[do the thing\]/);
        assert.equal(existsSync(marker), false, "the decoy pi never ran");
        assert.doesNotMatch(out, /WRONG PI/);
        await rt.sendText(h, "bye");
        const exited = await until(
          "the exited event",
          async () => events.find((e) => e.type === "exited") as Extract<RuntimeEvent, { type: "exited" }> | undefined,
          10_000,
        );
        assert.deepEqual(exited.exit, { code: 3 }, "the child's own exit code");
        assert.deepEqual(await rt.exitStatus(h), { code: 3 });
        assert.equal(await rt.isAlive(h), false);
        stop?.();
        await rt.close(h);
        for (const { kind, message } of shelled.log)
          assert.equal(herdrSchemaErrors(schemaFor(kind, message as Record<string, unknown>), message, speaks), "");
        assert.deepEqual(shelled.rejected, []);
      } finally {
        await shelled.close();
      }
    });

    for (const mode of ["launch_pending", "busy_reads_idle"] as const) {
      test(`Herdr's pi detection broken (${mode}): the child starts, lives and ends by our own evidence; Herdr's word is reported raw`, async () => {
        const broken = await startFakeHerdr({ protocol: speaks, quietMs: 400, detection: mode });
        try {
          const rt = createHerdrRuntime({ socketPath: broken.socketPath });
          const h = await rt.launch(spec(`worker-m${mode.length}`));
          const events: RuntimeEvent[] = [];
          const stop = rt.watch?.(h, (e) => events.push(e));
          await until(
            "the child's banner",
            async () => ((await rt.readOutput(h)).includes("child up") ? true : undefined),
            10_000,
          );
          assert.equal(await rt.isAlive(h), true);
          // Herdr's own word, whatever it is, and never taken for the child's liveness.
          const word = await rt.agentState?.(h);
          assert.ok(word !== "missing", String(word));
          if (mode === "busy_reads_idle") {
            await until(
              "Herdr sees the agent",
              async () => (broken.core.model.panes.get(h.paneId!)?.agent ? true : undefined),
              10_000,
            );
            assert.equal(await rt.agentState?.(h), "idle", "a busy pi reads idle in this Herdr");
          }
          await rt.sendText(h, "bye");
          await until("exited", async () => (events.some((e) => e.type === "exited") ? true : undefined), 10_000);
          assert.deepEqual(await rt.exitStatus(h), { code: 3 });
          stop?.();
          await rt.close(h);
          assert.deepEqual(broken.rejected, []);
        } finally {
          await broken.close();
        }
      });
    }

    test("a subscription gone mute: the periodic read still sees the exit, and the subscription is made anew", async () => {
      const rt = createHerdrRuntime({ socketPath: fake.socketPath, watchCheckMs: 300 });
      const h = await rt.launch(spec("worker-q1"));
      const events: RuntimeEvent[] = [];
      const stop = rt.watch?.(h, (e) => events.push(e));
      const subscribes = (): number =>
        fake.log.filter((e) => (e.message as { method?: string }).method === "events.subscribe").length;
      try {
        await until("subscribed", async () => (fake.core.subscribers.size > 0 ? true : undefined), 10_000);
        await until(
          "the child's banner",
          async () => ((await rt.readOutput(h)).includes("child up") ? true : undefined),
          10_000,
        );
        const before = subscribes();
        fake.misbehave({ muteSubscriptions: true });
        await rt.sendText(h, "bye");
        await until(
          "the exited event",
          async () => (events.some((e) => e.type === "exited") ? true : undefined),
          10_000,
        );
        await until("a new subscription", async () => (subscribes() > before ? true : undefined), 10_000);
      } finally {
        stop?.();
        await rt.close(h);
      }
      assertLogValid();
    });

    test("control characters in an argument are refused by name before Herdr sees them", async () => {
      const rt = createHerdrRuntime({ socketPath: fake.socketPath });
      const count = fake.log.length;
      const tab = await rejectsWith(rt.launch(spec("worker-t1", { argv: [piPath, "--model", "a\tb"] })), "BAD_PARAMS");
      assert.match(tab.message, /argument 2 .* a tab \(U\+0009\)/);
      const esc = await rejectsWith(rt.launch(spec("worker-t2", { argv: [piPath, "\x1b[31mred"] })), "BAD_PARAMS");
      assert.match(esc.message, /an escape \(ESC\) \(U\+001B\)/);
      const c1 = await rejectsWith(rt.launch(spec("worker-t3", { argv: [piPath, "x\u0085y"] })), "BAD_PARAMS");
      assert.match(c1.message, /U\+0085/);
      assert.equal(fake.log.length, count, "no request reached Herdr");
    });

    test('a request Herdr refuses as a whole (id "", invalid_request) → HERDR_PROTOCOL in Herdr\'s words', async () => {
      const rt = createHerdrRuntime({ socketPath: fake.socketPath });
      await rt.readOutput({ runtime: "herdr", paneId: "w1:p1" }).catch(() => undefined); // pinged
      fake.misbehave({ malformed: "invalid_request" });
      const err = await rejectsWith(
        rt.readOutput({ runtime: "herdr", paneId: "w1:p1" }),
        "HERDR_PROTOCOL",
        "invalid_request",
      );
      assert.match(err.message, /unknown variant `fake`/);
      assert.match(err.message, /Fix:/);
      const answer = fake.log.at(-1)?.message as { id?: unknown; error?: { code?: unknown } };
      assert.deepEqual([answer.id, answer.error?.code], ["", "invalid_request"]);
    });

    test("bad launch input is refused before anything is created", async () => {
      const rt = createHerdrRuntime({ socketPath: fake.socketPath });
      const count = fake.log.length;
      await rejectsWith(rt.launch(spec("Bad Name")), "BAD_PARAMS");
      await rejectsWith(rt.launch(spec("worker-f1", { argv: ["/bin/echo", "hi"] })), "LAUNCH_FAILED");
      await rejectsWith(rt.launch(spec("worker-f2", { argv: [piPath, "two\nlines"] })), "BAD_PARAMS");
      assert.equal(fake.log.length, count, "no request reached Herdr");
      await rejectsWith(rt.readOutput({ runtime: "tmux" } as RuntimeHandle), "BAD_PARAMS");
    });
  });

  describe("herdr server misbehaviour", () => {
    test("no server at the socket → HERDR_UNAVAILABLE, and herdrPing says why", async () => {
      const socketPath = join(dir, "nobody.sock");
      const rt = createHerdrRuntime({ socketPath });
      await rejectsWith(rt.launch(spec("worker-g1")), "HERDR_UNAVAILABLE");
      const ping = await herdrPing({ socketPath });
      assert.equal(ping.ok, false);
      assert.equal(ping.code, "HERDR_UNAVAILABLE");
      assert.match(ping.reason ?? "", /nobody\.sock/);
    });

    test("a dropped connection → HERDR_UNAVAILABLE; the next call works again", async () => {
      const rt = createHerdrRuntime({ socketPath: fake.socketPath });
      fake.misbehave({ drop: 1 });
      await rejectsWith(rt.isAlive({ runtime: "herdr", paneId: "w1:p1" }), "HERDR_UNAVAILABLE");
      assert.equal((await herdrPing({ socketPath: fake.socketPath })).ok, true);
    });

    test("protocol 19 → HERDR_TOO_OLD", async () => {
      fake.misbehave({ protocol: 19 });
      try {
        const ping = await herdrPing({ socketPath: fake.socketPath });
        assert.deepEqual([ping.ok, ping.code, ping.protocol], [false, "HERDR_TOO_OLD", 19]);
        await rejectsWith(
          createHerdrRuntime({ socketPath: fake.socketPath }).launch(spec("worker-h1")),
          "HERDR_TOO_OLD",
        );
      } finally {
        fake.misbehave({ protocol });
      }
    });

    for (const malformed of ["non_json", "wrong_id", "no_result"] as const) {
      test(`a malformed envelope (${malformed}) → HERDR_PROTOCOL`, async () => {
        const rt = createHerdrRuntime({ socketPath: fake.socketPath });
        assert.equal((await herdrPing({ socketPath: fake.socketPath })).ok, true);
        fake.misbehave({ malformed });
        const err = await rejectsWith(
          herdrPing({ socketPath: fake.socketPath }).then((p) => {
            if (!p.ok) throw new DshError(p.code as "HERDR_PROTOCOL", p.reason ?? "");
          }),
          "HERDR_PROTOCOL",
        );
        assert.match(err.message, /Fix:/);
        fake.misbehave({ malformed });
        await rejectsWith(rt.readOutput({ runtime: "herdr", paneId: "w1:p1" }), "HERDR_PROTOCOL");
      });
    }

    test("a slow answer → TIMEOUT after the per-request timeout", async () => {
      fake.misbehave({ slowMs: 1_500 });
      try {
        const rt = createHerdrRuntime({ socketPath: fake.socketPath, timeoutMs: 300 });
        const err = await rejectsWith(rt.isAlive({ runtime: "herdr", paneId: "w1:p1" }), "TIMEOUT");
        assert.match(err.message, /300 ms/);
      } finally {
        fake.misbehave({ slowMs: 0 });
      }
    });
  });
}
