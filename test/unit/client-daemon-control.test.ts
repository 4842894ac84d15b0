// The daemon as a real detached process: start returns when the socket answers, a second start reports the
// running one, stop is graceful, and a kill -9 leaves a stale lock and socket that the next start cleans up.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  DAEMON_NODE_FLAGS,
  daemonStatus,
  ensureDaemon,
  startDaemon,
  stopDaemon,
} from "../../src/client/daemon-control.js";
import { runDaemonForeground } from "../../src/cli/common/daemon-control.js";
import { until } from "../helpers/wait.js";

const dir = mkdtempSync(join(tmpdir(), "dsh-ctl-"));
const home = join(dir, "home");
const pids: number[] = [];
after(() => {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      /* already gone */
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

/** The process has ended (a real process's exit, polled: no event tells another process's end). */
const gone = (pid: number) =>
  until(
    `pid ${pid} to end`,
    () => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    },
    5000,
    50,
  );

test("start, status, second start, stop, kill -9 recovery, ensureDaemon on demand", async () => {
  assert.equal((await daemonStatus(home)).running, false);
  const first = await startDaemon(home);
  pids.push(first.pid);
  assert.equal(first.alreadyRunning, false);
  const st = await daemonStatus(home);
  assert.equal(st.running, true);
  assert.equal(st.pid, first.pid);
  assert.equal(st.home, home);
  assert.deepEqual(await startDaemon(home), { pid: first.pid, alreadyRunning: true });
  assert.match(readFileSync(join(home, "daemon.log"), "utf8"), /daemon started/);

  assert.deepEqual(await stopDaemon(home), { wasRunning: true, pid: first.pid });
  await gone(first.pid);
  assert.equal(existsSync(join(home, "daemon.sock")), false, "graceful stop removes the socket");
  assert.deepEqual(await stopDaemon(home), { wasRunning: false });

  // kill -9: the socket file and the lock stay behind; the next start must clean them up safely.
  const second = await startDaemon(home);
  pids.push(second.pid);
  process.kill(second.pid, "SIGKILL");
  await gone(second.pid);
  assert.equal(existsSync(join(home, "daemon.sock")), true);
  assert.equal(existsSync(join(home, "daemon.lock")), true);
  const client = await ensureDaemon(home);
  pids.push(client.hello.pid);
  assert.notEqual(client.hello.pid, second.pid);
  assert.equal((await client.request("daemon.status")).pid, client.hello.pid);
  client.close();
  await stopDaemon(home);
  await gone(client.hello.pid);
});

/** The node flags a running process was started with (its argv before the script). */
const nodeFlagsOf = (pid: number) => {
  const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  return argv.slice(
    1,
    argv.findIndex((a) => a.endsWith("main.js")),
  );
};

test("the detached and the foreground daemon both run with the daemon's node flags (the young-generation cap)", async () => {
  assert.ok(DAEMON_NODE_FLAGS.includes("--max-semi-space-size=4"));
  const detachedHome = join(dir, "flags-detached");
  const started = await startDaemon(detachedHome);
  pids.push(started.pid);
  assert.deepEqual(nodeFlagsOf(started.pid), [...DAEMON_NODE_FLAGS]);
  await stopDaemon(detachedHome);
  await gone(started.pid);

  const fgHome = join(dir, "flags-foreground");
  const ac = new AbortController();
  const exited = runDaemonForeground(fgHome, ac.signal, { ...process.env, DSH_HERDR_HOME: fgHome });
  const pid = await until("the foreground daemon to answer", async () => (await daemonStatus(fgHome)).pid, 10_000, 50);
  pids.push(pid);
  assert.deepEqual(nodeFlagsOf(pid), [...DAEMON_NODE_FLAGS]);
  ac.abort();
  assert.equal(await exited, 0);
});
