// The Herdr runtime's CLI transport (for --machine) against the fake Herdr's `herdr` CLI shim: same results
// and the same error codes as the socket transport.
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { startFakeHerdr, type FakeHerdr } from "../../fixtures/fake-herdr/server.js";
import { DshError } from "../../src/core/errors.js";
import { createHerdrRuntime, herdrPing } from "../../src/runtime/herdr/index.js";
import type { RuntimeEvent } from "../../src/runtime/types.js";
import { until } from "../helpers/wait.js";

const root = join(import.meta.dirname, "..", "..", "..");
let dir: string;
let fake: FakeHerdr;
let herdrBin: string;
let piPath: string;
let env: NodeJS.ProcessEnv;

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
  fake = await startFakeHerdr({ quietMs: 300 });
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
  await until("the banner", async () => (await rt.readOutput(h)).includes("remote child: remote task"), 15_000, 150);
  await rt.sendText(h, "hello there");
  await until("the reply", async () => (await rt.readOutput(h)).includes("remote got: hello there"), 15_000, 150);
  await until("exit", async () => (await rt.agentState?.(h)) === "missing", 15_000, 150);
  await until("the exited event (polled)", async () => events.some((e) => e.type === "exited"), 15_000, 150);
  await rt.close(h);
  await rt.close(h);
  await until("gone (polled)", async () => events.some((e) => e.type === "gone"), 15_000, 150);
  stop?.();
  const methods = fake.log.filter((e) => e.kind === "request").map((e) => (e.message as { id: string }).id);
  assert.ok(
    methods.every((id) => id.startsWith("cli:")),
    "every request came through the CLI",
  );
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
    fake.misbehave({ protocol: 20 });
  }
  const rt = createHerdrRuntime({ machine: "buildbox", herdrBin, env });
  await assert.rejects(
    rt.readOutput({ runtime: "herdr", paneId: "w9:p9" }),
    (e) => e instanceof DshError && e.code === "PANE_GONE",
  );
});
