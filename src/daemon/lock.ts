// One daemon per home: proper-lockfile on <home>/daemon.lock plus a pid file, so a lock left by a dead
// daemon is cleared at once (not only after proper-lockfile's staleness window) and a live one is reported.
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import lockfile from "proper-lockfile";
import { DshError } from "../core/errors.js";

export interface DaemonLock {
  release(): Promise<void>;
}

export function pidFile(home: string): string {
  return join(home, "daemon.pid");
}

export function readPid(home: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(pidFile(home), "utf8"), 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

export async function acquireDaemonLock(home: string, onCompromised: (e: Error) => void): Promise<DaemonLock> {
  const lockPath = join(home, "daemon.lock");
  const opts = { lockfilePath: lockPath, realpath: false, stale: 15_000, update: 5_000, retries: 0, onCompromised };
  let release: () => Promise<void>;
  try {
    release = await lockfile.lock(home, opts);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ELOCKED") throw e;
    const pid = readPid(home);
    if (pid !== undefined && pidAlive(pid)) {
      throw new DshError("DAEMON_RUNNING", `a daemon (pid ${pid}) already serves ${home}; use it, or stop it with \`dsh-herdr daemon stop\``, { pid });
    }
    // The holder is dead: its lock is stale whatever its mtime says.
    rmSync(lockPath, { recursive: true, force: true });
    release = await lockfile.lock(home, opts);
  }
  writeFileSync(pidFile(home), `${process.pid}\n`, { mode: 0o600 });
  return {
    async release() {
      if (readPid(home) === process.pid) rmSync(pidFile(home), { force: true });
      await release().catch(() => undefined);
    },
  };
}
