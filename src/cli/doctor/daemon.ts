// The running daemon: does it launch children with the environment of this shell?
import { daemonStatus } from "../../client/daemon-control.js";
import { resolvePiBin } from "../../pi/launch.js";
import type { CheckResult } from "./types.js";

/** What the running daemon's children get vs this shell: a daemon started elsewhere runs another pi or pi dir. */
export async function checkDaemonEnv(home: string, env: NodeJS.ProcessEnv): Promise<CheckResult> {
  const s = await daemonStatus(home).catch(() => ({ running: false }) as Record<string, unknown>);
  if (!s.running)
    return {
      name: "daemon",
      level: "ok",
      detail: "no daemon running (the next command starts one with this environment)",
    };
  const de = s.env as { piBin: string | null; piDir: string | null; path: string } | undefined;
  const restart = "restart the daemon: dsh-herdr daemon stop (the next command starts it with this environment)";
  if (!de)
    return {
      name: "daemon",
      level: "warn",
      detail: `the running daemon (pid ${String(s.pid)}) does not report its environment`,
      fix: restart,
    };
  let myPi: string | null = null;
  try {
    myPi = resolvePiBin(env);
  } catch {
    // compared as "none"
  }
  const diffs: string[] = [];
  if ((env.PI_CODING_AGENT_DIR ?? null) !== de.piDir)
    diffs.push(`PI_CODING_AGENT_DIR ${de.piDir ?? "(unset)"} there, ${env.PI_CODING_AGENT_DIR ?? "(unset)"} here`);
  if (myPi !== de.piBin) diffs.push(`pi ${de.piBin ?? "(none)"} there, ${myPi ?? "(none)"} here`);
  if ((env.PATH ?? "") !== de.path) diffs.push("PATH differs");
  if (diffs.length === 0)
    return {
      name: "daemon",
      level: "ok",
      detail: `the running daemon (pid ${String(s.pid)}) has this pi, pi dir and PATH`,
    };
  return {
    name: "daemon",
    level: "warn",
    detail: `the running daemon (pid ${String(s.pid)}) runs children with another environment: ${diffs.join("; ")}`,
    fix: restart,
  };
}
