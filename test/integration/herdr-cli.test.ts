// The Herdr runtime's CLI transport (for --machine) against the fake Herdr's `herdr` CLI shim: same results
// and the same error codes as the socket transport, against a protocol-20 (0.8.2) and a protocol-22 (0.9) fake,
// every message valid per that protocol's schema; a CLI of another protocol than its server is named
// (HERDR_PROTOCOL_MISMATCH), by the transport and by doctor.
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { startFakeHerdr, type FakeHerdr } from "../../fixtures/fake-herdr/server.js";
import { checkHerdr } from "../../src/cli/doctor/herdr.js";
import { DshError } from "../../src/core/errors.js";
import { CliTransport } from "../../src/runtime/herdr/cli-transport.js";
import { createHerdrRuntime, herdrPing } from "../../src/runtime/herdr/index.js";
import type { RuntimeEvent } from "../../src/runtime/types.js";
import { HERDR_PROTOCOLS, herdrSchemaErrors, schemaFor } from "../helpers/herdr-schema.js";
import { until } from "../helpers/wait.js";

const root = join(import.meta.dirname, "..", "..", "..");
let dir: string;
let fake: FakeHerdr;
let herdrBin: string;
let piPath: string;
let env: NodeJS.ProcessEnv;

for (const protocol of HERDR_PROTOCOLS) describe(`herdr CLI transport, protocol ${protocol}`, () => suite(protocol));

function suite(protocol: 20 | 22): void {
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "herdr-cli-"));
    mkdirSync(join(dir, "bin"));
    herdrBin = join(dir, "bin", "herdr");
    writeFileSync(
      herdrBin,
      `#!/bin/sh\nexec "${process.execPath}" "${join(root, "dist", "fixtures", "fake-herdr", "cli.js")}" "$@"\n`,
    );
    chmodSync(herdrBin, 0o755);
    piPath = join(dir, "bin", "pi");
    writeFileSync(piPath, `#!/bin/sh\necho "remote child: $*"\nread line\necho "remote got: $line"\n`);
    chmodSync(piPath, 0o755);
    fake = await startFakeHerdr({ quietMs: 300, protocol });
    env = { ...process.env, FAKE_HERDR_MACHINES: JSON.stringify({ buildbox: fake.socketPath }) };
  });

  after(async () => {
    await fake.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("--machine: launch, read, follow-up, exit and close through the herdr CLI", async () => {
    const rt = createHerdrRuntime({ machine: "buildbox", herdrBin, env });
    const h = await rt.launch({
      taskId: "tcli00000001",
      name: "worker-m1",
      argv: [piPath, "remote task"],
      env: {},
      cwd: dir,
      taskDir: dir,
      repoName: "api",
      machine: "buildbox",
    });
    assert.equal(h.machine, "buildbox");
    assert.equal(fake.core.model.workspaces.get(h.workspaceId as string)?.label, "DSH · api");
    const events: RuntimeEvent[] = [];
    const stop = rt.watch?.(h, (e) => events.push(e));
    try {
      await until(
        "the banner",
        async () => (await rt.readOutput(h)).includes("remote child: remote task"),
        15_000,
        150,
      );
      await rt.sendText(h, "hello there");
      await until(
        "the reply",
        async () => (await rt.readOutput(h)).includes("remote got: hello there"),
        30_000,
        150,
      ).catch(async (e: Error) =>
        assert.fail(`${e.message}; the pane shows: ${JSON.stringify(await rt.readOutput(h))}`),
      );
      await until("exit", async () => (await rt.agentState?.(h)) === "missing", 15_000, 150);
      await until("the exited event (polled)", async () => events.some((e) => e.type === "exited"), 15_000, 150);
      await rt.close(h);
      await rt.close(h);
      await until("gone (polled)", async () => events.some((e) => e.type === "gone"), 15_000, 150);
    } finally {
      // A failed wait must not leave the watch's poll running: it kept the test process alive for good.
      stop?.();
      await rt.close(h).catch(() => undefined);
    }
    const methods = fake.log.filter((e) => e.kind === "request").map((e) => (e.message as { id: string }).id);
    assert.ok(
      methods.every((id) => id.startsWith("cli:")),
      "every request came through the CLI",
    );
    for (const { kind, message } of fake.log) {
      const errors = herdrSchemaErrors(schemaFor(kind, message as Record<string, unknown>), message, protocol);
      assert.equal(
        errors,
        "",
        `${kind} ${JSON.stringify(message)} is not valid per Herdr's protocol-${protocol} schema`,
      );
    }
  });

  test("--machine errors: unknown machine, missing binary, protocol 19, refused start", async () => {
    const unknown = await herdrPing({ machine: "nowhere", herdrBin, env });
    assert.deepEqual([unknown.ok, unknown.code], [false, "HERDR_UNAVAILABLE"]);
    const missing = await herdrPing({ machine: "buildbox", herdrBin: join(dir, "no-such-herdr"), env });
    assert.deepEqual([missing.ok, missing.code], [false, "HERDR_UNAVAILABLE"]);
    assert.match(missing.reason ?? "", /HERDR_BIN/);
    fake.misbehave({ protocol: 19 });
    try {
      const old = await herdrPing({ machine: "buildbox", herdrBin, env });
      assert.deepEqual([old.ok, old.code, old.protocol], [false, "HERDR_TOO_OLD", 19]);
    } finally {
      fake.misbehave({ protocol });
    }
    const rt = createHerdrRuntime({ machine: "buildbox", herdrBin, env });
    await assert.rejects(
      rt.readOutput({ runtime: "herdr", paneId: "w9:p9" }),
      (e) => e instanceof DshError && e.code === "PANE_GONE",
    );
  });

  test("a herdr CLI of another protocol than its server: HERDR_PROTOCOL_MISMATCH naming both and the fix", async () => {
    const other = protocol === 22 ? 20 : 22;
    const mismatched = { ...env, FAKE_HERDR_CLI_PROTOCOL: String(other) };
    // ping reads `herdr status --json` and refuses `compatible: false` before relying on the CLI
    const pong = await herdrPing({ machine: "buildbox", herdrBin, env: mismatched });
    assert.deepEqual([pong.ok, pong.code, pong.protocol], [false, "HERDR_PROTOCOL_MISMATCH", protocol]);
    assert.match(
      pong.reason ?? "",
      new RegExp(`speaks protocol ${other} but its Herdr server speaks protocol ${protocol}`),
    );
    assert.match(pong.reason ?? "", /Fix: install the herdr CLI that matches the server/);
    // a command past ping: the CLI's own protocol_mismatch is named, not a generic HERDR_REJECTED
    const cli = new CliTransport({ bin: herdrBin, machine: "buildbox", env: mismatched });
    await assert.rejects(
      cli.request("agent.list", {}),
      (e) =>
        e instanceof DshError &&
        e.code === "HERDR_PROTOCOL_MISMATCH" &&
        e.details?.cliProtocol === other &&
        e.details?.serverProtocol === protocol &&
        /install the herdr CLI that matches the server/.test(e.message),
    );
    // the same CLI with its own protocol works
    const same = await herdrPing({
      machine: "buildbox",
      herdrBin,
      env: { ...env, FAKE_HERDR_CLI_PROTOCOL: String(protocol) },
    });
    assert.deepEqual([same.ok, same.protocol], [true, protocol]);
  });

  test("doctor warns when the herdr CLI and the server speak different protocols", async () => {
    const base = { ...env, HERDR_SOCKET_PATH: fake.socketPath, HERDR_BIN: herdrBin };
    const other = protocol === 22 ? 20 : 22;
    const warn = await checkHerdr({ ...base, FAKE_HERDR_CLI_PROTOCOL: String(other) });
    assert.equal(warn.level, "warn", warn.detail);
    assert.match(warn.detail, new RegExp(`protocol ${protocol} at .*herdr CLI .* speaks protocol ${other}`));
    assert.match(warn.detail, /HERDR_PROTOCOL_MISMATCH/);
    assert.match(warn.fix ?? "", /install the herdr CLI that matches the server/);
    const ok = await checkHerdr({ ...base, FAKE_HERDR_CLI_PROTOCOL: String(protocol) });
    assert.equal(ok.level, "ok", ok.detail);
    assert.match(ok.detail, new RegExp(`protocol ${protocol} at .*; herdr CLI protocol ${protocol}$`));
  });
}
