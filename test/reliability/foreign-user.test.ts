// Home permissions and a second local user (issue 13 §7), with a real second Unix account (useradd; removed after)
// and the real CLI run as that user (runuser). Needs root; skips, naming why, otherwise.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startDaemonProc, type DaemonProc } from "./proc-harness.js";
import { dshBin, runCliSync } from "../helpers/cli.js";

const cli = dshBin;
const isRoot = process.getuid?.() === 0;
const hasTools = spawnSync("sh", ["-c", "command -v useradd && command -v userdel && command -v runuser"]).status === 0;
const skip = !isRoot ? "needs root (useradd)" : !hasTools ? "needs useradd, userdel and runuser" : false;

let dir: string;
let home: string;
let d: DaemonProc | undefined;
const user = `dshfu${randomBytes(3).toString("hex")}`;
let uid = -1;
let userHome: string;

before(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), "dsh-foreign-"));
  chmodSync(dir, 0o755); // the other user can reach the home's path; only the home itself is private
  home = join(dir, "home");
  // An existing home with mode 0755 (an older version, or made by hand).
  mkdirSync(home, { mode: 0o755 });
  chmodSync(home, 0o755);
  execFileSync("useradd", ["-M", "-s", "/bin/sh", user]);
  uid = Number(execFileSync("id", ["-u", user], { encoding: "utf8" }).trim());
  userHome = join(dir, "other-user");
  mkdirSync(userHome, { mode: 0o700 });
  chownSync(userHome, uid, uid);
  d = await startDaemonProc(home, {}, { config: { enabled: false } });
});
after(async () => {
  if (skip) return;
  if (d) {
    d.proc.kill("SIGTERM");
    await d.exited;
  }
  spawnSync("userdel", ["-r", user], { stdio: "ignore" });
  rmSync(dir, { recursive: true, force: true });
});

/** The real CLI as the second user, pointed at our home. */
function asOther(...args: string[]): { status: number | null; stderr: string; stdout: string } {
  const r = spawnSync(
    "runuser",
    ["-u", user, "--", "env", `HOME=${userHome}`, `DSH_HERDR_HOME=${home}`, process.execPath, cli, ...args],
    { encoding: "utf8", timeout: 60_000 },
  );
  return { status: r.status, stderr: r.stderr, stdout: r.stdout };
}

test("a home that exists with mode 0755 is tightened to 0700 when the daemon starts", { skip }, () => {
  assert.equal((statSync(home).mode & 0o777).toString(8), "700");
});

test("a second local user reaching the home gets HOME_NOT_YOURS naming the fix, from list and from daemon start", {
  skip,
}, () => {
  for (const args of [["list"], ["daemon", "start"], ["daemon", "status"]]) {
    const r = asOther(...args);
    assert.notEqual(r.status, 0, `${args.join(" ")}: ${r.stdout}`);
    assert.match(r.stderr, /HOME_NOT_YOURS/, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, new RegExp(`uid ${uid}\\)`), r.stderr);
    assert.match(r.stderr, /DSH_HERDR_HOME/);
    assert.doesNotMatch(r.stderr, /INTERNAL|EACCES|DAEMON_UNAVAILABLE/, r.stderr);
  }
  // Our daemon is untouched and still serves its owner.
  const mine = runCliSync(["list"], { env: { ...process.env, DSH_HERDR_HOME: home }, timeoutMs: 60_000 });
  assert.equal(mine.code, 0, mine.err);
});
