// The pi launcher: argv shape and validation, binary resolution, and real pi parsing the argv we build.
import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildPiCommand, findPi, resolvePiBin } from "../../src/pi/launch.js";
import { DshError } from "../../src/core/errors.js";
import { bundledPiBin, piBin, startPiHarness, testPiVersion } from "../helpers/pi.js";

const noPiOnPath = { PATH: "/nonexistent-dir" };

test("buildPiCommand: interactive argv loads exactly our extensions, names the session, ends with the prompt", () => {
  const { argv } = buildPiCommand({
    mode: "interactive",
    model: "scripted/scripted-model",
    thinking: "low",
    sessionPath: "/t/s/a.jsonl",
    extensionPaths: ["/ext/child.js", "/ext/other.ts"],
    initialPrompt: "Do the task",
    cwd: "/t/work",
    env: noPiOnPath,
  });
  assert.deepEqual(argv, [
    bundledPiBin,
    "--model",
    "scripted/scripted-model",
    "--thinking",
    "low",
    "--session",
    "/t/s/a.jsonl",
    "-ne",
    "-e",
    "/ext/child.js",
    "-e",
    "/ext/other.ts",
    "Do the task",
  ]);
  const rpc = buildPiCommand({
    mode: "rpc",
    sessionPath: "/t/s/b.jsonl",
    extensionPaths: [],
    cwd: "/t",
    extraArgs: ["-nc"],
    env: noPiOnPath,
  });
  assert.deepEqual(rpc.argv, [bundledPiBin, "-nc", "--mode", "rpc", "--session", "/t/s/b.jsonl", "-ne"]);
});

test("buildPiCommand rejects bad input with BAD_PARAMS and a message naming the fix", () => {
  const base = {
    mode: "interactive" as const,
    sessionPath: "/t/a.jsonl",
    extensionPaths: [],
    cwd: "/t",
    env: noPiOnPath,
  };
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ sessionPath: "abc123" }, /absolute path ending in \.jsonl/],
    [{ sessionPath: "rel/a.jsonl" }, /absolute path/],
    [{ extensionPaths: ["./ext.ts"] }, /extension path must be absolute/],
    [{ cwd: "work" }, /cwd must be an absolute path/],
    [{ thinking: "extreme" }, /thinking must be one of off, minimal/],
    [{ model: "--evil" }, /model must be a model pattern/],
    [{ mode: "rpc", initialPrompt: "hi" }, /send \{"type":"prompt"/],
    [{ mode: "print" }, /mode must be "interactive" or "rpc"/],
  ];
  for (const [patch, msg] of cases) {
    assert.throws(
      () => buildPiCommand({ ...base, ...patch } as never),
      (e: unknown) => {
        assert.ok(e instanceof DshError);
        assert.equal(e.code, "BAD_PARAMS");
        assert.match(e.message, msg);
        return true;
      },
    );
  }
});

test("pi resolution: DSH_HERDR_PI_BIN, then PATH, then the package's own pi; a bad override is PI_NOT_FOUND", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-pi-launch-"));
  try {
    const bin = join(dir, "bin");
    mkdirSync(bin);
    const fake = join(bin, "pi");
    writeFileSync(fake, "#!/bin/sh\necho 9.9.9-fake >&2\n");
    chmodSync(fake, 0o755);
    assert.equal(resolvePiBin({ DSH_HERDR_PI_BIN: fake, PATH: "/nonexistent-dir" }), fake);
    assert.equal(resolvePiBin({ PATH: `/nonexistent-dir:${bin}` }), fake);
    assert.equal(resolvePiBin(noPiOnPath), bundledPiBin);
    assert.deepEqual(await findPi({ DSH_HERDR_PI_BIN: fake, PATH: process.env.PATH }), {
      path: fake,
      version: "9.9.9-fake",
    });

    const notExec = join(dir, "plain");
    writeFileSync(notExec, "");
    for (const override of [notExec, join(dir, "missing"), "no-such-pi-binary"]) {
      assert.throws(
        () => resolvePiBin({ DSH_HERDR_PI_BIN: override, PATH: bin }),
        (e: unknown) => e instanceof DshError && e.code === "PI_NOT_FOUND" && /DSH_HERDR_PI_BIN/.test(e.message),
      );
    }
    const broken = join(bin, "broken-pi");
    writeFileSync(broken, "#!/bin/sh\necho boom >&2\nexit 3\n");
    chmodSync(broken, 0o755);
    await assert.rejects(
      findPi({ DSH_HERDR_PI_BIN: broken, PATH: process.env.PATH }),
      (e: unknown) =>
        e instanceof DshError && e.code === "PI_NOT_FOUND" && /exit 3/.test(e.message) && /boom/.test(e.message),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("findPi runs the real pi and reports its version (0.73.1, or the 1.x under DSH_HERDR_PI_BIN)", async () => {
  const found = await findPi({
    ...process.env,
    PATH: `/nonexistent-dir:${process.env.PATH ?? ""}`,
    DSH_HERDR_PI_BIN: piBin,
  });
  const expected = piBin === bundledPiBin ? "0.73.1" : testPiVersion();
  assert.match(
    expected,
    piBin === bundledPiBin ? /^0\.73\.1$/ : /^[1-9]\d*\./,
    "the pi under test is on one of the two lines",
  );
  assert.deepEqual(found, { path: piBin, version: expected });
});

test("real pi keeps a prompt that starts with '-' as the message, not a flag (argv from buildPiCommand)", async () => {
  const h = await startPiHarness({ script: { conversations: [{ steps: [{ text: "ok" }] }] } });
  try {
    const { argv } = buildPiCommand({
      mode: "interactive",
      model: h.modelName,
      sessionPath: join(h.dir, "s.jsonl"),
      extensionPaths: [],
      initialPrompt: "--version is not a flag here",
      cwd: h.work,
      extraArgs: ["-p"],
      env: { PATH: "/nonexistent-dir" },
    });
    const r = await h.runPi(argv.slice(1));
    assert.equal(r.exitCode, 0, String(r.stderr));
    assert.equal(String(r.stdout).trim(), "ok");
    const body = h.model.requests()[0]?.body as { messages: { role: string; content: { text: string }[] }[] };
    const userText = body.messages.find((m) => m.role === "user")?.content[0]?.text;
    assert.equal(userText?.trim(), "--version is not a flag here");
  } finally {
    await h.cleanup();
  }
});
