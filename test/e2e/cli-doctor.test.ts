// doctor checks what will run (the CLI binary as a subprocess): the pi the daemon resolves, whether pi has the
// default model with credentials, a home it can write, and a running daemon's environment; and `config set`
// reaching a running daemon (it reloads config.json; a bad edit keeps the old config).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { preparePiAgentDir } from "../../fixtures/scripted-model/agent-dir.js";
import { runCliSync } from "../helpers/cli.js";

/** process.env without anything that could be a provider credential (a developer's own keys would hide a FAIL). */
const cleanEnv = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => !/(_API_KEY|_TOKEN|_AUTH|PI_CODING_AGENT_DIR)$/.test(k)),
) as Record<string, string>;

function withHome<T>(fn: (home: string, env: Record<string, string>) => T): T {
  const home = mkdtempSync(join(tmpdir(), "dsh-doctor-"));
  mkdirSync(join(home, "user"));
  const pi = preparePiAgentDir(join(home, "pi"), "http://127.0.0.1:9/v1").env;
  const env = {
    ...cleanEnv,
    HOME: join(home, "user"),
    DSH_HERDR_HOME: join(home, "dsh"),
    HERDR_SOCKET_PATH: join(home, "no-herdr.sock"),
    PI_CODING_AGENT_DIR: pi.PI_CODING_AGENT_DIR!,
    PI_OFFLINE: "1",
  };
  try {
    return fn(home, env);
  } finally {
    runCliSync(["daemon", "stop"], { env, timeoutMs: 30_000 });
    rmSync(home, { recursive: true, force: true });
  }
}
const cli = (env: Record<string, string>, args: string[]) => runCliSync(args, { env, timeoutMs: 90_000 });

test("doctor: a DSH_HERDR_PI_BIN that is not a pi is a FAIL naming the variable and the fix", () =>
  withHome((home, env) => {
    const r = cli({ ...env, DSH_HERDR_PI_BIN: join(home, "no-such-pi") }, ["doctor"]);
    assert.equal(r.code, 1);
    assert.match(r.out, /^FAIL\s+pi\s+.*DSH_HERDR_PI_BIN=.*no-such-pi.*fix: point DSH_HERDR_PI_BIN at a pi binary/m);
  }));

test("doctor: a pi older than 0.73.1 first on PATH is a FAIL with its path, version and the install hint", () =>
  withHome((home, env) => {
    const dir = join(home, "old-bin");
    mkdirSync(dir);
    writeFileSync(join(dir, "pi"), "#!/bin/sh\necho 0.70.2 >&2\n");
    chmodSync(join(dir, "pi"), 0o755);
    const { DSH_HERDR_PI_BIN: _ignored, ...noOverride } = env;
    const r = cli({ ...noOverride, PATH: `${dir}:${env.PATH ?? ""}` }, ["doctor"]);
    assert.equal(r.code, 1);
    assert.match(
      r.out,
      new RegExp(
        `^FAIL\\s+pi\\s+pi 0\\.70\\.2 \\(${dir}/pi, first on PATH\\) is older than 0\\.73\\.1.*fix: .*@earendil-works/pi-coding-agent.*@mariozechner/pi-coding-agent`,
        "m",
      ),
    );
  }));

test("doctor: no credentials for any model, or a default model pi lacks, is a FAIL with the fix; the scripted model is OK", () =>
  withHome((home, env) => {
    const ok = JSON.parse(cli(env, ["doctor", "--json"]).out) as {
      checks: { name: string; level: string; detail: string }[];
    };
    assert.equal(ok.checks.find((c) => c.name === "model")?.level, "ok", JSON.stringify(ok.checks));
    // An empty pi dir: no models.json, no auth.json, no keys in the env.
    mkdirSync(join(home, "empty-pi"));
    const none = cli({ ...env, PI_CODING_AGENT_DIR: join(home, "empty-pi") }, ["doctor"]);
    assert.equal(none.code, 1);
    assert.match(none.out, /^FAIL\s+model\s+pi has no model with credentials.*fix: set the provider's API key/m);
    assert.doesNotMatch(none.out, /all checks passed/);
    // A default model pi has no credentials for.
    assert.equal(cli(env, ["config", "set", "defaultModel", "anthropic/claude-sonnet-4-5"]).code, 0);
    const other = cli(env, ["doctor"]);
    assert.equal(other.code, 1);
    assert.match(
      other.out,
      /^FAIL\s+model\s+default model anthropic\/claude-sonnet-4-5 is not among the models pi has credentials for.*fix: /m,
    );
  }));

test("doctor: a home it cannot write in is a FAIL (a probe file, not only the mode)", () =>
  withHome((home, env) => {
    // root writes through any mode: /proc/self is a directory nobody can create files in.
    const ro = process.getuid?.() === 0 ? "/proc/self" : join(home, "ro");
    if (ro !== "/proc/self") {
      mkdirSync(ro, { mode: 0o700 });
      chmodSync(ro, 0o500);
    }
    try {
      const r = cli({ ...env, DSH_HERDR_HOME: ro }, ["doctor"]);
      assert.equal(r.code, 1);
      assert.match(r.out, /^FAIL\s+home\s+cannot write in .*fix: make it writable .*or set DSH_HERDR_HOME/m);
    } finally {
      if (ro !== "/proc/self") chmodSync(ro, 0o700);
    }
  }));

test("doctor: a daemon started with another pi dir is a WARN saying to restart it; config set reaches the running daemon", () =>
  withHome((home, env) => {
    const otherDir = preparePiAgentDir(join(home, "pi-other"), "http://127.0.0.1:9/v1").env.PI_CODING_AGENT_DIR!;
    const started = cli({ ...env, PI_CODING_AGENT_DIR: otherDir }, ["daemon", "start"]);
    assert.equal(started.code, 0, started.err);
    const r = cli(env, ["doctor"]);
    assert.match(
      r.out,
      new RegExp(
        `^WARN\\s+daemon\\s+.*PI_CODING_AGENT_DIR ${otherDir} there, ${env.PI_CODING_AGENT_DIR} here.*fix: restart the daemon`,
        "m",
      ),
    );
    const same = cli({ ...env, PI_CODING_AGENT_DIR: otherDir }, ["doctor", "--json"]);
    const daemon = (JSON.parse(same.out) as { checks: { name: string; level: string }[] }).checks.find(
      (c) => c.name === "daemon",
    );
    assert.equal(daemon?.level, "ok", "the same environment: nothing to restart");

    // config set: the running daemon reloads config.json and says so.
    const set = cli(env, ["config", "set", "maxParallelAgents", "7"]);
    assert.equal(set.code, 0, set.err);
    assert.match(set.err, /the running daemon took it/);
    const status = () => JSON.parse(cli(env, ["daemon", "status", "--json"]).out) as { maxParallelAgents: number };
    assert.equal(status().maxParallelAgents, 7);
    // A bad edit by hand: logged, and the old config stays.
    const file = join(home, "dsh", "config.json");
    writeFileSync(file, '{"maxParallelAgents": "lots"}\n');
    const log = join(home, "dsh", "daemon.log");
    const deadline = Date.now() + 30_000;
    while (!readFileSync(log, "utf8").includes("config.json changed but is invalid")) {
      assert.ok(Date.now() < deadline, "the daemon logged the bad edit");
      spawnSync("sleep", ["0.1"]);
    }
    assert.equal(status().maxParallelAgents, 7, "the previous config stays");
  }));
