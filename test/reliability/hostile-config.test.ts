// config.json that is not a file to read, through the real CLI and a real daemon process: a FIFO nobody writes (the
// open blocked the daemon's main thread for good, so nobody got a reply and `daemon stop` could not stop it) and a
// symlink to /dev/zero (read until the daemon died at 3.5 GB). Each is named CONFIG_INVALID, the daemon keeps serving
// on its previous config and stops when asked; a daemon started on one refuses at once, naming it.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCli } from "../helpers/cli.js";
import { until } from "../helpers/wait.js";

const base = mkdtempSync(join(tmpdir(), "dsh-hconfig-"));
after(() => rmSync(base, { recursive: true, force: true }));

function envFor(home: string): NodeJS.ProcessEnv {
  mkdirSync(join(base, "user"), { recursive: true });
  return {
    ...process.env,
    HOME: join(base, "user"),
    DSH_HERDR_HOME: home,
    HERDR_SOCKET_PATH: join(base, "no-herdr.sock"),
    PI_OFFLINE: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_CONFIG_NOSYSTEM: "1",
  };
}
const cli = (env: NodeJS.ProcessEnv, args: string[]) => runCli(args, { env, timeoutMs: 30_000 });

/** Put `make(tmp)`'s file in place of config.json by a rename (what an editor does). */
function replaceConfig(home: string, make: (tmp: string) => void): void {
  const tmp = join(home, "config.json.new");
  make(tmp);
  renameSync(tmp, join(home, "config.json"));
}

/** Alive and not a zombie waiting to be reaped (the CLI that started it has exited). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

const mkfifo = (p: string) => void execFileSync("mkfifo", [p]);
const toDevZero = (p: string) => symlinkSync("/dev/zero", p);

for (const [what, make, kind] of [
  ["a FIFO nobody writes", mkfifo, /is a FIFO, not a regular file/],
  ["a symlink to /dev/zero", toDevZero, /is a character device, not a regular file/],
] as const) {
  test(`config.json as ${what} under a running daemon: named CONFIG_INVALID, the daemon serves on and stops when asked`, async () => {
    const home = join(base, `run-${what.replace(/\W+/g, "-")}`);
    const env = envFor(home);
    assert.equal((await cli(env, ["config", "set", "maxParallelAgents", "2"])).code, 0);
    const started = await cli(env, ["daemon", "start"]);
    assert.equal(started.code, 0, started.err);
    const pid = Number(/pid (\d+)/.exec(started.out)?.[1]);
    try {
      replaceConfig(home, make);
      const log = join(home, "daemon.log");
      await until(
        "the daemon names the config.json it cannot read",
        () => (/config\.json changed but cannot be read/.test(readFileSync(log, "utf8")) ? true : undefined),
        15_000,
      );
      const line = readFileSync(log, "utf8")
        .split("\n")
        .find((l) => l.includes("cannot be read"))!;
      assert.match(line, kind);
      assert.match(line, /CONFIG_INVALID|delete it to use the defaults/);
      const st = await cli(env, ["daemon", "status", "--json"]);
      assert.equal(st.code, 0, `the daemon still answers: ${st.err}`);
      assert.equal((JSON.parse(st.out) as { pid: number }).pid, pid);
      // The CLI's own read of the file is refused by name too (it blocked the same way).
      const get = await cli(env, ["config", "get", "maxParallelAgents"]);
      assert.equal(get.code, 1, get.out + get.err);
      assert.match(get.err, /^dsh-herdr: CONFIG_INVALID: .*config\.json is .*, not a regular file; replace it/m);
      const stop = await cli(env, ["daemon", "stop"]);
      assert.equal(stop.code, 0, stop.err);
      assert.match(stop.out, /daemon stopped/);
      assert.equal(running(pid), false, "the daemon process is gone");
    } finally {
      if (running(pid)) process.kill(pid, "SIGKILL");
    }
  });
}

test("a daemon started on a FIFO or /dev/zero config.json refuses at once, naming it (no hang, no unbounded read)", async () => {
  for (const make of [mkfifo, toDevZero]) {
    const home = join(base, `start-${make === mkfifo ? "fifo" : "zero"}`);
    mkdirSync(home, { recursive: true, mode: 0o700 });
    make(join(home, "config.json"));
    const r = await cli(envFor(home), ["daemon", "start"]);
    assert.equal(r.code, 1, r.out + r.err);
    assert.match(r.err, /CONFIG_INVALID: .*config\.json is a (FIFO|character device), not a regular file/);
  }
});
