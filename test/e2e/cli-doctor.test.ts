// doctor checks what will run (the CLI binary as a subprocess): the pi the daemon resolves, whether pi has the
// default model with credentials, a home it can write, and a running daemon's environment; and `config set`
// reaching a running daemon (it reloads config.json; a bad edit keeps the old config).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
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

/** The checks of a `doctor --json` run, by name. */
function checksOf(out: string): Map<string, { level: string; detail: string; fix?: string }> {
  const j = JSON.parse(out) as { checks: { name: string; level: string; detail: string; fix?: string }[] };
  return new Map(j.checks.map((c) => [c.name, c]));
}

const SECRET = "sk-ant-test-0123456789-SECRET";

test("doctor asks the running daemon: a provider key, a UTF-8 locale and PI_CODING_AGENT_DIR the shell has and the daemon lacks are FAILs by name; daemon env set and a restart fix them; values are never printed", () =>
  withHome((home, env) => {
    assert.equal(cli(env, ["config", "set", "defaultModel", "anthropic/claude-sonnet-4-5"]).code, 0);
    const { LANG: _l, LC_ALL: _a, LC_CTYPE: _c, PI_CODING_AGENT_DIR: _p, ...bare } = env;
    // The daemon is started from an environment without the key, a locale or the pi dir (a unit, cron, ssh).
    const daemonEnv = { ...bare, LANG: "C" };
    const shell = { ...env, ANTHROPIC_API_KEY: SECRET, LANG: "C.UTF-8" };
    assert.equal(cli(daemonEnv, ["daemon", "start"]).code, 0);
    const before = cli(shell, ["doctor"]);
    assert.equal(before.code, 1, before.out);
    assert.match(
      before.out,
      /^FAIL\s+daemon-key\s+the running daemon \(pid \d+\) has no ANTHROPIC_API_KEY \(the key of anthropic\), which this shell has.*No API key.*fix: dsh-herdr daemon env set ANTHROPIC_API_KEY .*then dsh-herdr daemon restart$/m,
    );
    assert.match(
      before.out,
      /^FAIL\s+daemon-locale\s+.*no UTF-8 locale \(C\).*LANG=C\.UTF-8.*fix: dsh-herdr daemon env set LANG,/m,
    );
    assert.match(
      before.out,
      /^FAIL\s+daemon-pidir\s+.*no PI_CODING_AGENT_DIR.*fix: dsh-herdr daemon env set PI_CODING_AGENT_DIR, then/m,
    );
    assert.doesNotMatch(before.out + before.err, new RegExp(SECRET));
    const status = cli(shell, ["daemon", "status", "--json"]);
    assert.doesNotMatch(status.out, new RegExp(SECRET), "daemon.status reports names, never values");

    // The fix as doctor words it: each value from this shell, into <home>/env (0600); never printed.
    const set = cli(shell, ["daemon", "env", "set", "ANTHROPIC_API_KEY", "LANG", "PI_CODING_AGENT_DIR"]);
    assert.equal(set.code, 0, set.err);
    assert.match(
      set.err,
      /the running daemon \(pid \d+\) reads .*env at start: restart it to apply: dsh-herdr daemon restart/,
    );
    const file = join(home, "dsh", "env");
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(
      readFileSync(file, "utf8"),
      `ANTHROPIC_API_KEY=${SECRET}\nLANG=C.UTF-8\nPI_CODING_AGENT_DIR=${env.PI_CODING_AGENT_DIR}\n`,
    );
    const list = cli(shell, ["daemon", "env", "list"]);
    assert.equal(list.out, "ANTHROPIC_API_KEY\nLANG\nPI_CODING_AGENT_DIR\n");
    for (const r of [set, list]) assert.doesNotMatch(r.out + r.err, new RegExp(SECRET));
    // Not yet: the running daemon read the file at its start.
    const stale = checksOf(cli(shell, ["doctor", "--json"]).out);
    assert.equal(stale.get("daemon-key")?.level, "fail");
    assert.equal(stale.get("envfile")?.level, "warn", JSON.stringify(stale.get("envfile")));

    // Restarted from the same key-less environment: the daemon reads <home>/env.
    assert.equal(cli(daemonEnv, ["daemon", "restart"]).code, 0);
    const after = cli(shell, ["doctor", "--json"]);
    const c = checksOf(after.out);
    for (const name of ["daemon-key", "daemon-locale", "daemon-pidir", "envfile"])
      assert.equal(c.get(name)?.level, "ok", `${name}: ${JSON.stringify(c.get(name))}`);
    assert.match(c.get("daemon-key")!.detail, /has every key this shell has for anthropic/);
    const names = (
      JSON.parse(cli(shell, ["daemon", "status", "--json"]).out) as {
        env: { names: string[]; envFile: { keys: string[] } };
      }
    ).env;
    assert.ok(names.names.includes("ANTHROPIC_API_KEY"));
    assert.deepEqual(names.envFile.keys, ["ANTHROPIC_API_KEY", "LANG", "PI_CODING_AGENT_DIR"]);
    assert.doesNotMatch(after.out, new RegExp(SECRET));

    // unset removes the line; list shows what is left.
    assert.equal(cli(shell, ["daemon", "env", "unset", "ANTHROPIC_API_KEY"]).code, 0);
    assert.equal(cli(shell, ["daemon", "env", "list"]).out, "LANG\nPI_CODING_AGENT_DIR\n");
    // A value given on the command line is kept exactly (quoted in the file), and a bad name is a usage error
    // that does not echo what was typed.
    assert.equal(cli(shell, ["daemon", "env", "set", "X_NOTE=it's a $HOME"]).code, 0);
    assert.match(readFileSync(file, "utf8"), /^X_NOTE="it's a \\\$HOME"$/m);
    const bad = cli(shell, ["daemon", "env", "set", SECRET]);
    assert.equal(bad.code, 2);
    assert.doesNotMatch(bad.err, new RegExp(SECRET));
  }));

test("doctor without a daemon reads the unit install-unit wrote (Environment=, EnvironmentFile=): a key only the shell has is a FAIL; install-unit warns of it", () =>
  withHome((home, env) => {
    const xdg = join(home, "xdg");
    const shell = { ...env, XDG_CONFIG_HOME: xdg, ANTHROPIC_API_KEY: SECRET, LANG: "C.UTF-8" };
    const inst = cli(shell, ["daemon", "install-unit"]);
    assert.equal(inst.code, 0, inst.err);
    assert.match(
      inst.err,
      /^warning: the unit's daemon will not have ANTHROPIC_API_KEY \(the key of anthropic\), which this shell has: dsh-herdr daemon env set ANTHROPIC_API_KEY$/m,
    );
    const unit = readFileSync(join(xdg, "systemd", "user", "dsh-herdr.service"), "utf8");
    assert.match(unit, new RegExp(`^EnvironmentFile=-${join(home, "dsh", "env")}$`, "m"));
    assert.match(unit, /^Environment=LANG=C\.UTF-8$/m);
    assert.match(unit, new RegExp(`^Environment=PI_CODING_AGENT_DIR=${env.PI_CODING_AGENT_DIR}$`, "m"));
    assert.doesNotMatch(unit, new RegExp(SECRET), "no key in the unit");
    const before = cli(shell, ["doctor"]);
    assert.equal(before.code, 1);
    assert.match(
      before.out,
      /^FAIL\s+daemon-key\s+the unit dsh-herdr\.service .*has no ANTHROPIC_API_KEY.*fix: dsh-herdr daemon env set ANTHROPIC_API_KEY .*then systemctl --user restart dsh-herdr\.service$/m,
    );
    assert.match(before.out, /^OK\s+daemon-locale\s+the unit dsh-herdr\.service .*C\.UTF-8/m);
    assert.equal(cli(shell, ["daemon", "env", "set", "ANTHROPIC_API_KEY"]).code, 0);
    const after = checksOf(cli(shell, ["doctor", "--json"]).out);
    assert.equal(after.get("daemon-key")?.level, "ok", JSON.stringify(after.get("daemon-key")));
    // Installing again now: no warning (the key is in the file the unit names).
    const again = cli(shell, ["daemon", "install-unit", "--force"]);
    assert.equal(again.code, 0, again.err);
    assert.doesNotMatch(again.err, /warning/);
  }));

test("a bad line in <home>/env: doctor names the line and the daemon refuses to start with it", () =>
  withHome((home, env) => {
    mkdirSync(join(home, "dsh"), { recursive: true, mode: 0o700 });
    writeFileSync(join(home, "dsh", "env"), "GOOD=1\nBAD VALUE=two words\n", { mode: 0o600 });
    const d = cli(env, ["doctor"]);
    assert.match(
      d.out,
      /^FAIL\s+envfile\s+.*env line 2: "BAD VALUE" is not a variable name.*the daemon will not start/m,
    );
    const start = cli(env, ["daemon", "start"]);
    assert.equal(start.code, 1);
    assert.match(start.err, /CONFIG_INVALID: .*env line 2/);
  }));
