// Starting, stopping and running the daemon of a home (wraps src/daemon/main.ts for the CLI).
import { DshError } from "../core/errors.js";

export interface StartOutcome { pid: number; alreadyRunning: boolean }
export interface StopOutcome { wasRunning: boolean }

export async function startDaemonFor(home: string): Promise<StartOutcome> {
  throw new DshError("DAEMON_UNAVAILABLE", `starting a daemon at ${home} is not wired yet`);
}

export async function stopDaemonFor(home: string): Promise<StopOutcome> {
  throw new DshError("DAEMON_UNAVAILABLE", `stopping the daemon at ${home} is not wired yet`);
}

export async function runDaemonForeground(home: string, _signal: AbortSignal): Promise<number | undefined> {
  throw new DshError("DAEMON_UNAVAILABLE", `running a daemon at ${home} is not wired yet`);
}
