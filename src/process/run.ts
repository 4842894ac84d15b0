// One way to run a command the daemon does not trust to end by itself (a check, a worktree setup, a notify command,
// a bounded git inside land): in a process group of its own, ended as a whole group on a timeout, a cancel (the
// requester went away, the daemon stops) or too much output; SIGTERM first, SIGKILL after a grace. What it left
// running in its group when it exits is ended too, so a background grandchild cannot hold its output pipes open.
// An ordinary failure (exit code, signal, timeout, a program that does not exist) is an outcome, never a throw.
//
// execa starts the process and its streams. Its own timeout, cancelSignal and forceKillAfterDelay signal the leader
// only (ChildProcess.kill(pid)), which would leave the rest of the group running and the pipes open, so the group
// is signalled here.
import { execa } from "execa";

export type RunEnd = "timeout" | "cancelled" | "output";

export interface RunSpec {
  /** The program and its arguments, run as is (no shell; pass `/bin/sh -c <line>` for a shell line). */
  file: string;
  args?: readonly string[];
  cwd?: string;
  /** The whole environment (nothing of the daemon's is added). Default: the daemon's own. */
  env?: NodeJS.ProcessEnv;
  /** Its stdin: nothing (default), or a file read from the start. */
  stdin?: "ignore" | { file: string };
  /** Ended (its group) after this long. None: it may run as long as it likes. */
  timeoutMs?: number;
  /** From SIGTERM to SIGKILL of the group (default 2 s). */
  graceMs?: number;
  /** Aborted: the group is ended the same way (the outcome says `cancelled`). */
  signal?: AbortSignal;
  /** The group is ended once its output (stdout and stderr together) passes this many bytes. */
  maxOutputBytes?: number;
  /** Bytes of output the outcome keeps, per stream or merged (default 1 MiB); the rest is dropped (`truncated`). */
  keepBytes?: number;
  /** Which part is kept when there is more: the first bytes (default) or the last. */
  keep?: "head" | "tail";
  /** stdout and stderr kept as one stream, in the order they came (`output`), instead of apart. */
  merge?: boolean;
  /** Every chunk as it comes (a log file written while it runs). */
  onOutput?: (chunk: Buffer, from: "stdout" | "stderr") => void;
  /** Told its pid (= its process group id) once it started. */
  onSpawn?: (pid: number) => void;
}

export interface RunOutcome {
  /** Its exit code; null when a signal ended it or it never started. */
  exitCode: number | null;
  /** The signal that ended it, if one did. */
  signal: NodeJS.Signals | null;
  /** What ended it on our side, if anything did: its timeout, a cancel, its output passing the limit. */
  ended?: RunEnd;
  timedOut: boolean;
  cancelled: boolean;
  /** It could not be started: the reason (e.g. `spawn nope ENOENT`). */
  spawnError?: string;
  /** The program does not exist (ENOENT), or a shell line's command was not found (exit 127). */
  notFound: boolean;
  /** Its process group id (its pid), when it started. */
  pid?: number;
  stdout: string;
  stderr: string;
  /** stdout and stderr as they came, with `merge`. */
  output: string;
  /** Output was dropped past keepBytes. */
  truncated: boolean;
  /** Bytes of output seen in all. */
  outputBytes: number;
  durationMs: number;
}

const DEFAULT_GRACE_MS = 2000;
const DEFAULT_KEEP_BYTES = 1024 * 1024;
/** After the leader exits, how long what is still in the pipes is waited for (a holder outside the group is not). */
const DRAIN_MS = 200;

/** Bytes kept up to a cap, the first or the last ones. */
class Kept {
  private chunks: Buffer[] = [];
  private size = 0;
  truncated = false;
  constructor(
    private readonly cap: number,
    private readonly keep: "head" | "tail",
  ) {}
  add(chunk: Buffer): void {
    if (this.keep === "head") {
      const room = this.cap - this.size;
      if (room < chunk.length) this.truncated = true;
      if (room <= 0) return;
      const part = room >= chunk.length ? chunk : chunk.subarray(0, room);
      this.chunks.push(part);
      this.size += part.length;
      return;
    }
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size > this.cap && this.chunks.length > 0) {
      this.truncated = true;
      const first = this.chunks[0]!;
      const over = this.size - this.cap;
      if (first.length <= over) {
        this.chunks.shift();
        this.size -= first.length;
      } else {
        this.chunks[0] = first.subarray(over);
        this.size -= over;
      }
    }
  }
  text(): string {
    const s = Buffer.concat(this.chunks).toString("utf8");
    // A tail cut inside a character starts with its rest: dropped.
    return this.keep === "tail" && this.truncated ? s.replace(/^\uFFFD+/, "") : s;
  }
}

function signalGroup(pid: number | undefined, sig: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, sig);
  } catch {
    // the group is gone already
  }
}

/** Run one command bounded as the spec says; resolves with how it went, never rejects. */
export async function runProcess(spec: RunSpec): Promise<RunOutcome> {
  const t0 = performance.now();
  const graceMs = spec.graceMs ?? DEFAULT_GRACE_MS;
  const keepBytes = spec.keepBytes ?? DEFAULT_KEEP_BYTES;
  const keep = spec.keep ?? "head";
  const out = new Kept(keepBytes, keep);
  const err = spec.merge ? out : new Kept(keepBytes, keep);
  let outputBytes = 0;
  let ended: RunEnd | undefined;
  let killTimer: NodeJS.Timeout | undefined;
  const base = {
    timedOut: false,
    cancelled: false,
    stdout: "",
    stderr: "",
    output: "",
    truncated: false,
    outputBytes: 0,
  };
  if (spec.signal?.aborted)
    return {
      ...base,
      exitCode: null,
      signal: null,
      ended: "cancelled",
      cancelled: true,
      notFound: false,
      durationMs: 0,
    };

  const sub = execa(spec.file, spec.args ?? [], {
    ...(spec.cwd !== undefined ? { cwd: spec.cwd } : {}),
    env: spec.env ?? process.env,
    extendEnv: false,
    stdin: spec.stdin === undefined || spec.stdin === "ignore" ? "ignore" : { file: spec.stdin.file },
    stdout: "pipe",
    stderr: "pipe",
    detached: true, // its own process group: what it starts is ended with it
    buffer: false,
    reject: false,
    cleanup: false,
    stripFinalNewline: false,
    windowsHide: true,
  });
  const pid = sub.pid;
  const end = (why: RunEnd) => {
    if (ended !== undefined) return;
    ended = why;
    signalGroup(pid, "SIGTERM");
    killTimer = setTimeout(() => signalGroup(pid, "SIGKILL"), graceMs);
    killTimer.unref();
  };
  const take = (from: "stdout" | "stderr") => (chunk: Buffer) => {
    outputBytes += chunk.length;
    (from === "stdout" ? out : err).add(chunk);
    spec.onOutput?.(chunk, from);
    if (spec.maxOutputBytes !== undefined && outputBytes > spec.maxOutputBytes) end("output");
  };
  sub.stdout?.on("data", take("stdout"));
  sub.stderr?.on("data", take("stderr"));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    sub.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const settled = sub.then(
    (r) => r,
    () => undefined,
  );
  let timer: NodeJS.Timeout | undefined;
  const onAbort = () => end("cancelled");
  if (pid !== undefined) {
    spec.onSpawn?.(pid);
    if (spec.timeoutMs !== undefined) {
      timer = setTimeout(() => end("timeout"), spec.timeoutMs);
      timer.unref();
    }
    spec.signal?.addEventListener("abort", onAbort, { once: true });
  }
  // `exit`, not the streams' end: a process that left the group may hold the pipes open for ever.
  const first = await Promise.race([exited, settled.then(() => undefined)]);
  clearTimeout(timer);
  spec.signal?.removeEventListener("abort", onAbort);
  const exit =
    first ?? (await Promise.race([exited, new Promise<undefined>((r) => setTimeout(() => r(undefined), 0))]));
  // What it left running in its group goes with it (a check's `sleep 100 &`, a hook's background child).
  if (exit !== undefined) signalGroup(pid, "SIGKILL");
  if (killTimer) clearTimeout(killTimer);
  // What the pipes still hold arrives shortly after the exit; a stray holder outside the group is not waited for.
  let drain: NodeJS.Timeout | undefined;
  const result = await Promise.race([
    settled,
    new Promise<undefined>((r) => {
      drain = setTimeout(() => r(undefined), DRAIN_MS);
    }),
  ]);
  clearTimeout(drain);
  if (result === undefined) {
    sub.stdout?.destroy();
    sub.stderr?.destroy();
  }
  // Destroyed streams settle execa's promise; bounded all the same, since only a spawn error's words come from it.
  const final =
    result ??
    (await Promise.race([settled, new Promise<undefined>((r) => setTimeout(() => r(undefined), 1000).unref())]));
  const code = (final as { code?: unknown } | undefined)?.code;
  const spawnError =
    exit === undefined || pid === undefined
      ? ((final as { originalMessage?: string; shortMessage?: string } | undefined)?.originalMessage ??
        (final as { shortMessage?: string } | undefined)?.shortMessage ??
        "it did not start")
      : undefined;
  const exitCode = exit?.code ?? null;
  return {
    exitCode,
    signal: exit?.signal ?? null,
    ...(ended !== undefined ? { ended } : {}),
    timedOut: ended === "timeout",
    cancelled: ended === "cancelled",
    ...(spawnError !== undefined ? { spawnError } : {}),
    notFound: code === "ENOENT" || (spawnError === undefined && exitCode === 127 && spec.file === "/bin/sh"),
    ...(pid !== undefined ? { pid } : {}),
    stdout: out.text(),
    stderr: spec.merge ? "" : err.text(),
    output: spec.merge ? out.text() : "",
    truncated: out.truncated || err.truncated,
    outputBytes,
    durationMs: Math.max(0, Math.round(performance.now() - t0)),
  };
}

/** A shell line as a RunSpec's file and args: `/bin/sh -c <line>`. */
export const shellLine = (line: string): Pick<RunSpec, "file" | "args"> => ({ file: "/bin/sh", args: ["-c", line] });
