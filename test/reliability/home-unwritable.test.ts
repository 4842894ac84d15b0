// A home that cannot be created or written, through the real CLI binary: a read-only parent (the home does not exist
// yet), an existing home on a read-only filesystem, and an existing home on a full disk. doctor FAILs the home and
// every command that needs to write it says HOME_UNWRITABLE naming the errno (EROFS, ENOSPC), never INTERNAL or a raw
// errno. The filesystems are small tmpfs mounts (we run as root: permission bits would not stop a write).
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCliSync } from "../helpers/cli.js";

const base = mkdtempSync(join(tmpdir(), "dsh-unwritable-"));
const mounts: string[] = [];
after(() => {
  for (const m of mounts.reverse()) execFileSync("umount", ["-l", m], { stdio: "pipe" });
  rmSync(base, { recursive: true, force: true });
});

/** A fresh tmpfs at base/name; a string naming why when it cannot be mounted (the test then skips). */
function tmpfs(name: string, size: string): string | { skip: string } {
  const dir = join(base, name);
  mkdirSync(dir, { mode: 0o700 });
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size},mode=0700`, "tmpfs", dir], { stdio: "pipe" });
  } catch (e) {
    return { skip: `mount -t tmpfs failed (${String((e as Error).message).split("\n")[0]}); needs root` };
  }
  mounts.push(dir);
  return dir;
}

const readOnly = (dir: string) => execFileSync("mount", ["-o", "remount,ro", dir], { stdio: "pipe" });

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
const cli = (env: NodeJS.ProcessEnv, args: string[]) => runCliSync(args, { env, timeoutMs: 60_000 });

/** Every command that writes the home: HOME_UNWRITABLE with `errno` and the fix, exit 1, no INTERNAL. */
function assertUnwritable(env: NodeJS.ProcessEnv, errno: string, why: RegExp, more: string[][] = []): void {
  for (const args of [["daemon", "start"], ["spawn", "--prompt", "hi", "--cwd", base], ...more]) {
    const r = cli(env, args);
    assert.equal(r.code, 1, `${args.join(" ")}: ${r.out}${r.err}`);
    assert.match(
      r.err,
      new RegExp(`^dsh-herdr: HOME_UNWRITABLE: .*\\(${errno}\\)`, "m"),
      `${args.join(" ")}: ${r.err}`,
    );
    assert.match(r.err, why, args.join(" "));
    assert.match(r.err, /DSH_HERDR_HOME/, args.join(" "));
    assert.doesNotMatch(r.err, /INTERNAL/, args.join(" "));
  }
  const d = cli(env, ["doctor"]);
  assert.equal(d.code, 1);
  assert.match(
    d.out,
    new RegExp(`^FAIL\\s+home\\s+cannot (write in|create) .*\\(${errno}\\).*HOME_UNWRITABLE.*fix: `, "m"),
    d.out,
  );
}

test("a home that does not exist yet under a read-only parent: doctor FAILs it, every command says HOME_UNWRITABLE (EROFS)", (t) => {
  const parent = tmpfs("ro-parent", "1m");
  if (typeof parent !== "string") return t.skip(parent.skip);
  readOnly(parent);
  assertUnwritable(envFor(join(parent, "herdr")), "EROFS", /read-only/);
});

test("an existing home on a read-only filesystem: doctor FAILs it, every command says HOME_UNWRITABLE (EROFS)", (t) => {
  const fs = tmpfs("ro-home", "1m");
  if (typeof fs !== "string") return t.skip(fs.skip);
  const home = join(fs, "herdr");
  const env = envFor(home);
  const started = cli(env, ["daemon", "start"]);
  assert.equal(started.code, 0, started.err);
  assert.equal(cli(env, ["daemon", "stop"]).code, 0);
  readOnly(fs);
  // gc records its dry run in the home (a raw EROFS from a plain writeFileSync before).
  assertUnwritable(env, "EROFS", /read-only/, [["gc"]]);
});

test("daemon start on a full disk says HOME_UNWRITABLE (ENOSPC), not a raw ENOSPC or an empty log", (t) => {
  const fs = tmpfs("full", "256k");
  if (typeof fs !== "string") return t.skip(fs.skip);
  const home = join(fs, "herdr");
  const env = envFor(home);
  mkdirSync(home, { mode: 0o700 });
  // Fill every page, then the last bytes.
  const fd = openSync(join(fs, "filler"), "w");
  for (const chunk of [Buffer.alloc(4096, 120), Buffer.from("\n")]) {
    try {
      for (;;) writeSync(fd, chunk);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOSPC") throw e;
    }
  }
  closeSync(fd);
  const r = cli(env, ["daemon", "start"]);
  assert.equal(r.code, 1, r.out + r.err);
  assert.match(r.err, /^dsh-herdr: HOME_UNWRITABLE: .*the disk is full \(ENOSPC\)/m, r.err);
  assert.doesNotMatch(r.err, /INTERNAL|DAEMON_UNAVAILABLE/);
});
