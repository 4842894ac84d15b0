// Starting, stopping and running the daemon of a home (wraps src/daemon/main.ts for the CLI), and the demo's
// runtime choice.
import { execa } from "execa";
import { DshError } from "../core/errors.js";
import { herdrPing } from "../runtime/herdr/client.js";

export interface StartOutcome { pid: number; alreadyRunning: boolean }
export interface StopOutcome { wasRunning: boolean }

export async function startDaemonFor(home: string, _opts: { env?: NodeJS.ProcessEnv } = {}): Promise<StartOutcome> {
  throw new DshError("DAEMON_UNAVAILABLE", `starting a daemon at ${home} is not wired yet`);
}

export async function stopDaemonFor(home: string): Promise<StopOutcome> {
  throw new DshError("DAEMON_UNAVAILABLE", `stopping the daemon at ${home} is not wired yet`);
}

export async function runDaemonForeground(home: string, _signal: AbortSignal): Promise<number | undefined> {
  throw new DshError("DAEMON_UNAVAILABLE", `running a daemon at ${home} is not wired yet`);
}

/** Herdr when a server answers ping, else tmux when installed, else headless (shared/design.md §8). */
export async function chooseDemoRuntime(env: NodeJS.ProcessEnv): Promise<"herdr" | "tmux" | "headless"> {
  if ((await herdrPing({ env, timeoutMs: 1500 })).ok) return "herdr";
  const tmux = await execa("tmux", ["-V"], { reject: false, stdin: "ignore" });
  return tmux.failed ? "headless" : "tmux";
}
