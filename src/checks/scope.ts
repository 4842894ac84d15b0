// A scope for a check or setup command that nothing it starts can leave: a cgroup v2 of its own, under the daemon's
// cgroup. A process group is not enough: `setsid` (or a daemonizing double fork) starts a new group and session, and
// `env -i` drops any environment mark, yet a cgroup keeps every descendant whatever it does. The command's shell
// puts itself in the scope before it runs anything (the wrapper in run-check.ts), and ending the scope
// (cgroup.kill, or SIGKILL to each member where the kernel has no cgroup.kill) ends all of it.
//
// Linux with a cgroup v2 hierarchy the daemon may write (root, or a delegated cgroup) only; elsewhere there is no
// scope and the process group is the bound (docs/reliability.md says what escapes it).
import { mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface Scope {
  /** The cgroup directory. */
  dir: string;
  /** The file a process writes its pid into to join. */
  procs: string;
}

const SETTLE_MS = 2000;

let base: string | null | undefined;

/** The daemon's own cgroup v2 directory, or null where there is none to use. */
function ownCgroup(): string | null {
  try {
    const mount = readFileSync("/proc/self/mountinfo", "utf8")
      .split("\n")
      .map((l) => l.split(" "))
      .find((f) => f[f.indexOf("-") + 1] === "cgroup2")?.[4];
    const own = readFileSync("/proc/self/cgroup", "utf8")
      .split("\n")
      .find((l) => l.startsWith("0::"))
      ?.slice(3);
    if (mount === undefined || own === undefined) return null;
    return join(mount, own);
  } catch {
    return null;
  }
}

/** Where the scopes go: `dsh-herdr` under the daemon's cgroup, once made; null when it cannot be. */
function scopeBase(): string | null {
  if (base !== undefined) return base;
  const own = ownCgroup();
  base = null;
  if (own === null) return null;
  try {
    const dir = join(own, "dsh-herdr");
    mkdirSync(dir, { recursive: true });
    base = dir;
    sweepStale(dir);
  } catch {
    // not ours to write (a non-root user without a delegated cgroup): no scope
  }
  return base;
}

/** Whether a process runs with this pid (a zombie runs nothing). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) [ZX]/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/**
 * Scopes left by a daemon that is gone (killed outright during a setup or check): what still runs in them is ended
 * and the empty ones removed. A scope whose daemon pid runs (this daemon, another home's) is never touched.
 */
function sweepStale(dir: string): void {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const n of names) {
    const pid = Number(/-(\d+)-[0-9a-z]+$/.exec(n)?.[1]);
    if (!Number.isSafeInteger(pid) || pid <= 1 || pid === process.pid || running(pid)) continue;
    const scope = join(dir, n);
    try {
      writeFileSync(join(scope, "cgroup.kill"), "1");
    } catch {
      // gone, or a kernel without cgroup.kill: the members are left to the recovery of their task
    }
    try {
      rmdirSync(scope);
    } catch {
      // still emptying: the next sweep removes it
    }
  }
}

/** A new, empty scope named after `name` (a task id and what runs), or undefined where cgroups cannot be used. */
export function openScope(name: string): Scope | undefined {
  const b = scopeBase();
  if (b === null) return undefined;
  const dir = join(b, `${name.replace(/[^A-Za-z0-9_.-]/g, "_")}-${process.pid}-${Date.now().toString(36)}`);
  try {
    mkdirSync(dir);
    return { dir, procs: join(dir, "cgroup.procs") };
  } catch {
    return undefined;
  }
}

function members(s: Scope): number[] {
  try {
    return readFileSync(s.procs, "utf8")
      .split("\n")
      .filter((l) => l !== "")
      .map(Number);
  } catch {
    return [];
  }
}

/** End everything in the scope (SIGKILL), wait until it is empty, and remove it. True when it is gone. */
export async function endScope(s: Scope): Promise<boolean> {
  const kill = () => {
    try {
      writeFileSync(join(s.dir, "cgroup.kill"), "1");
      return;
    } catch {
      // a kernel before 5.14: each member by hand
    }
    for (const pid of members(s))
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone meanwhile
      }
  };
  const deadline = Date.now() + SETTLE_MS;
  for (;;) {
    if (members(s).length > 0) kill();
    try {
      rmdirSync(s.dir);
      return true;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return true;
      if (Date.now() > deadline) return false;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The argv that runs `command` under /bin/sh inside the scope: the shell joins it before anything runs. */
export function scopedArgv(command: string, s: Scope | undefined): string[] {
  if (s === undefined) return ["-c", command];
  // $0 the scope's procs file, $1 the command: the joined shell replaces itself with the command's shell.
  return ["-c", 'echo $$ > "$0" 2>/dev/null; exec /bin/sh -c "$1"', s.procs, command];
}
