// The CLI binary as a subprocess, for the commands that need no daemon: schema, config, doctor, usage errors.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { preparePiAgentDir } from "../../fixtures/scripted-model/agent-dir.js";
import { dshBin, runCliSync } from "../helpers/cli.js";

const root = join(import.meta.dirname, "..", "..", "..");
const bin = dshBin;

function cli(home: string, args: string[], extraEnv: Record<string, string> = {}) {
  return runCliSync(args, {
    env: {
      ...process.env,
      HOME: join(home, "user"),
      DSH_HERDR_HOME: join(home, "dsh"),
      HERDR_SOCKET_PATH: join(home, "no-herdr.sock"),
      ...extraEnv,
    },
    timeoutMs: 60_000,
  });
}

function withHome(fn: (home: string) => void): void {
  const home = mkdtempSync(join(tmpdir(), "dsh-cli-"));
  mkdirSync(join(home, "user"));
  try {
    fn(home);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

test("schema prints the AgentResult schema byte for byte", () =>
  withHome((home) => {
    const r = cli(home, ["schema"]);
    assert.equal(r.code, 0);
    assert.equal(r.out, readFileSync(join(root, "schema", "agent-result.schema.json"), "utf8"));
  }));

test("config set/get/path round-trip through config.json; a bad value changes nothing", () =>
  withHome((home) => {
    assert.equal(cli(home, ["config", "path"]).out.trim(), join(home, "dsh", "config.json"));
    const set = cli(home, ["config", "set", "maxParallelAgents", "5"]);
    assert.equal(set.code, 0, set.err);
    assert.equal(set.out, "maxParallelAgents = 5\n");
    assert.equal(cli(home, ["config", "get", "maxParallelAgents"]).out, "5\n");
    assert.deepEqual(JSON.parse(cli(home, ["config", "get", "maxParallelAgents", "--json"]).out), 5);
    assert.equal(JSON.parse(readFileSync(join(home, "dsh", "config.json"), "utf8")).maxParallelAgents, 5);

    const bad = cli(home, ["config", "set", "maxParallelAgents", "lots"]);
    assert.equal(bad.code, 2, "a bad value is a usage error");
    assert.equal(bad.err.trim().split("\n").length, 1, "one clear line");
    assert.match(bad.err, /CONFIG_INVALID/);
    const unknown = cli(home, ["config", "get", "nope"]);
    assert.equal(unknown.code, 1);
    assert.match(unknown.err, /unknown config key "nope"/);
    assert.equal(JSON.parse(readFileSync(join(home, "dsh", "config.json"), "utf8")).maxParallelAgents, 5);

    const all = JSON.parse(cli(home, ["config", "get", "--json"]).out) as Record<string, unknown>;
    assert.equal(all["maxParallelAgents"], 5);
    assert.equal(all["runtime"], "auto");
  }));

test("doctor passes on a sane machine and fails with a fix on a broken config and an open home", () =>
  withHome((home) => {
    // A sane machine has a pi that knows a model with credentials: the scripted provider (never contacted here).
    const pi = preparePiAgentDir(join(home, "pi"), "http://127.0.0.1:9/v1").env;
    const piEnv = { PI_CODING_AGENT_DIR: pi.PI_CODING_AGENT_DIR!, PI_OFFLINE: "1" };
    const good = cli(home, ["doctor", "--json"], piEnv);
    const report = JSON.parse(good.out) as { ok: boolean; checks: { name: string; level: string }[] };
    assert.equal(good.code, 0, good.out);
    assert.equal(report.ok, true);
    for (const name of ["node", "git", "pi", "model", "tmux", "herdr", "home", "config", "daemon", "disk"]) {
      assert.ok(
        report.checks.some((c) => c.name === name),
        `checks ${name}`,
      );
    }
    assert.equal(
      report.checks.find((c) => c.name === "herdr")?.level,
      "warn",
      "no Herdr here: a warning, not a failure",
    );

    mkdirSync(join(home, "dsh"), { mode: 0o700 });
    writeFileSync(join(home, "dsh", "config.json"), '{"maxParallelAgents": "many"}');
    chmodSync(join(home, "dsh"), 0o777);
    const bad = cli(home, ["doctor"], piEnv);
    assert.equal(bad.code, 1);
    assert.match(bad.out, /^FAIL\s+home\s+.*mode 777.*fix: chmod 700 /m);
    // Not "config set": it would fail on the same broken file.
    assert.match(bad.out, /^FAIL\s+config\s+.*maxParallelAgents.*fix: edit or delete .*config\.json$/m);
    assert.match(bad.out, /^2 check\(s\) failed$/m);
  }));

test("a Herdr socket that does not answer is a FAIL naming the fix", () =>
  withHome((home) => {
    writeFileSync(join(home, "fake.sock"), "not a socket");
    const r = cli(home, ["doctor"], { HERDR_SOCKET_PATH: join(home, "fake.sock") });
    assert.equal(r.code, 1);
    assert.match(r.out, /^FAIL\s+herdr\s+.*does not answer ping.*fix: /m);
  }));

test("bad flags and bad values exit 2 with one line; unknown commands suggest the near one", () =>
  withHome((home) => {
    const flag = cli(home, ["list", "--bogus"]);
    assert.equal(flag.code, 2);
    assert.equal(flag.err.trim(), "dsh-herdr: BAD_PARAMS: unknown option '--bogus'; see `dsh-herdr list --help`");
    const choice = cli(home, ["spawn", "--role", "boss", "--prompt", "x"]);
    assert.equal(choice.code, 2);
    assert.match(choice.err, /--role.*boss.*worker, reviewer|Allowed choices are worker, reviewer/);
    const dur = cli(home, ["wait", "tabc", "--timeout", "soon"]);
    assert.equal(dur.code, 2);
    assert.match(dur.err, /--timeout: "soon" is not a duration/);
    const cmd = cli(home, ["lsit"]);
    assert.equal(cmd.code, 2);
    assert.match(cmd.err, /unknown command 'lsit'.*Did you mean list\?/s);
    const noPrompt = cli(home, ["spawn"]);
    assert.equal(noPrompt.code, 2);
    assert.match(noPrompt.err, /give the task exactly once/);
  }));

test("without a daemon: one clear line, exit 1; --json puts the error on stderr as JSON", () =>
  withHome((home) => {
    const r = cli(home, ["daemon", "status"]);
    assert.equal(r.code, 1);
    assert.equal(r.out, "");
    assert.equal(r.err.trim().split("\n").length, 1);
    assert.match(r.err, /^dsh-herdr: DAEMON_UNAVAILABLE: .*dsh-herdr daemon start/);
    const j = cli(home, ["daemon", "status", "--json"]);
    assert.equal(j.code, 1);
    assert.equal((JSON.parse(j.err) as { error: { code: string } }).error.code, "DAEMON_UNAVAILABLE");
  }));

test("daemon run serves in the foreground and stops cleanly on SIGINT", async () => {
  const home = mkdtempSync(join(tmpdir(), "dsh-cli-run-"));
  const env = {
    ...process.env,
    HOME: home,
    DSH_HERDR_HOME: join(home, "dsh"),
    HERDR_SOCKET_PATH: join(home, "none.sock"),
  };
  const child = spawn(process.execPath, [bin, "daemon", "run"], { env, stdio: "ignore" });
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  try {
    let status: { code: number | null; stdout: string } = { code: null, stdout: "" };
    for (let i = 0; i < 100 && status.code !== 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const s = spawnSync(process.execPath, [bin, "daemon", "status", "--json"], { env, encoding: "utf8" });
      status = { code: s.status, stdout: s.stdout };
    }
    assert.equal(status.code, 0, "the foreground daemon answers");
    assert.equal((JSON.parse(status.stdout) as { home: string }).home, join(home, "dsh"), "the daemon of this home");
    child.kill("SIGINT");
    assert.equal(await exited, 0);
    assert.equal(spawnSync(process.execPath, [bin, "daemon", "status"], { env }).status, 1, "gone after Ctrl+C");
  } finally {
    child.kill("SIGKILL");
    rmSync(home, { recursive: true, force: true });
  }
});

test("logs and open of a relayed task whose spawn that machine has not answered yet: BAD_STATE by name, no ssh", () =>
  withHome((home) => {
    // The relay writes task.json with remote.taskId "" before the machine's answer (src/daemon/relay/relay-spawn.ts); tmux: a
    // headless one has no pane to open either way.
    const taskId = "tmx7fuu0weyr";
    mkdirSync(join(home, "dsh", "tasks", taskId), { recursive: true });
    writeFileSync(
      join(home, "dsh", "tasks", taskId, "task.json"),
      JSON.stringify({ taskId, remote: { label: "box", taskId: "" }, machine: "box", runtime: "tmux" }),
    );
    writeFileSync(
      join(home, "dsh", "config.json"),
      JSON.stringify({ machines: { box: { ssh: "nobody@127.0.0.1", port: 1 } } }),
    );
    for (const cmd of ["logs", "open"]) {
      const r = cli(home, [cmd, taskId]);
      assert.equal(r.code, 1, r.err);
      assert.match(r.err, /BAD_STATE: task tmx7fuu0weyr is still being started on machine box/, `${cmd}: ${r.err}`);
    }
  }));
