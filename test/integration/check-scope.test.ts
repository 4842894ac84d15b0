// What a check or setup starts ends with it, even a grandchild that left its process group and environment behind
// (`env -i setsid sleep 1000 &`, real processes): its cgroup v2 scope ends it. Where this machine gives the daemon
// no writable cgroup v2 the test is skipped, saying so (docs/reliability.md says what escapes there).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCheck } from "../../src/checks/run-check.js";
import { noScope } from "../helpers/cgroup.js";

const alive = (pid: number): boolean => {
  try {
    // A zombie is gone for this purpose: it runs nothing.
    return !/^\d+ \(.*\) [ZX]/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
};

const skip = noScope();

test("a check's grandchild started with `env -i setsid` ends when the check ends", {
  skip: skip ? `no scope possible: ${skip}` : false,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-scope-"));
  try {
    const pidFile = join(dir, "escaped.pid");
    const r = await runCheck({
      command: `env -i setsid sleep 1000 & echo $! > ${pidFile}; echo started`,
      cwd: dir,
      logPath: join(dir, "check.log"),
      timeoutMs: 30_000,
      outputCapBytes: 1 << 20,
    });
    assert.equal(r.exitCode, 0, r.outputTail);
    const pid = Number(readFileSync(pidFile, "utf8").trim());
    assert.ok(pid > 1);
    // It left the check's process group and session: only the scope can find it.
    const deadline = Date.now() + 5000;
    while (alive(pid) && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
    const stillThere = alive(pid);
    if (stillThere) process.kill(pid, "SIGKILL");
    assert.equal(stillThere, false, `the setsid grandchild ${pid} outlived its check`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
