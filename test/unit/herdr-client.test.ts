// Pure pieces of the Herdr client: socket path rules, envelope checks, key names, Herdr error mapping, and the
// CLI transport's handling of non-JSON output.
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { DshError } from "../../src/core/errors.js";
import { CliTransport } from "../../src/runtime/herdr/cli-transport.js";
import { parseEnvelope } from "../../src/runtime/herdr/envelope.js";
import { herdrKey, resolveHerdrSocketPath, workspaceLabel } from "../../src/runtime/herdr/index.js";

const code = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    assert.ok(e instanceof DshError);
    return e.code;
  }
  return "none";
};

test("socket path: explicit > --session > HERDR_SOCKET_PATH > HERDR_SESSION > default", () => {
  const env = { HOME: "/h", HERDR_SOCKET_PATH: "/run/h.sock", HERDR_SESSION: "work" };
  assert.equal(resolveHerdrSocketPath({ socketPath: "/x.sock", session: "s", env }), "/x.sock");
  assert.equal(resolveHerdrSocketPath({ session: "s", env }), "/h/.config/herdr/sessions/s/herdr.sock");
  assert.equal(resolveHerdrSocketPath({ env }), "/run/h.sock");
  assert.equal(
    resolveHerdrSocketPath({ env: { HOME: "/h", HERDR_SESSION: "work" } }),
    "/h/.config/herdr/sessions/work/herdr.sock",
  );
  assert.equal(resolveHerdrSocketPath({ env: { HOME: "/h", XDG_CONFIG_HOME: "/cfg" } }), "/cfg/herdr/herdr.sock");
  assert.equal(
    code(() => resolveHerdrSocketPath({ session: "../etc", env })),
    "BAD_PARAMS",
  );
});

test("envelopes: result, Herdr error mapped, and every malformed shape is HERDR_PROTOCOL", () => {
  assert.deepEqual(parseEnvelope('{"id":"a","result":{"type":"ok"}}', "a", "m"), { type: "ok" });
  assert.equal(
    code(() => parseEnvelope('{"id":"a","error":{"code":"pane_not_found","message":"x"}}', "a", "m")),
    "PANE_GONE",
  );
  assert.equal(
    code(() => parseEnvelope('{"id":"a","error":{"code":"agent_pane_busy","message":"x"}}', "a", "m")),
    "HERDR_REJECTED",
  );
  assert.equal(
    code(() => parseEnvelope('{"id":"","error":{"code":"invalid_request","message":"x"}}', "a", "m")),
    "HERDR_PROTOCOL",
  );
  for (const bad of [
    "nope",
    "[]",
    '{"id":"b","result":{"type":"ok"}}',
    '{"id":"a"}',
    '{"id":"a","result":{}}',
    '{"id":"a","error":"x"}',
    '{"id":"","result":{"type":"ok"}}',
  ]) {
    assert.equal(
      code(() => parseEnvelope(bad, "a", "m")),
      "HERDR_PROTOCOL",
      bad,
    );
  }
});

test("key names: tmux style to Herdr combos", () => {
  assert.deepEqual(["Escape", "C-c", "Enter", "M-x", "Up", "a", "A", "f1"].map(herdrKey), [
    "esc",
    "ctrl+c",
    "enter",
    "alt+x",
    "up",
    "a",
    "A",
    "f1",
  ]);
});

test("workspace label follows the original plugin", () => {
  assert.equal(workspaceLabel({ repoName: "api", cwd: "/x/y" }), "DSH · api");
  assert.equal(workspaceLabel({ cwd: "/src/web" }), "DSH · web");
});

test("CLI transport: non-JSON output is HERDR_PROTOCOL, a JSON error on stderr keeps Herdr's code", async () => {
  const dir = mkdtempSync(join(tmpdir(), "herdr-cli-unit-"));
  try {
    const bin = join(dir, "herdr");
    writeFileSync(
      bin,
      `#!/bin/sh
case "$1" in
  agent) echo '{"id":"cli:agent:get","error":{"code":"agent_not_found","message":"no agent"}}' >&2; exit 1 ;;
  pane) echo 'segfault-ish garbage' >&2; exit 1 ;;
  *) echo 'Herdr 0.9.1 (not json)' ;;
esac
`,
    );
    chmodSync(bin, 0o755);
    const t = new CliTransport({ bin });
    await assert.rejects(t.request("workspace.list", {}), (e) => e instanceof DshError && e.code === "HERDR_PROTOCOL");
    await assert.rejects(
      t.request("pane.get", { pane_id: "w1:p1" }),
      (e) => e instanceof DshError && e.code === "HERDR_PROTOCOL",
    );
    await assert.rejects(
      t.request("agent.get", { target: "x" }),
      (e) => e instanceof DshError && e.code === "AGENT_NOT_FOUND" && e.details?.herdrCode === "agent_not_found",
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
