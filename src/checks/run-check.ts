// One check (a shell command such as `npm test`) run in a directory the daemon's way: in its own process group, its
// output (stdout and stderr as they come) into a log file up to a cap, with a timeout. A check that hangs or floods
// is ended, the whole group, and its receipt says so by name; nothing it does can stall the caller. Where the machine
// allows it, the command also runs in a cgroup scope of its own (scope.ts): what it started outside its group
// (`setsid`, a double fork) ends with it too.
import { open } from "node:fs/promises";
import type { CheckReceipt, CheckTree } from "../core/types.js";
import { runProcess } from "../process/run.js";
import { endScope, openScope, scopedArgv } from "./scope.js";

export interface CheckLimits {
  /** Ended (SIGTERM to its group, SIGKILL 2 s later) after this long. */
  timeoutMs: number;
  /** Ended once its output passes this many bytes; the log keeps the first outputCapBytes. */
  outputCapBytes: number;
}

export const DEFAULT_CHECK_LIMITS: CheckLimits = { timeoutMs: 10 * 60_000, outputCapBytes: 8 * 1024 * 1024 };

export interface RunCheckOptions extends CheckLimits {
  command: string;
  cwd: string;
  logPath: string;
  env?: NodeJS.ProcessEnv;
  on?: CheckTree;
  /** Epoch ms now (tests pass a clock). */
  now?: () => number;
  /** Aborted: the command's group is ended (SIGTERM, SIGKILL after the grace), the receipt names the signal. */
  signal?: AbortSignal;
  /** Told the command's process group id (its shell's pid) once it started. */
  onSpawn?: (pgid: number) => void;
  /** Names its cgroup scope (e.g. `setup-<taskId>`), for whoever reads the cgroup tree. */
  scopeName?: string;
}

/** How much of the output's end the receipt carries. */
const TAIL_BYTES = 2048;
const TAIL_LINES = 20;
const KILL_GRACE_MS = 2000;

// Variables that would point git (run by a check, e.g. a test suite's own git calls) at the daemon's idea of a repo.
const STRIPPED = ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR"];

function checkEnv(env: NodeJS.ProcessEnv | undefined): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...(env ?? process.env) };
  for (const k of STRIPPED) delete out[k];
  return out;
}

/** The last lines of the output, cut at a line start where it can be. */
export function tailOf(buf: Buffer): string {
  let text = buf.subarray(Math.max(0, buf.length - TAIL_BYTES)).toString("utf8");
  if (buf.length > TAIL_BYTES) text = text.replace(/^[^\n]*\n?/, "").replace(/^\uFFFD+/, "");
  const lines = text.split("\n");
  const keep = lines.length > TAIL_LINES + 1 ? lines.slice(-(TAIL_LINES + 1)) : lines;
  return keep.join("\n");
}

export async function runCheck(opts: RunCheckOptions): Promise<CheckReceipt> {
  const now = opts.now ?? Date.now;
  const log = await open(opts.logPath, "w", 0o600);
  const startedAt = now();
  let written = 0;
  let tail = Buffer.alloc(0);
  let writes = Promise.resolve();
  // The log keeps the first outputCapBytes as they come; the group is ended once the output passes them.
  const onOutput = (chunk: Buffer) => {
    const room = opts.outputCapBytes - written;
    const kept = room >= chunk.length ? chunk : chunk.subarray(0, Math.max(0, room));
    if (kept.length === 0) return;
    written += kept.length;
    tail = Buffer.concat([tail, kept]);
    if (tail.length > TAIL_BYTES * 2) tail = tail.subarray(tail.length - TAIL_BYTES);
    const data = Buffer.from(kept);
    writes = writes.then(() => log.write(data).then(() => undefined));
  };
  // Everything the command starts, whatever group or session it makes, stays in this scope and ends with it.
  const scope = openScope(opts.scopeName ?? "check");
  const run = await runProcess({
    file: "/bin/sh",
    args: scopedArgv(opts.command, scope),
    cwd: opts.cwd,
    env: checkEnv(opts.env),
    timeoutMs: opts.timeoutMs,
    graceMs: KILL_GRACE_MS,
    maxOutputBytes: opts.outputCapBytes,
    keepBytes: 0, // the log and the tail above keep it
    ...(opts.signal !== undefined ? { signal: opts.signal } : {}),
    onOutput,
    ...(opts.onSpawn !== undefined ? { onSpawn: opts.onSpawn } : {}),
  });
  if (scope) await endScope(scope); // what it started outside its group
  // A cancel is not a cut-off: the receipt names the signal that ended it.
  const cutOff: CheckReceipt["cutOff"] =
    run.ended === "timeout" ? "timeout" : run.ended === "output" ? "output" : undefined;
  if (run.cancelled && run.pid === undefined) {
    const note = Buffer.from("dsh-herdr: not run: cancelled before it started\n");
    tail = Buffer.concat([tail, note]);
    writes = writes.then(() => log.write(note).then(() => undefined));
  }
  if (run.spawnError !== undefined) {
    const note = Buffer.from(`dsh-herdr: could not run the check: ${run.spawnError}\n`);
    tail = Buffer.concat([tail, note]);
    writes = writes.then(() => log.write(note).then(() => undefined));
  }
  if (cutOff !== undefined) {
    const note = Buffer.from(
      cutOff === "timeout"
        ? `\ndsh-herdr: cut off: still running after ${opts.timeoutMs} ms (its timeout)\n`
        : `\ndsh-herdr: cut off: its output passed ${opts.outputCapBytes} bytes (the cap)\n`,
    );
    tail = Buffer.concat([tail, note]);
    writes = writes.then(() => log.write(note).then(() => undefined));
  }
  await writes.catch(() => undefined);
  await log.close();
  const receipt: CheckReceipt = {
    command: opts.command,
    exitCode: cutOff === undefined && run.spawnError === undefined ? run.exitCode : null,
    durationMs: run.durationMs,
    startedAt,
    logPath: opts.logPath,
    outputTail: tailOf(tail),
  };
  if (cutOff !== undefined) receipt.cutOff = cutOff;
  if (run.signal) receipt.signal = run.signal;
  if (opts.on !== undefined) receipt.on = opts.on;
  return receipt;
}
