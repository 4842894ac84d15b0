// Starting, stopping and asking after the daemon of a home from outside it (CLI, extensions, tests).
import { spawn } from "node:child_process";
import { openSync, closeSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { DshError } from "../core/errors.js";
import { fsError } from "../store/fsio.js";
import { createHomeDir, probeHomeWritable } from "../store/home.js";
import { call, connect, socketPathFor, type DaemonClient } from "./index.js";
import { pidAlive } from "./liveness.js";

const packageRoot = join(import.meta.dirname, "..", "..", "..");
export const daemonMain = join(packageRoot, "dist", "src", "daemon", "main.js");
/**
 * Node flags of every daemon process (detached, foreground, the systemd unit's through `daemon run`, the benches').
 * V8's young generation otherwise grows to 3 × 16 MB: a daemon holding 1,000 open tasks read 121-126 MB RSS, with
 * this cap 103-106 MB, and its scavenges, more of them but each shorter, did not lengthen the status or `task.wait`
 * tail at N=100 (docs/performance.md, 2026-12-05).
 */
export const DAEMON_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=4"];

export interface DaemonStatus {
  running: boolean;
  pid?: number;
  version?: string;
  socketPath: string;
  [key: string]: unknown;
}

export async function daemonStatus(home: string): Promise<DaemonStatus> {
  const socketPath = socketPathFor(home);
  try {
    const s = await call(home, "daemon.status", {}, { timeoutMs: 5000 });
    return { ...s, running: true, socketPath };
  } catch (e) {
    if ((e as DshError).code === "DAEMON_UNAVAILABLE") return { running: false, socketPath };
    throw e;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Start a detached daemon for `home` and return once its socket answers; reports a running one instead. */
export async function startDaemon(
  home: string,
  opts: { timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<{ pid: number; alreadyRunning: boolean }> {
  const before = await daemonStatus(home);
  if (before.running) return { pid: before.pid!, alreadyRunning: true };
  // A full or read-only home is named here: the daemon could not even log why it stopped.
  createHomeDir(home);
  probeHomeWritable(home);
  const logPath = join(home, "daemon.log");
  // A failed start quotes only what this start wrote, never an older run's lines.
  const logStart = statSync(logPath, { throwIfNoEntry: false })?.size ?? 0;
  let out: number;
  try {
    out = openSync(logPath, "a", 0o600);
  } catch (e) {
    throw fsError(e, `open ${logPath}`);
  }
  const child = spawn(process.execPath, [...DAEMON_NODE_FLAGS, daemonMain, "run", "--home", home], {
    detached: true,
    stdio: ["ignore", out, out],
    env: opts.env ?? process.env,
  });
  closeSync(out);
  let exited: number | null | undefined;
  child.on("exit", (code) => (exited = code));
  child.unref();
  const deadline = Date.now() + (opts.timeoutMs ?? 20_000);
  while (Date.now() < deadline) {
    if (exited !== undefined) {
      const s = await daemonStatus(home);
      if (s.running) return { pid: s.pid!, alreadyRunning: true }; // another start won the race
      throw new DshError(
        "DAEMON_UNAVAILABLE",
        `the daemon exited at start (code ${exited}): ${lastLines(logPath, logStart)}; fix that and run \`dsh-herdr daemon start\` again`,
      );
    }
    const s = await daemonStatus(home);
    if (s.running) return { pid: s.pid!, alreadyRunning: s.pid !== child.pid };
    await sleep(100);
  }
  throw new DshError(
    "DAEMON_UNAVAILABLE",
    `the daemon did not answer on ${socketPathFor(home)} within ${opts.timeoutMs ?? 20_000} ms; see ${logPath}`,
  );
}

function lastLines(path: string, from: number): string {
  try {
    const text = readFileSync(path).subarray(from).toString("utf8").trim();
    return text === "" ? "it logged nothing" : text.split("\n").slice(-3).join(" | ").slice(-500);
  } catch {
    return "no log";
  }
}

/** Graceful stop: the daemon stops accepting, flushes journals and exits; open tasks keep running. */
export async function stopDaemon(
  home: string,
  opts: { timeoutMs?: number } = {},
): Promise<{ wasRunning: boolean; pid?: number }> {
  const s = await daemonStatus(home);
  if (!s.running) return { wasRunning: false };
  await call(home, "daemon.stop", {}).catch(() => undefined);
  const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
  while (Date.now() < deadline) {
    if (!(await daemonStatus(home)).running && !alive(s.pid!)) return { wasRunning: true, pid: s.pid! };
    await sleep(100);
  }
  throw new DshError(
    "TIMEOUT",
    `the daemon (pid ${s.pid}) did not stop within ${opts.timeoutMs ?? 10_000} ms; send it SIGTERM (kill ${s.pid})`,
  );
}

function alive(pid: number): boolean {
  return pidAlive(pid);
}

/** A connection to the home's daemon, starting it on demand. */
export async function ensureDaemon(
  home: string,
  opts: { kind?: "cli" | "owner"; ownerId?: string } = {},
): Promise<DaemonClient> {
  const kind = opts.kind ?? "cli";
  const c = { kind, ...(opts.ownerId ? { ownerId: opts.ownerId } : {}) };
  try {
    return await connect(home, c);
  } catch (e) {
    if ((e as DshError).code !== "DAEMON_UNAVAILABLE") throw e;
  }
  await startDaemon(home);
  return connect(home, c);
}
