// Runtime selection: auto order herdr → tmux → headless, explicit overrides, clear failures; the factory.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRuntime, selectRuntime, tmuxInstalled } from "../../src/daemon/ports/runtime-select.js";
import { herdrPing } from "../../src/runtime/herdr/index.js";
import { isDshError } from "../../src/core/errors.js";
import type { Runtime } from "../../src/runtime/types.js";

const yes = async () => true;
const no = async () => false;

test("select: auto picks herdr when it answers, else tmux when installed, else headless", async () => {
  assert.deepEqual(await selectRuntime({ config: { runtime: "auto" }, herdrPing: yes, tmuxAvailable: yes }), {
    kind: "herdr",
    reason: "runtime herdr: a Herdr server answered ping",
  });
  // Real probes: no Herdr socket in a temp dir, and the real tmux binary.
  const dir = mkdtempSync(join(tmpdir(), "dsh-select-"));
  try {
    const realPing = () => herdrPing({ socketPath: join(dir, "no-herdr.sock") });
    const s = await selectRuntime({ config: {}, herdrPing: realPing });
    assert.equal(s.kind, "tmux");
    assert.match(s.reason, /^runtime tmux: no Herdr server answered ping \(.+\) and tmux is installed$/);
    const h = await selectRuntime({
      config: {},
      herdrPing: realPing,
      tmuxAvailable: () => tmuxInstalled(join(dir, "no-tmux")),
    });
    assert.equal(h.kind, "headless");
    assert.match(h.reason, /tmux is not installed/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  assert.equal(await tmuxInstalled(), true);
});

test("select: an explicit choice wins over config and auto, and is checked", async () => {
  let pings = 0;
  const counted = async () => {
    pings++;
    return true;
  };
  assert.deepEqual(await selectRuntime({ explicit: "headless", config: { runtime: "tmux" }, herdrPing: counted }), {
    kind: "headless",
    reason: "runtime headless: requested explicitly (--runtime)",
  });
  assert.equal(
    (await selectRuntime({ explicit: "auto", config: { runtime: "tmux" }, herdrPing: counted, tmuxAvailable: yes }))
      .kind,
    "tmux",
  );
  assert.equal(pings, 0, "a forced tmux/headless choice does not ping Herdr");
  assert.equal((await selectRuntime({ config: { runtime: "herdr" }, herdrPing: counted })).kind, "herdr");
  assert.equal(pings, 1);

  await assert.rejects(
    selectRuntime({
      explicit: "herdr",
      config: {},
      herdrPing: async () => ({ ok: false, reason: "connect ENOENT /x.sock" }),
    }),
    (e) =>
      isDshError(e) &&
      e.code === "RUNTIME_UNAVAILABLE" &&
      /ENOENT \/x\.sock/.test(e.message) &&
      /choose tmux or headless/.test(e.message),
  );
  await assert.rejects(
    selectRuntime({
      explicit: "herdr",
      config: {},
      herdrPing: async () => {
        throw new Error("boom");
      },
    }),
    (e) => isDshError(e) && e.code === "RUNTIME_UNAVAILABLE" && /boom/.test(e.message),
  );
  await assert.rejects(
    selectRuntime({ config: { runtime: "tmux" }, herdrPing: yes, tmuxAvailable: no }),
    (e) =>
      isDshError(e) &&
      e.code === "RUNTIME_UNAVAILABLE" &&
      /config runtime tmux/.test(e.message) &&
      /install tmux/.test(e.message),
  );
  await assert.rejects(
    selectRuntime({ explicit: "screen", config: {}, herdrPing: yes }),
    (e) =>
      isDshError(e) &&
      e.code === "BAD_PARAMS" &&
      /"screen" is unknown: use auto, herdr, tmux or headless/.test(e.message),
  );
});

test("createRuntime builds each kind, and a factory can replace one", () => {
  assert.equal(createRuntime("tmux", { tmux: { socketName: "dsh-test-unused" } }).kind, "tmux");
  assert.equal(createRuntime("headless").kind, "headless");
  assert.equal(createRuntime("herdr", { herdr: {} }).kind, "herdr");
  const fake = { kind: "herdr" } as Runtime;
  assert.equal(createRuntime("herdr", {}, { herdr: () => fake }), fake);
});
