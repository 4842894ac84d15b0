// Running git: one place for the environment and the flags every call needs (exact, unquoted path names;
// no optional locks on the user's repo; nothing inherited that could point git at another repo or index).
import { AsyncLocalStorage } from "node:async_hooks";
import { execFile } from "node:child_process";
import { statSync } from "node:fs";
import { DshError } from "../core/errors.js";
import { isLauncherLost, type LaunchResult, launchGit } from "./launcher.js";
import { runProcess, type RunOutcome } from "../process/run.js";

// Variables that would redirect git away from the cwd's repo, or change its output format.
const STRIPPED = [
  "GIT_DIR",
  "GIT_WORK_TREE",
  "GIT_INDEX_FILE",
  "GIT_OBJECT_DIRECTORY",
  "GIT_COMMON_DIR",
  "GIT_PREFIX",
  "GIT_NAMESPACE",
  "GIT_EXTERNAL_DIFF",
  "GIT_DIFF_OPTS",
  "GIT_PAGER",
  "GIT_CONFIG_PARAMETERS",
];

export const CONFIG_ARGS = ["-c", "core.quotePath=false", "-c", "core.precomposeUnicode=true"];

export function gitEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !STRIPPED.includes(k)) env[k] = v;
  env.GIT_OPTIONAL_LOCKS = "0";
  env.GIT_TERMINAL_PROMPT = "0";
  env.LC_ALL = "C";
  return { ...env, ...extra };
}

/**
 * Run `git <args>` in cwd and return stdout; a failure becomes GIT_FAILED with git's own message.
 * Plain execFile, not simple-git: simple-git resolves 50 ms after `exit` when a command prints nothing (`git status`
 * on a clean tree took ~55 ms against ~5 ms), and it settles 50 ms after `exit` even when `close` (stdout fully read)
 * has not come yet, so on a loaded machine a probe could read "" and a fresh repo looked like no repo (NOT_A_REPO).
 */
export function git(cwd: string, args: string[], extraEnv: Record<string, string> = {}): Promise<string> {
  return runGit(cwd, args, extraEnv).then(({ code, stdout, stderr, spawnError }) => {
    if (code === 0) return stdout;
    const why = (stderr.trim() || spawnError || `exit ${code}`).trim();
    throw dubiousOwnership(why) ?? new DshError("GIT_FAILED", `git ${args.join(" ")} failed in ${cwd}: ${why}`);
  });
}

/**
 * Bounds for the git processes started inside one operation on the user's repository (land, land --check): each
 * one is ended with its whole process group (git and any hook it runs) after `timeoutMs`, or when `signal` aborts
 * (the requester went away, the daemon stops). SIGTERM first, so git removes its lock files; SIGKILL after a grace.
 */
export interface GitBounds {
  timeoutMs: number;
  signal?: AbortSignal;
  /** Says what ended a bounded process (for the message): e.g. `land.timeoutMs (20000 ms)`. */
  timeoutName?: string;
}

const bounds = new AsyncLocalStorage<GitBounds>();

/**
 * Run `op` with every git process it starts (however deep in its helpers) bounded. An AsyncLocalStorage, not an
 * argument threaded through every helper: a git call somebody adds later is bounded too.
 */
export function withGitBounds<T>(b: GitBounds, op: () => Promise<T>): Promise<T> {
  return bounds.run(b, op);
}

/** The bounds in force here, if any (a check run inside land takes its abort signal from them). */
export function gitBounds(): GitBounds | undefined {
  return bounds.getStore();
}

/**
 * Run `op` with the bounds in force minus their cancel: what undoes a cancelled operation (putting the checkout back,
 * reading where the branch is) must still run, within the same timeout.
 */
export function withoutCancel<T>(op: () => Promise<T>): Promise<T> {
  const b = bounds.getStore();
  if (!b) return op();
  const { signal: _cancel, ...rest } = b;
  return bounds.run(rest, op);
}

const KILL_GRACE_MS = 2000;

/**
 * git in a process group of its own (the process adapter), ended as a group on timeout or abort; what a hook left
 * running in the group (a background child holding the output pipes) ends with git. Not through the launcher
 * shell: its commands share the shell's group, so a hook's children could not be told apart from the shell's.
 */
async function runBounded(
  cwd: string,
  args: string[],
  env: Record<string, string>,
  stdinPath: string | undefined,
  b: GitBounds,
): Promise<LaunchResult> {
  const what = `git ${args.slice(CONFIG_ARGS.length).join(" ")}`;
  if (b.signal?.aborted)
    throw new DshError("LAND_CANCELLED", `${what} not started: ${reasonOf(b.signal)}`, { reason: "cancelled" });
  const r = await runProcess({
    file: "git",
    args,
    cwd,
    env,
    stdin: stdinPath !== undefined ? { file: stdinPath } : "ignore",
    timeoutMs: b.timeoutMs,
    graceMs: KILL_GRACE_MS,
    ...(b.signal !== undefined ? { signal: b.signal } : {}),
    keepBytes: MAX_OUTPUT_BYTES,
  });
  if (r.timedOut)
    throw new DshError(
      "TIMEOUT",
      `${what} in ${cwd} (and any hook it ran) did not end within ${b.timeoutName ?? `${b.timeoutMs} ms`}; it was ended with its process group`,
      { reason: "git_timeout" },
    );
  if (r.cancelled)
    throw new DshError("LAND_CANCELLED", `${what} in ${cwd} was ended: ${reasonOf(b.signal)}`, { reason: "cancelled" });
  return launchResultOf(r);
}

/** The adapter's outcome as git's answer: a code of null is a spawn error or a signal; over the cap is an error. */
function launchResultOf(r: RunOutcome): LaunchResult {
  if (r.spawnError !== undefined) return { code: null, stdout: "", stderr: "", spawnError: r.spawnError };
  if (r.truncated)
    throw new DshError(
      "GIT_FAILED",
      `git printed ${r.outputBytes} bytes, over the ${MAX_OUTPUT_BYTES}-byte limit of one call`,
    );
  const { stdout, stderr } = r;
  return r.exitCode === null
    ? { code: null, stdout, stderr, spawnError: "killed by a signal" }
    : { code: r.exitCode, stdout, stderr };
}

/** A bounded git process ended by its timeout or a cancel: no answer from git, never read as "no". */
export function isBoundEnded(e: unknown): boolean {
  const reason = e instanceof DshError ? e.details?.["reason"] : undefined;
  return reason === "git_timeout" || reason === "cancelled";
}

function reasonOf(signal: AbortSignal | undefined): string {
  const r: unknown = signal?.reason;
  return r instanceof Error ? r.message : typeof r === "string" ? r : "its requester went away";
}

/**
 * One git call, buffered: through the daemon's launcher shell when one runs (launcher.ts: node's own spawn holds the
 * event loop for the whole fork), else with execFile. A code of null is a spawn error (git missing, a bad cwd).
 */
function runGit(
  cwd: string,
  args: string[],
  extraEnv: Record<string, string>,
  stdinPath?: string,
): Promise<LaunchResult> {
  const full = [...CONFIG_ARGS, ...args];
  const env = gitEnv(extraEnv);
  const b = bounds.getStore();
  if (b) return runBounded(cwd, full, env, stdinPath, b);
  const launched = launchGit({
    cwd,
    args: full,
    env,
    ...(stdinPath !== undefined ? { stdinPath } : {}),
    maxStdoutBytes: MAX_OUTPUT_BYTES,
  });
  if (launched) return launched;
  if (stdinPath !== undefined) return spawnWithStdin(cwd, full, env, stdinPath);
  return new Promise((resolve) => {
    execFile(
      "git",
      full,
      { cwd, env, encoding: "utf8", maxBuffer: MAX_OUTPUT_BYTES, windowsHide: true },
      (err, stdout, stderr) => {
        if (err === null) return resolve({ code: 0, stdout, stderr });
        const code = (err as { code?: unknown }).code;
        resolve(
          typeof code === "number" ? { code, stdout, stderr } : { code: null, stdout, stderr, spawnError: err.message },
        );
      },
    );
  });
}

/** git with a file as its stdin, without the launcher. */
async function spawnWithStdin(
  cwd: string,
  args: string[],
  env: Record<string, string>,
  stdinPath: string,
): Promise<LaunchResult> {
  return launchResultOf(
    await runProcess({ file: "git", args, cwd, env, stdin: { file: stdinPath }, keepBytes: MAX_OUTPUT_BYTES }),
  );
}

/** Output of one git() call held in memory (status, ls-files of a big repo); diffs stream to a file instead. */
const MAX_OUTPUT_BYTES = 256 * 1024 * 1024;

/**
 * git refuses a repository another user owns ("detected dubious ownership", git ≥ 2.35.2): named as such, with the
 * fix, instead of passing for "not a repository" or "no commits yet" (a daemon on another machine, run as another
 * user than the repository's owner, meets it).
 */
export function dubiousOwnership(stderr: string): DshError | undefined {
  const m = /detected dubious ownership in repository at '([^'\n]+)'/.exec(stderr);
  if (!m) return undefined;
  const path = m[1]!;
  let owner = "another user";
  try {
    owner = `uid ${statSync(path).uid}`;
  } catch {
    // unreadable: "another user"
  }
  const me = typeof process.getuid === "function" ? `uid ${process.getuid()}` : "the user the daemon runs as";
  return new DshError(
    "GIT_FAILED",
    `git refuses the repository ${path}: "detected dubious ownership" (it belongs to ${owner}, git runs as ${me}); fix: \`git config --global --add safe.directory ${path}\` as ${me}, or work in a repository that user owns`,
    { reason: "dubious_ownership", path },
  );
}

export function isDubiousOwnership(e: unknown): boolean {
  return e instanceof DshError && e.details?.["reason"] === "dubious_ownership";
}

/** Like gitMaybe, but git refusing the repository (dubious ownership) is thrown: a probe that could not look is
 *  not "no repository" or "no commits". */
export async function gitProbe(cwd: string, args: string[]): Promise<string | undefined> {
  try {
    return await git(cwd, args);
  } catch (e) {
    if (isDubiousOwnership(e) || isLauncherLost(e) || isBoundEnded(e)) throw e;
    return undefined;
  }
}

/** Like git(), but a failure returns undefined (for probes such as "is there a HEAD?"). */
export async function gitMaybe(
  cwd: string,
  args: string[],
  extraEnv: Record<string, string> = {},
): Promise<string | undefined> {
  try {
    return await git(cwd, args, extraEnv);
  } catch (e) {
    if (isLauncherLost(e) || isBoundEnded(e)) throw e; // not git's answer: the command may not have run
    return undefined;
  }
}

/** Split NUL-terminated output (`-z`) into fields, dropping the empty tail. */
export function splitZ(out: string): string[] {
  const parts = out.split("\0");
  if (parts.length > 0 && parts[parts.length - 1] === "") parts.pop();
  return parts;
}

/** Whether `git <args>` exits 0 (probes such as --is-ancestor, whose answer is the exit code). */
export async function gitSucceeds(cwd: string, args: string[]): Promise<boolean> {
  return (await runGit(cwd, args, {})).code === 0;
}

/** Run git with a file as its stdin; GIT_FAILED with stderr on a non-zero exit. */
export async function gitStdinFile(
  cwd: string,
  args: string[],
  stdinPath: string,
  extraEnv: Record<string, string> = {},
): Promise<void> {
  const r = await runGit(cwd, args, extraEnv, stdinPath);
  if (r.code !== 0)
    throw new DshError(
      "GIT_FAILED",
      `git ${args.join(" ")} failed in ${cwd} (${r.code === null ? r.spawnError : `exit ${r.code}`}): ${r.stderr.trim()}`,
    );
}

/** Run git with a file as its stdin and return its stdout; GIT_FAILED with stderr on an exit other than 0 and `ok`. */
export async function gitStdinFileOut(
  cwd: string,
  args: string[],
  stdinPath: string,
  ok: number[] = [0, 1],
): Promise<string> {
  const r = await runGit(cwd, args, {}, stdinPath);
  if (r.code === null || !ok.includes(r.code))
    throw new DshError(
      "GIT_FAILED",
      `git ${args.join(" ")} failed in ${cwd} (${r.code === null ? r.spawnError : `exit ${r.code}`}): ${r.stderr.trim()}`,
    );
  return r.stdout;
}

/** `git <args>` whose exit code is part of the answer (merge-tree: 1 = conflicts): code, stdout and stderr. */
export async function gitExit(
  cwd: string,
  args: string[],
  extraEnv: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const r = await runGit(cwd, args, extraEnv);
  if (r.code === null) throw new DshError("GIT_FAILED", `git ${args.join(" ")} failed in ${cwd}: ${r.spawnError}`);
  return { code: r.code, stdout: r.stdout, stderr: r.stderr };
}
