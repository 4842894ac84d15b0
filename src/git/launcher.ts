// Git processes started by one long-lived /bin/sh beside the daemon instead of by node itself.
//
// Why: node's spawn forks the whole daemon and then waits, on the event loop, until the child has exec'd. On a
// 2-CPU VM that held the daemon's loop 5-9 ms per git process (docs/performance.md), and a settle in a repository
// runs git to harvest its diff: a burst of settles queued every owner push, socket reply and file event behind those
// forks. A small shell forks in well under a millisecond, and its forks do not touch the daemon's memory.
//
// The protocol: each command is a script file in a private directory; its id goes down the shell's stdin; the shell
// runs it in the background with stdout and stderr to files and writes back "<id> <exit code>". Files, not quoted
// lines on the pipe, so arguments with newlines need no escaping scheme of their own. A streamed command (a diff,
// read as it comes) writes to a FIFO instead: the shell makes it and says "<id> fifo", this process opens the read
// end (non-blocking, read on the event loop like a socket), and only then can git's side open and write.
//
// Only the daemon uses it (useGitLauncher, counted per daemon in the process); a CLI command keeps node's spawn, so
// it leaves no shell behind it to reap.
import { type ChildProcess, spawn } from "node:child_process";
import {
  accessSync,
  constants,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { Socket } from "node:net";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { PassThrough, type Readable } from "node:stream";
import { pidAlive } from "../client/liveness.js";
import { DshError } from "../core/errors.js";

export interface LaunchRequest {
  cwd: string;
  /** git's arguments (without "git"). */
  args: string[];
  /** The whole environment git gets. */
  env: Record<string, string>;
  /** A file for git's stdin (else /dev/null). */
  stdinPath?: string;
  /** Over this many stdout bytes the command fails, as execFile's maxBuffer. */
  maxStdoutBytes: number;
}

export interface LaunchResult {
  /** null: git did not start (its cwd could not be entered, or no git on PATH); `spawnError` says why. */
  code: number | null;
  stdout: string;
  stderr: string;
  spawnError?: string;
}

/** git's output as it comes, and its exit (with stdout not buffered: it is all in `stdout`). */
export interface LaunchedStream {
  stdout: Readable;
  /** Resolves once git exited (the same codes as LaunchResult); rejects as `launchGit` does when the shell is lost. */
  exit: Promise<LaunchResult>;
}

/** The script's exit code when it could not enter the cwd (or make its FIFO); 127 is sh's own for a command not found. */
const NOT_STARTED = 201;

/**
 * Every command runs in a background subshell, and its script in a subshell of that (which `exec`s git), so the
 * exit code is written back whatever the script does. fd 3 is the answer pipe, for a streamed command's "<id> fifo"
 * note. EOF on stdin (the daemon closed it, or died) ends the loop; the shell waits for what still runs and removes
 * the directory.
 */
const LOOP =
  'exec 3>&1; while IFS= read -r id; do ( ( . "$0/$id.sh" ) >"$0/$id.out" 2>"$0/$id.err" </dev/null; echo "$id $?" ) & done; wait; rm -rf "$0"';

const SH_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

const DIR_PREFIX = "dsh-herdr-git-";
/** A launcher's directory: the prefix, its daemon's pid, mkdtemp's suffix. */
const DIR_NAME = new RegExp(`^${DIR_PREFIX}(\\d+)-`);

/**
 * The scratch root, with the directories of this user's earlier launchers whose process is gone removed: a shell
 * killed together with its daemon (a process group or a user's processes SIGKILLed) could not remove its own.
 */
function sweptScratchRoot(): string {
  const root = scratchRoot();
  const uid = process.getuid?.();
  try {
    for (const name of readdirSync(root)) {
      const pid = Number(DIR_NAME.exec(name)?.[1] ?? Number.NaN);
      if (!(pid > 0) || pid === process.pid || pidAlive(pid)) continue;
      const path = join(root, name);
      if (statSync(path).uid === uid) rmSync(path, { recursive: true, force: true });
    }
  } catch {
    // best-effort: a leftover is an empty directory
  }
  return root;
}

/**
 * Where the command files go: /dev/shm (memory) when there is one, else the temp dir. Three small files a command
 * made and removed on a VM disk cost ~1 ms of the daemon's time each; in memory, microseconds.
 */
function scratchRoot(): string {
  try {
    accessSync("/dev/shm", constants.W_OK);
    if (statSync("/dev/shm").isDirectory()) return "/dev/shm";
  } catch {
    // none (macOS), or not ours to write
  }
  return tmpdir();
}

/**
 * A streamed command whose reader never came (the shell died first) may have git's side blocked in open(): open the
 * read end and discard what comes until git's side closes. The directory is removed next, so a side not yet at its
 * open finds no FIFO and fails.
 */
function releaseFifo(fifo: string): void {
  let pipe: Socket;
  try {
    pipe = fifoReader(fifo);
  } catch {
    return; // not made yet (or gone): nothing waits on it
  }
  pipe.on("error", () => undefined);
  pipe.resume();
}

/** A FIFO's read end, opened non-blocking and read on the event loop like a socket; throws when it cannot open. */
function fifoReader(fifo: string): Socket {
  const fd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  return new Socket({ fd, readable: true, writable: false });
}

/** A word for sh: single-quoted, with each ' written as '\'' (the only character single quotes cannot hold). */
export function shQuote(s: string): string {
  return `'${s.replace(/'/g, "'\\''")}'`;
}

interface Pending {
  resolve(r: LaunchResult): void;
  reject(e: Error): void;
  max: number;
  /** A streamed command: where git's output goes, and whether its FIFO was opened. */
  stream?: { out: PassThrough; fifo: string; opened: boolean };
}

class Launcher {
  private readonly dir = mkdtempSync(join(sweptScratchRoot(), `${DIR_PREFIX}${process.pid}-`));
  private readonly sh: ChildProcess;
  private readonly base: Record<string, string>;
  private readonly pending = new Map<string, Pending>();
  private seq = 0;
  exited = false;
  private readonly gone: Promise<void>;

  constructor(env: Record<string, string>) {
    this.base = { ...env };
    this.sh = spawn("/bin/sh", ["-c", LOOP, this.dir], { env: this.base, stdio: ["pipe", "pipe", "ignore"] });
    this.sh.stdin!.on("error", () => undefined); // EPIPE once the shell died: its exit handler answers the pending
    createInterface({ input: this.sh.stdout! }).on("line", (line) => this.done(line));
    this.gone = new Promise((resolve) => {
      const end = () => {
        if (this.exited) return;
        this.exited = true;
        const why = new DshError(
          "GIT_FAILED",
          `the shell that starts git for the daemon (/bin/sh, pid ${this.sh.pid ?? "none"}) exited; the git command may not have run; run it again`,
          { reason: "launcher_lost" },
        );
        for (const p of this.pending.values()) {
          if (p.stream && !p.stream.opened) releaseFifo(p.stream.fifo);
          p.reject(why);
        }
        this.pending.clear();
        try {
          rmSync(this.dir, { recursive: true, force: true, maxRetries: 3 });
        } catch {
          // a command the killed shell left running still writes there; the OS's tmp cleanup takes what remains
        }
        resolve();
      };
      this.sh.once("exit", end);
      this.sh.once("error", end);
    });
    this.idle();
  }

  /** The env as lines that turn the shell's environment into `env`; undefined when sh cannot say it. */
  private envScript(env: Record<string, string>): string | undefined {
    const lines: string[] = [];
    for (const [k, v] of Object.entries(env)) {
      if (this.base[k] === v) continue;
      if (!SH_NAME.test(k)) return undefined;
      lines.push(`export ${k}=${shQuote(v)}`);
    }
    for (const k of Object.keys(this.base)) {
      if (k in env) continue;
      if (!SH_NAME.test(k)) return undefined;
      lines.push(`unset ${k}`);
    }
    return lines.join("\n");
  }

  /** undefined when this request needs node's own spawn (an environment sh cannot express). */
  run(req: LaunchRequest): Promise<LaunchResult> | undefined {
    const env = this.envScript(req.env);
    if (env === undefined) return undefined;
    const stdin = req.stdinPath !== undefined ? ` <${shQuote(req.stdinPath)}` : "";
    return this.submit(String(++this.seq), req, env, `${stdin} 3>&-`);
  }

  /** The same, with git's stdout streamed through a FIFO rather than buffered in a file. */
  stream(req: Omit<LaunchRequest, "maxStdoutBytes" | "stdinPath">): LaunchedStream | undefined {
    const env = this.envScript(req.env);
    if (env === undefined) return undefined;
    const id = String(++this.seq);
    const out = new PassThrough();
    const fifo = join(this.dir, `${id}.fifo`);
    const make = `mkfifo -m 600 -- ${shQuote(fifo)} || exit ${NOT_STARTED}\necho "${id} fifo" >&3`;
    const exit = this.submit(id, { ...req, maxStdoutBytes: 0 }, `${env}\n${make}`, ` >${shQuote(fifo)} 3>&-`, {
      out,
      fifo,
      opened: false,
    });
    // A lost shell ends the stream with its error; the exit's own rejection is the caller's to read.
    exit.then(
      () => undefined,
      (e: Error) => out.destroy(e),
    );
    return { stdout: out, exit };
  }

  private submit(
    id: string,
    req: LaunchRequest,
    env: string,
    redirect: string,
    stream?: Pending["stream"],
  ): Promise<LaunchResult> {
    // `cd` failing prints sh's own words ("can't cd to ...") and the command does not run.
    const script = `cd -- ${shQuote(req.cwd)} || exit ${NOT_STARTED}\n${env}\nexec git ${req.args.map(shQuote).join(" ")}${redirect}\n`;
    writeFileSync(join(this.dir, `${id}.sh`), script);
    const answer = new Promise<LaunchResult>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, max: req.maxStdoutBytes, ...(stream ? { stream } : {}) });
    });
    if (this.pending.size === 1) this.busy();
    this.sh.stdin!.write(`${id}\n`);
    return answer;
  }

  /** "<id> fifo": the FIFO is there and git's side waits to open it; open the read end, which lets it. */
  private openFifo(p: Pending): void {
    const s = p.stream!;
    let pipe: Socket;
    try {
      pipe = fifoReader(s.fifo);
    } catch (e) {
      s.out.destroy(
        new DshError("GIT_FAILED", `git's output pipe ${s.fifo} could not be opened: ${(e as Error).message}`),
      );
      // git's side stays blocked in open() until some reader comes: let a shell one come and go (git then gets EPIPE).
      this.sh.stdin!.write(this.unblockId(s.fifo));
      return;
    }
    s.opened = true;
    pipe.on("error", (e) => s.out.destroy(e));
    s.out.once("close", () => pipe.destroy()); // a reader gone early: git gets EPIPE rather than a full pipe
    pipe.pipe(s.out);
  }

  /** A command that only opens and closes `fifo` for reading. */
  private unblockId(fifo: string): string {
    const id = String(++this.seq);
    writeFileSync(join(this.dir, `${id}.sh`), `: <${shQuote(fifo)}\n`);
    return `${id}\n`;
  }

  private done(line: string): void {
    const [id = "", code = ""] = line.split(" ");
    const p = this.pending.get(id);
    if (!p) {
      for (const ext of ["sh", "out", "err"]) this.remove(join(this.dir, `${id}.${ext}`)); // an unblock's
      return;
    }
    if (code === "fifo" && p.stream) return this.openFifo(p);
    this.pending.delete(id);
    if (this.pending.size === 0) this.idle();
    const file = (ext: string) => join(this.dir, `${id}.${ext}`);
    try {
      const stderr = readFileSync(file("err"), "utf8");
      // A streamed command's stdout went to its FIFO: nothing in the file to measure or read.
      if (p.stream && !p.stream.opened && !p.stream.out.destroyed) p.stream.out.end(); // git never started: no output
      const size = p.stream ? 0 : statSync(file("out")).size;
      if (size > p.max)
        p.reject(new DshError("GIT_FAILED", `git printed ${size} bytes, over the ${p.max}-byte limit of one call`));
      else if (Number(code) === NOT_STARTED || Number(code) === 127)
        p.resolve({ code: null, stdout: "", stderr, spawnError: stderr.trim() || `exit ${code}` });
      else p.resolve({ code: Number(code), stdout: p.stream ? "" : readFileSync(file("out"), "utf8"), stderr });
    } catch (e) {
      p.reject(new DshError("GIT_FAILED", `git's output could not be read from ${this.dir}: ${(e as Error).message}`));
    } finally {
      for (const ext of ["sh", "out", "err", "fifo"]) this.remove(file(ext));
    }
  }

  private remove(path: string): void {
    try {
      unlinkSync(path);
    } catch {
      // already gone (or never made)
    }
  }

  // Commands in flight keep the process alive; an idle shell does not.
  private busy(): void {
    (this.sh.stdout as unknown as { ref?(): void }).ref?.();
    this.sh.ref();
  }

  private idle(): void {
    (this.sh.stdout as unknown as { unref?(): void }).unref?.();
    (this.sh.stdin as unknown as { unref?(): void }).unref?.();
    this.sh.unref();
  }

  get pid(): number | undefined {
    return this.sh.pid;
  }

  /** End the loop (the shell finishes what runs, then exits) and wait until it has. */
  async close(): Promise<void> {
    this.sh.ref(); // the process waits for the exit (and reaps the shell)
    this.sh.stdin!.end();
    await this.gone;
  }
}

let users = 0;
let current: Launcher | undefined;
let baseEnv: (() => Record<string, string>) | undefined;

/**
 * From now until the returned release, git commands of this process start from the shell (a daemon calls it at
 * start and releases at stop). `env` gives the environment the shell starts with (git's usual one).
 */
export function useGitLauncher(env: () => Record<string, string>): () => Promise<void> {
  users++;
  baseEnv = env;
  let released = false;
  return async () => {
    if (released) return;
    released = true;
    if (--users > 0) return;
    const l = current;
    current = undefined;
    await l?.close();
  };
}

/** Run git through the shell when a daemon asked for it; undefined: run it with node's spawn. */
export function launchGit(req: LaunchRequest): Promise<LaunchResult> | undefined {
  if (users === 0 || !baseEnv) return undefined;
  if (!current || current.exited) current = new Launcher(baseEnv());
  return current.run(req);
}

/** `launchGit` with git's stdout streamed as it comes (a diff parsed and capped while git writes it). */
export function launchGitStream(req: Omit<LaunchRequest, "maxStdoutBytes" | "stdinPath">): LaunchedStream | undefined {
  if (users === 0 || !baseEnv) return undefined;
  if (!current || current.exited) current = new Launcher(baseEnv());
  return current.stream(req);
}

/** The launcher's shell went away with the command in flight: no answer from git, so never read as "no". */
export function isLauncherLost(e: unknown): boolean {
  return e instanceof DshError && e.details?.["reason"] === "launcher_lost";
}

/** The shell's pid (tests). */
export function gitLauncherPid(): number | undefined {
  return current && !current.exited ? current.pid : undefined;
}
