// The headless runtime's files in the task directory, and the state record the wrapper writes at launch.
import { readBoundedSync } from "../../store/fsio.js";
import { dirname, join } from "node:path";
import { DshError } from "../../core/errors.js";
import type { ChildExit, RuntimeHandle } from "../types.js";

export interface HeadlessPaths {
  stdinPath: string;
  stdoutPath: string;
  stderrPath: string;
  exitPath: string;
  statePath: string;
}

/** Written by the wrapper once the child runs (headless.json): what a restarted daemon needs to find it. */
export interface HeadlessState {
  wrapperPid: number;
  wrapperStart?: number;
  childPid: number;
  childStart?: number;
  /** "rpc" when the child is `pi --mode rpc` (sendText writes RPC commands), else "raw" (text lines). */
  protocol: "rpc" | "raw";
  startedAt: string;
}

/** exit.json, written by the wrapper when the child ends. */
export interface HeadlessExit extends ChildExit {
  pid: number;
  endedAt: string;
}

export function pathsIn(taskDir: string): HeadlessPaths {
  return {
    stdinPath: join(taskDir, "stdin.fifo"),
    stdoutPath: join(taskDir, "stdout.log"),
    stderrPath: join(taskDir, "stderr.log"),
    exitPath: join(taskDir, "exit.json"),
    statePath: join(taskDir, "headless.json"),
  };
}

export function pathsOf(h: RuntimeHandle): HeadlessPaths & { pid: number } {
  if (
    h.runtime !== "headless" ||
    !h.exitPath ||
    !h.stdinPath ||
    !h.stdoutPath ||
    !h.stderrPath ||
    h.pid === undefined
  ) {
    throw new DshError(
      "BAD_PARAMS",
      `not a headless handle (runtime ${h.runtime}): pass the handle headless launch returned`,
    );
  }
  return {
    stdinPath: h.stdinPath,
    stdoutPath: h.stdoutPath,
    stderrPath: h.stderrPath,
    exitPath: h.exitPath,
    statePath: join(dirname(h.exitPath), "headless.json"),
    pid: h.pid,
  };
}

function readJson<T>(path: string): T | null {
  try {
    const buf = readBoundedSync(path, { maxBytes: 1024 * 1024 }); // a regular file, bounded, never blocking
    return buf === undefined ? null : (JSON.parse(buf.toString("utf8")) as T);
  } catch {
    return null;
  }
}

export const readState = (path: string): HeadlessState | null => readJson<HeadlessState>(path);
export const readExit = (path: string): HeadlessExit | null => readJson<HeadlessExit>(path);

/** `pi --mode rpc` (or --mode=rpc) speaks JSONL commands on stdin. */
export function protocolOf(argv: string[]): "rpc" | "raw" {
  return argv.some((a, i) => a === "--mode=rpc" || (a === "--mode" && argv[i + 1] === "rpc")) ? "rpc" : "raw";
}
