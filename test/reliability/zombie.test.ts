// A daemon SIGKILLed where nothing reaps it (issue 13 §4): its parent here is a `sleep` that never waits, as under a
// container whose PID 1 is a shell. The zombie still answers kill(pid, 0); a new daemon must start at once anyway.
// Also: a failed `daemon start` quotes only the log lines of that start.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startDaemon } from "../../src/client/daemon-control.js";
import { cliClient, DAEMON_PROC, startDaemonProc, until } from "./proc-harness.js";

let dir: string;
const parents: number[] = [];
before(() => {
  dir = mkdtempSync(join(tmpdir(), "dsh-zombie-"));
});
after(() => {
  // Ending the non-reaping parent hands the zombie to PID 1.
  for (const pid of parents) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      /* gone */
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

const stateOf = (pid: number) => {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    return s.slice(s.lastIndexOf(") ") + 2)[0];
  } catch {
    return undefined;
  }
};

test("a SIGKILLed daemon left a zombie: kill(pid, 0) succeeds on it, and a new daemon starts at once", async () => {
  const home = join(dir, "home");
  // sh starts the daemon in the background, then becomes `sleep`, which never reaps it.
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const sh = spawn(
    "sh",
    [
      "-c",
      `${q(process.execPath)} ${q(DAEMON_PROC)} ${q(home)} '{}' '{"enabled":false}' >/dev/null 2>&1 & exec sleep 600`,
    ],
    { stdio: "ignore" },
  );
  parents.push(sh.pid!);
  const pid = await until(
    "the first daemon's pid file",
    () => {
      try {
        const n = Number.parseInt(readFileSync(join(home, "daemon.pid"), "utf8"), 10);
        return n > 0 ? n : undefined;
      } catch {
        return undefined;
      }
    },
    60_000,
  );
  await until(
    "the first daemon serves",
    async () => {
      try {
        (await cliClient(home)).close();
        return true;
      } catch {
        return undefined;
      }
    },
    60_000,
  );
  process.kill(pid, "SIGKILL");
  await until("the killed daemon is a zombie", () => (stateOf(pid) === "Z" ? true : undefined), 30_000);
  assert.doesNotThrow(() => process.kill(pid, 0), "the zombie answers kill(pid, 0)");

  const d = await startDaemonProc(home, {}, { config: { enabled: false } });
  try {
    const cli = await cliClient(home);
    assert.equal((await cli.request("daemon.status")).pid, d.pid);
    cli.close();
    assert.equal(Number.parseInt(readFileSync(join(home, "daemon.pid"), "utf8"), 10), d.pid);
    // The new daemon is live and serving: a third is refused, naming it.
    const third = await startDaemonProc(home, {}, { config: { enabled: false } }).then(
      (p) => (p.proc.kill("SIGKILL"), "started"),
      (e: Error) => e.message,
    );
    assert.match(third, new RegExp(`DAEMON_RUNNING.*pid ${d.pid}`));
  } finally {
    d.proc.kill("SIGTERM");
    await d.exited;
  }
});

test("a failed start quotes only its own log lines, not an older run's", async () => {
  const home = join(dir, "home-badcfg");
  mkdirSync(home, { recursive: true, mode: 0o700 });
  appendFileSync(
    join(home, "daemon.log"),
    ["OLD-RUN line one", "OLD-RUN line two", "OLD-RUN line three", ""].join("\n"),
  );
  writeFileSync(join(home, "config.json"), '{"maxParallelAgents": "lots"}');
  const err = await startDaemon(home, { timeoutMs: 60_000 }).then(
    () => assert.fail("the start should fail on the bad config"),
    (e: { code: string; message: string }) => e,
  );
  assert.equal(err.code, "DAEMON_UNAVAILABLE");
  assert.match(err.message, /exited at start/);
  assert.match(err.message, /CONFIG_INVALID|maxParallelAgents/);
  assert.doesNotMatch(err.message, /OLD-RUN/);
});
