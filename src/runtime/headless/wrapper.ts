// The headless child's keeper: started detached (its own process group) by the runtime, it spawns the real
// child in that group with stdin = the task's FIFO (opened read-write, so the child never sees EOF while it
// lives), stdout/stderr appended to the task's log files, records headless.json, and writes exit.json when the
// child ends. It outlives the daemon, so a restarted daemon still finds, talks to and reaps the child.
// Protocol: the spec arrives as JSON on stdin; one JSON line on stdout answers {ok, childPid} or {ok:false, error}.
import { spawn } from "node:child_process";
import { closeSync, constants, openSync, readFileSync, writeSync } from "node:fs";
import { constants as osConstants } from "node:os";
// Not write-file-atomic: it ignores a short write on a full disk (src/store/fsio.ts says more).
import { writeAtomic } from "../../store/fsio.js";
import { readProcStat } from "../proc.js";
import type { HeadlessExit, HeadlessPaths, HeadlessState } from "./files.js";

export interface WrapperSpec extends HeadlessPaths {
  argv: string[];
  env: Record<string, string>;
  cwd: string;
  protocol: "rpc" | "raw";
}

function answer(obj: unknown): void {
  try {
    writeSync(1, JSON.stringify(obj) + "\n");
  } catch {
    // the daemon went away before reading: the files tell the story
  }
}

function main(): void {
  const spec = JSON.parse(readFileSync(0, "utf8")) as WrapperSpec;
  const [program, ...args] = spec.argv;
  if (program === undefined) throw new Error("empty argv");
  // O_RDWR on a FIFO never blocks and counts as a writer: the child's reads wait instead of hitting EOF.
  const stdinFd = openSync(spec.stdinPath, constants.O_RDWR);
  const outFd = openSync(spec.stdoutPath, "a");
  const errFd = openSync(spec.stderrPath, "a");
  // A group-wide SIGTERM from close() reaches the child directly; the wrapper stays to record how it ended.
  for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.on(sig, () => undefined);

  const child = spawn(program, args, {
    cwd: spec.cwd,
    env: { ...process.env, ...spec.env },
    stdio: [stdinFd, outFd, errFd],
  });
  child.on("error", (e) => {
    answer({ ok: false, error: e.message });
    process.exit(127);
  });
  // The exit handler waits for this, so a child that exits at once still gets its launch answered first.
  let started: Promise<void> = Promise.resolve();
  child.on("spawn", () => {
    started = (async () => {
      for (const fd of [stdinFd, outFd, errFd]) closeSync(fd);
      const pid = child.pid ?? -1;
      const wrapperStart = readProcStat(process.pid)?.startTime;
      const childStart = readProcStat(pid)?.startTime;
      const state: HeadlessState = {
        wrapperPid: process.pid,
        childPid: pid,
        protocol: spec.protocol,
        startedAt: new Date().toISOString(),
        ...(wrapperStart !== undefined ? { wrapperStart } : {}),
        ...(childStart !== undefined ? { childStart } : {}),
      };
      await writeAtomic(spec.statePath, JSON.stringify(state) + "\n", 0o644);
      answer({ ok: true, ...state });
    })();
  });
  child.on("exit", async (code, signal) => {
    await started.catch(() => undefined);
    const exit: HeadlessExit = { code, signal, pid: child.pid ?? -1, endedAt: new Date().toISOString() };
    await writeAtomic(spec.exitPath, JSON.stringify(exit) + "\n", 0o644).catch(() => undefined);
    const signum = signal ? (osConstants.signals[signal] ?? 0) : 0;
    process.exit(code ?? 128 + signum);
  });
}

try {
  main();
} catch (e) {
  answer({ ok: false, error: (e as Error).message });
  process.exit(126);
}
