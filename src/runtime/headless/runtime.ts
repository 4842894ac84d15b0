// The headless runtime: the child (usually `pi --mode rpc`) runs in its own process group under a small
// wrapper (wrapper.ts) that outlives the daemon. Everything lives in the task dir: stdin.fifo, stdout.log,
// stderr.log, headless.json (pids + start times), exit.json.
import { spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { mkdir, open, rm } from "node:fs/promises";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { DshError } from "../../core/errors.js";
import type { ChildExit, LaunchSpec, Runtime, RuntimeEvent, RuntimeHandle } from "../types.js";
import { checkLaunchSpec } from "../launch-check.js";
import { ensureFifo, writeFifo } from "./fifo.js";
import { pathsIn, pathsOf, protocolOf, readExit, readState, type HeadlessState } from "./files.js";
import { isOurProcess } from "../proc.js";
import type { WrapperSpec } from "./wrapper.js";

export interface HeadlessRuntimeOptions {
  /** SIGTERM → SIGKILL grace period of close(), ms. */
  closeGraceMs?: number;
  /** How long launch waits for the wrapper to report the child running, ms. */
  launchTimeoutMs?: number;
  watchIntervalMs?: number;
}

const WRAPPER = fileURLToPath(new URL("./wrapper.js", import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Starts the wrapper detached and waits for its one-line answer. */
function startWrapper(spec: WrapperSpec, timeoutMs: number): Promise<HeadlessState> {
  return new Promise((resolve, reject) => {
    const errFd = openSync(spec.stderrPath, "a");
    // The wrapper lives in the task dir, not the child's worktree; detached = leader of a new process group.
    const w = spawn(process.execPath, [WRAPPER], {
      detached: true,
      cwd: dirname(spec.exitPath),
      stdio: ["pipe", "pipe", errFd],
    });
    closeSync(errFd);
    let out = "";
    let done = false;
    const finish = (err: DshError | null, state?: HeadlessState): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      w.stdout?.destroy();
      w.unref();
      if (err) {
        try {
          process.kill(-(w.pid ?? 0), "SIGKILL");
        } catch {
          /* already gone */
        }
        reject(err);
      } else resolve(state!);
    };
    const timer = setTimeout(
      () =>
        finish(
          new DshError(
            "LAUNCH_FAILED",
            `the headless child of ${spec.argv[0]} did not start within ${timeoutMs} ms: see ${spec.stderrPath}`,
          ),
        ),
      timeoutMs,
    );
    w.on("error", (e) => finish(new DshError("LAUNCH_FAILED", `could not start the headless wrapper: ${e.message}`)));
    w.on("exit", (code) =>
      finish(
        new DshError(
          "LAUNCH_FAILED",
          `the headless wrapper exited (${code}) before the child started: see ${spec.stderrPath}`,
        ),
      ),
    );
    w.stdout?.setEncoding("utf8");
    w.stdout?.on("data", (d: string) => {
      out += d;
      const nl = out.indexOf("\n");
      if (nl < 0) return;
      let reply: ({ ok: true } & HeadlessState) | { ok: false; error: string };
      try {
        reply = JSON.parse(out.slice(0, nl)) as typeof reply;
      } catch {
        reply = { ok: false, error: `unreadable wrapper answer ${JSON.stringify(out.slice(0, 200))}` };
      }
      if (reply.ok) finish(null, reply);
      else
        finish(
          new DshError(
            "LAUNCH_FAILED",
            `could not start ${spec.argv[0]}: ${reply.error}; check the program exists and is executable`,
          ),
        );
    });
    w.stdin?.end(JSON.stringify(spec));
  });
}

async function tail(path: string, lines: number): Promise<string> {
  const fh = await open(path, "r").catch(() => null);
  if (fh === null) return "";
  try {
    const { size } = await fh.stat();
    const want = Math.min(size, Math.max(64 * 1024, lines * 4096), 4 * 1024 * 1024);
    const buf = Buffer.alloc(want);
    await fh.read(buf, 0, want, size - want);
    return buf.toString("utf8").replace(/\s+$/, "").split("\n").slice(-lines).join("\n");
  } finally {
    await fh.close();
  }
}

/** The handle of the child `state` describes: what launch() returns and find() rebuilds. */
function handleOf(name: string, taskDir: string, state: HeadlessState): RuntimeHandle {
  const paths = pathsIn(taskDir);
  return {
    runtime: "headless",
    agentName: name,
    pid: state.childPid,
    stdinPath: paths.stdinPath,
    stdoutPath: paths.stdoutPath,
    stderrPath: paths.stderrPath,
    exitPath: paths.exitPath,
  };
}

export function createHeadlessRuntime(opts: HeadlessRuntimeOptions = {}): Runtime {
  const graceMs = opts.closeGraceMs ?? 5000;

  function stateOf(h: RuntimeHandle): HeadlessState | null {
    return readState(pathsOf(h).statePath);
  }

  function childAlive(h: RuntimeHandle): boolean {
    const p = pathsOf(h);
    return isOurProcess(p.pid, stateOf(h)?.childStart);
  }

  function groupAlive(h: RuntimeHandle, s: HeadlessState | null): boolean {
    return childAlive(h) || (s !== null && isOurProcess(s.wrapperPid, s.wrapperStart));
  }

  function signalGroup(h: RuntimeHandle, s: HeadlessState | null, sig: NodeJS.Signals): void {
    // The group id is the wrapper's pid (it was started detached, so it leads its group).
    const target = s ? -s.wrapperPid : pathsOf(h).pid;
    try {
      process.kill(target, sig);
    } catch {
      /* already gone */
    }
  }

  async function waitGone(h: RuntimeHandle, s: HeadlessState | null, ms: number): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (groupAlive(h, s)) {
      if (Date.now() > deadline) return false;
      await sleep(25);
    }
    return true;
  }

  const runtime: Runtime = {
    kind: "headless",

    async launch(spec: LaunchSpec): Promise<RuntimeHandle> {
      await checkLaunchSpec(spec);
      if (!spec.taskDir)
        throw new DshError(
          "LAUNCH_FAILED",
          "taskDir is empty: the headless runtime keeps stdin/stdout/exit files there",
        );
      await mkdir(spec.taskDir, { recursive: true });
      const paths = pathsIn(spec.taskDir);
      await ensureFifo(paths.stdinPath);
      // A relaunch in the same task dir must not see the previous child's exit.
      await rm(paths.exitPath, { force: true });
      const protocol = protocolOf(spec.argv);
      const state = await startWrapper(
        { ...paths, argv: spec.argv, env: spec.env, cwd: spec.cwd, protocol },
        opts.launchTimeoutMs ?? 10_000,
      );
      return handleOf(spec.name, spec.taskDir, state);
    },

    async find(where) {
      // The wrapper records headless.json before it answers launch, so a child whose launch answer was lost
      // (the daemon died) is still on record; only that same process, still running, counts.
      const state = readState(pathsIn(where.taskDir).statePath);
      if (state === null || !isOurProcess(state.childPid, state.childStart)) return undefined;
      return handleOf(where.name, where.taskDir, state);
    },

    async isAlive(h) {
      return childAlive(h);
    },

    async exitStatus(h) {
      const e = readExit(pathsOf(h).exitPath);
      return e ? { code: e.code, signal: e.signal ?? null } : null;
    },

    async readOutput(h, o = {}) {
      const lines = Math.max(1, o.lines ?? 50);
      const p = pathsOf(h);
      const [out, err] = await Promise.all([tail(p.stdoutPath, lines), tail(p.stderrPath, lines)]);
      return err === "" ? out : `${out}\n--- stderr ---\n${err}`;
    },

    async sendText(h, text) {
      const p = pathsOf(h);
      if (!childAlive(h))
        throw new DshError(
          "PANE_GONE",
          `cannot send text: the headless child ${p.pid} has exited; read its output or start the task again`,
        );
      // pi rpc: a prompt with streamingBehavior runs now when idle and queues as a follow-up while streaming.
      const line =
        stateOf(h)?.protocol === "rpc"
          ? JSON.stringify({ type: "prompt", message: text, streamingBehavior: "followUp" })
          : text;
      await writeFifo(p.stdinPath, line + "\n");
    },

    async sendKeys(h, keys) {
      const p = pathsOf(h);
      if (!childAlive(h)) throw new DshError("PANE_GONE", `cannot send keys: the headless child ${p.pid} has exited`);
      const rpc = stateOf(h)?.protocol === "rpc";
      for (const key of keys) {
        if (key === "Escape" || key === "C-c") {
          if (rpc) await writeFifo(p.stdinPath, JSON.stringify({ type: "abort" }) + "\n");
          else process.kill(p.pid, "SIGINT");
        } else if (key === "Enter" && !rpc) {
          await writeFifo(p.stdinPath, "\n");
        } else {
          throw new DshError(
            "BAD_PARAMS",
            `the headless runtime cannot send key ${JSON.stringify(key)}: use Escape or C-c (abort)${rpc ? "" : ", or Enter"}`,
          );
        }
      }
    },

    async close(h) {
      const s = stateOf(h);
      if (!groupAlive(h, s)) return;
      signalGroup(h, s, "SIGTERM");
      if (await waitGone(h, s, graceMs)) return;
      // Kill the child first so the wrapper can still record how it ended, then the whole group.
      if (childAlive(h)) {
        try {
          process.kill(pathsOf(h).pid, "SIGKILL");
        } catch {
          /* gone */
        }
      }
      if (await waitGone(h, s, 1000)) return;
      signalGroup(h, s, "SIGKILL");
      await waitGone(h, s, 2000);
    },

    async agentState(h) {
      return childAlive(h) ? "unknown" : "missing";
    },

    watch(h, onEvent: (e: RuntimeEvent) => void) {
      let stopped = false;
      let deadSince = 0;
      const timer = setInterval(() => {
        if (stopped || childAlive(h)) return;
        const exit: ChildExit | null = readExit(pathsOf(h).exitPath);
        // The wrapper writes exit.json right after the child dies; give it a moment before calling it lost.
        deadSince ||= Date.now();
        if (exit === null && Date.now() - deadSince < 2000) return;
        stop();
        onEvent(exit ? { type: "exited", exit: { code: exit.code, signal: exit.signal ?? null } } : { type: "gone" });
      }, opts.watchIntervalMs ?? 500);
      timer.unref();
      const stop = (): void => {
        stopped = true;
        clearInterval(timer);
      };
      return stop;
    },
  };
  return runtime;
}
