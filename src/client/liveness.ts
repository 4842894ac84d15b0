// Is a daemon really there? kill(pid, 0) also succeeds on a zombie (a SIGKILLed daemon nobody reaped: a container
// whose PID 1 is a shell), and on an unrelated process that reused the pid. Liveness here means "serves".
import { readFileSync } from "node:fs";
import { createConnection } from "node:net";

/** The one-letter state of /proc/<pid>/stat (R, S, D, Z, ...), or undefined without /proc or the process. */
export function procState(pid: number): string | undefined {
  try {
    // The command name may contain spaces and ")": the state follows the last ") ".
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(") ") + 2)[0];
  } catch {
    return undefined;
  }
}

/** A process exists and is not a zombie (EPERM: it exists under another user). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  return procState(pid) !== "Z";
}

/** Epoch ms the process started (Linux /proc), or undefined when it cannot be told. */
export function processStartMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(") ") + 2).split(" ");
    const ticks = Number(fields[19]); // field 22 (starttime), counted from the state (field 3)
    const btime = Number(/^btime (\d+)$/m.exec(readFileSync("/proc/stat", "utf8"))?.[1]);
    // USER_HZ is 100 on every Linux build Node runs on.
    return Number.isFinite(ticks) && Number.isFinite(btime) ? btime * 1000 + ticks * 10 : undefined;
  } catch {
    return undefined;
  }
}

/** True when something accepts a connection on the Unix socket within timeoutMs. */
export function socketAccepts(path: string, timeoutMs = 2000): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection(path);
    const done = (ok: boolean) => {
      clearTimeout(t);
      s.destroy();
      resolve(ok);
    };
    const t = setTimeout(() => done(false), timeoutMs);
    s.once("connect", () => done(true));
    s.once("error", () => done(false));
  });
}
