// One daemon per home: proper-lockfile on <home>/daemon.lock plus a pid file, so a lock left by a dead
// daemon is cleared at once (not only after proper-lockfile's staleness window) and a live one is reported.
import { rmSync, statSync, writeFileSync } from "node:fs";
import { readBoundedSync } from "../store/fsio.js";
import { join } from "node:path";
import lockfile from "proper-lockfile";
import { DshError } from "../core/errors.js";
import { pidAlive as processAlive, processStartMs, socketAccepts } from "../client/liveness.js";

export interface DaemonLock {
  release(): Promise<void>;
}

export function pidFile(home: string): string {
  return join(home, "daemon.pid");
}

export function readPid(home: string): number | undefined {
  try {
    // Checked and bounded (a FIFO under the name would block the open): fsio.ts.
    const pid = Number.parseInt(readBoundedSync(pidFile(home), { maxBytes: 64 })?.toString("utf8") ?? "", 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Alive and not a zombie (a SIGKILLed daemon nobody reaped still answers kill(pid, 0)). */
export function pidAlive(pid: number): boolean {
  return processAlive(pid);
}

/**
 * The holder of the pid file still holds the home: it serves the socket, or it is the process that wrote the pid
 * file and has not got to serving yet (recovery runs before the socket is served). A process that started after the
 * pid file was written reused the pid of a dead daemon.
 */
async function holderLive(home: string, pid: number): Promise<boolean> {
  if (!pidAlive(pid)) return false;
  if (await socketAccepts(join(home, "daemon.sock"))) return true;
  const started = processStartMs(pid);
  const written = statSync(pidFile(home), { throwIfNoEntry: false })?.mtimeMs;
  // Started-time ticks are 10 ms: a process started more than a second after the pid file is not its writer.
  return started === undefined || written === undefined || started <= written + 1000;
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
    if (pid !== undefined && (await holderLive(home, pid))) {
      throw new DshError(
        "DAEMON_RUNNING",
        `a daemon (pid ${pid}) already serves ${home}; use it, or stop it with \`dsh-herdr daemon stop\``,
        { pid },
      );
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
