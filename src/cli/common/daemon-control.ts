// Starting, stopping and running the daemon of a home for the CLI (src/client/daemon-control.ts does the work;
// `daemon run` execs the daemon's entry so the CLI never imports the daemon), and the demo's runtime choice.
import { spawn } from "node:child_process";
import { DAEMON_NODE_FLAGS, daemonMain, startDaemon, stopDaemon } from "../../client/daemon-control.js";

export interface StartOutcome {
  pid: number;
  alreadyRunning: boolean;
}
export interface StopOutcome {
  wasRunning: boolean;
  pid?: number;
}

export function startDaemonFor(home: string, opts: { env?: NodeJS.ProcessEnv } = {}): Promise<StartOutcome> {
  return startDaemon(home, opts.env ? { env: opts.env } : {});
}

export function stopDaemonFor(home: string): Promise<StopOutcome> {
  return stopDaemon(home);
}

/** The daemon in the foreground of this terminal; Ctrl+C (the signal) stops it gracefully. Resolves its exit code. */
export function runDaemonForeground(
  home: string,
  signal: AbortSignal,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...DAEMON_NODE_FLAGS, daemonMain, "run", "--home", home], {
      stdio: "inherit",
      env,
    });
    const onAbort = () => child.kill("SIGTERM");
    signal.addEventListener("abort", onAbort, { once: true });
    child.once("error", reject);
    child.once("exit", (code) => {
      signal.removeEventListener("abort", onAbort);
      resolve(code ?? 1);
    });
  });
}

/** Herdr when a server answers ping, else tmux when installed, else headless (shared/design.md §8). */
export async function chooseDemoRuntime(env: NodeJS.ProcessEnv): Promise<"herdr" | "tmux" | "headless"> {
  // Loaded here: starting or stopping a daemon needs neither (a CLI call's start-up, bench/cli-startup.ts).
  const { herdrPing } = await import("../../runtime/herdr/client.js");
  if ((await herdrPing({ env, timeoutMs: 1500 })).ok) return "herdr";
  const { execa } = await import("execa");
  const tmux = await execa("tmux", ["-V"], { reject: false, stdin: "ignore" });
  return tmux.failed ? "headless" : "tmux";
}

/** How to make a running daemon read the file again: systemd's restart when systemd runs it (INVOCATION_ID). */
export function restartHint(names: readonly string[] | undefined): string {
  return names?.includes("INVOCATION_ID")
    ? "systemctl --user restart dsh-herdr (the daemon runs under systemd; use your unit's name)"
    : "dsh-herdr daemon restart";
}
