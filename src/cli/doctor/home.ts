// The daemon's home: the directory and its socket, config.json, and the free disk under it.
import { existsSync, mkdirSync, rmdirSync, statSync, statfsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fsError } from "../../store/fsio.js";
import { probeHomeWritable } from "../../store/home.js";
import type { CheckResult, DoctorContext } from "./types.js";

const LOW_DISK = 200 * 1024 * 1024;
const WARN_DISK = 1024 * 1024 * 1024;

export function checkHome(home: string): CheckResult[] {
  if (!existsSync(home)) {
    // Whether it can be created: the nearest existing folder takes a probe folder (removed at once).
    let parent = dirname(home);
    while (!existsSync(parent) && dirname(parent) !== parent) parent = dirname(parent);
    const probe = join(parent, `.dsh-herdr-probe-${process.pid}`);
    try {
      mkdirSync(probe);
      rmdirSync(probe);
    } catch (e) {
      return [unwritable(home, fsError(e, `create the home ${home} (in ${parent})`))];
    }
    return [{ name: "home", level: "ok", detail: `${home} does not exist yet (created on first use)` }];
  }
  const out: CheckResult[] = [];
  const st = statSync(home);
  // Writability is what the daemon needs, not only the mode: write a probe file (what every command does first).
  if (st.isDirectory()) {
    try {
      probeHomeWritable(home);
    } catch (e) {
      return [unwritable(home, e)];
    }
  }
  const mode = st.mode & 0o777;
  if (!st.isDirectory())
    out.push({
      name: "home",
      level: "fail",
      detail: `${home} is not a directory`,
      fix: `move it away or set DSH_HERDR_HOME to another path`,
    });
  else if (mode & 0o077)
    out.push({
      name: "home",
      level: "fail",
      detail: `${home} has mode ${mode.toString(8)}; others can reach the socket`,
      fix: `chmod 700 ${home}`,
    });
  else if (typeof process.getuid === "function" && st.uid !== process.getuid())
    out.push({
      name: "home",
      level: "fail",
      detail: `${home} belongs to uid ${st.uid}, not you`,
      fix: `set DSH_HERDR_HOME to a directory you own`,
    });
  else out.push({ name: "home", level: "ok", detail: `${home} (mode 700)` });
  const sock = join(home, "daemon.sock");
  if (existsSync(sock)) {
    const smode = statSync(sock).mode & 0o777;
    out.push(
      smode & 0o077
        ? {
            name: "socket",
            level: "fail",
            detail: `${sock} has mode ${smode.toString(8)}`,
            fix: `stop the daemon (dsh-herdr daemon stop) and chmod 600 ${sock}, or restart it`,
          }
        : { name: "socket", level: "ok", detail: `${sock} (mode 600)` },
    );
  }
  return out;
}

function unwritable(home: string, e: unknown): CheckResult {
  const err = e as { code?: string; message?: string };
  const said = (err.message ?? String(e)).replace(/\. Free space or fix .*$/s, "");
  return {
    name: "home",
    level: "fail",
    detail: err.code === "HOME_UNWRITABLE" ? `${said}; every command would fail with HOME_UNWRITABLE` : said,
    fix: `make it writable (chmod u+w ${home}, a read-write mount, free space) or set DSH_HERDR_HOME to a directory you can write`,
  };
}

export async function checkConfig(ctx: DoctorContext): Promise<CheckResult> {
  const file = join(ctx.home, "config.json");
  if (!existsSync(file)) return { name: "config", level: "ok", detail: "no config.json (defaults apply)" };
  try {
    if (ctx.validateConfig) await ctx.validateConfig(ctx.home);
    else JSON.parse(await readFile(file, "utf8"));
    return { name: "config", level: "ok", detail: `${file} is valid` };
  } catch (e) {
    // Not `config set`: it reads the file first and fails on the same problem.
    return { name: "config", level: "fail", detail: `${file}: ${(e as Error).message}`, fix: `edit or delete ${file}` };
  }
}

export function checkDisk(home: string): CheckResult {
  let dir = home;
  while (!existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir);
  const fs = statfsSync(dir);
  const free = fs.bavail * fs.bsize;
  const mb = Math.floor(free / (1024 * 1024));
  if (free < LOW_DISK)
    return {
      name: "disk",
      level: "fail",
      detail: `${mb} MiB free at ${dir}`,
      fix: "free disk space (worktrees and patches need room) or run `dsh-herdr gc`",
    };
  if (free < WARN_DISK)
    return {
      name: "disk",
      level: "warn",
      detail: `${mb} MiB free at ${dir}`,
      fix: "free some disk space or run `dsh-herdr gc`",
    };
  return { name: "disk", level: "ok", detail: `${mb} MiB free at ${dir}` };
}
