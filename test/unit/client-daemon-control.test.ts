// The daemon as a real detached process: start returns when the socket answers, a second start reports the
// running one, stop is graceful, and a kill -9 leaves a stale lock and socket that the next start cleans up.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { daemonStatus, ensureDaemon, startDaemon, stopDaemon } from "../../src/client/daemon-control.js";
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
  assert.equal((await client.request<{ pid: number }>("daemon.status")).pid, client.hello.pid);
  client.close();
  await stopDaemon(home);
  await gone(client.hello.pid);
});
