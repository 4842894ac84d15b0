// The Herdr runtime against the fake Herdr, once speaking protocol 20 (Herdr 0.8.2) and once 22 (Herdr 0.9): every
// message both sides exchange validates against Herdr's own schema of that protocol, 0.9's extra optional fields
// are ignored, and each misbehaviour of the server maps to the right error code.
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
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

/** A stand-in `pi`: prints its args, cwd and env, answers one line, then exits. */
const FAKE_PI = `#!/bin/sh
echo "child up: args=[$*] cwd=$(pwd) FOO=$FOO"
read line
echo "child got: $line"
sleep 0.3
exit 3
`;

function spec(name: string, extra: Partial<LaunchSpec> = {}): LaunchSpec {
  return {
    taskId: "tabc",
    name,
    argv: [piPath, "do the thing"],
    env: { FOO: "bar baz" },
    cwd: dir,
    taskDir: dir,
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
      assert.equal(await rt.exitStatus(h), null);
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
        "agent.start",
        "agent.get",
        "pane.read",
        "pane.send_input",
        "pane.close",
        "events.subscribe",
      ]) {
        assert.ok(methods.has(m), `the adapter sent ${m}`);
      }
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
      assert.equal(
        results.some((r) => r.includes('"agent_instance_id"')),
        protocol === 22,
      );
    });

    test("find: the live agent a launch left behind, by name in its workdir; nothing for another name, cwd or a closed pane", async () => {
      const rt = createHerdrRuntime({ socketPath: fake.socketPath });
      const h = await rt.launch(spec("worker-f1"));
      const other = await rt.launch(spec("worker-f2"));
      try {
        const found = await rt.find!({ taskId: "tabc", taskDir: dir, name: "worker-f1", cwd: dir });
        assert.deepEqual(found, h, "the same handle launch() returned");
        assert.deepEqual(await rt.find!({ taskId: "tabc", taskDir: dir, name: "worker-f2" }), other);
        assert.equal(await rt.find!({ taskId: "tabc", taskDir: dir, name: "worker-none" }), undefined);
        assert.equal(
          await rt.find!({ taskId: "tabc", taskDir: dir, name: "worker-f1", cwd: join(dir, "elsewhere") }),
          undefined,
          "same name, another workdir",
        );
        await rt.close(h);
        assert.equal(
          await rt.find!({ taskId: "tabc", taskDir: dir, name: "worker-f1", cwd: dir }),
          undefined,
          "closed",
        );
        assert.ok(fake.log.some((e) => (e.message as { method?: string }).method === "agent.list"));
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

    test("agent_pane_busy is retried until the shell is ready; too many gives up and closes the pane", async () => {
      const rt = createHerdrRuntime({ socketPath: fake.socketPath, busyBackoffMs: 20, busyRetries: 5 });
      const starts = (): number =>
        fake.log.filter((e) => (e.message as { method?: string }).method === "agent.start").length;
      const before = starts();
      fake.misbehave({ busy: 3 });
      const h = await rt.launch(spec("worker-c1"));
      assert.equal(starts() - before, 4, "three busy answers, then a start");
      assert.equal(await rt.isAlive(h), true);
      await rt.close(h);
      fake.misbehave({ busy: 100 });
      const panesBefore = fake.core.model.panes.size;
      await rejectsWith(rt.launch(spec("worker-c2")), "HERDR_REJECTED", "agent_pane_busy");
      assert.equal(fake.core.model.panes.size, panesBefore, "the half-made pane was closed");
      fake.misbehave({ busy: 0 });
      assertLogValid();
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
      await fake.setAgentStatus(h.paneId as string, "blocked");
      assert.equal(await rt.agentState?.(h), "blocked");
      await until(
        "blocked event",
        async () => (events.some((e) => e.type === "state" && e.state === "blocked") ? true : undefined),
        10_000,
      );
      await rt.sendKeys(h, ["C-c"]);
      stop?.();
      await rt.close(h);
      assertLogValid();
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
