// Running git: one place for the environment and the flags every call needs (exact, unquoted path names;
// no optional locks on the user's repo; nothing inherited that could point git at another repo or index).
import { execFile, spawn } from "node:child_process";
import { statSync } from "node:fs";
import { open } from "node:fs/promises";
import { DshError } from "../core/errors.js";

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
  return new Promise((resolve, reject) => {
    execFile(
      "git",
      [...CONFIG_ARGS, ...args],
      { cwd, env: gitEnv(extraEnv), encoding: "utf8", maxBuffer: MAX_OUTPUT_BYTES, windowsHide: true },
      (err, stdout, stderr) => {
        if (err === null) return resolve(stdout);
        const why = (stderr.trim() || err.message).trim();
        reject(dubiousOwnership(why) ?? new DshError("GIT_FAILED", `git ${args.join(" ")} failed in ${cwd}: ${why}`));
      },
    );
  });
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
    if (isDubiousOwnership(e)) throw e;
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
  } catch {
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
export function gitSucceeds(cwd: string, args: string[]): Promise<boolean> {
  return new Promise((resolve) => {
    execFile("git", [...CONFIG_ARGS, ...args], { cwd, env: gitEnv() }, (err) => resolve(err === null));
  });
}

/** Run git with a file as its stdin; GIT_FAILED with stderr on a non-zero exit. */
export async function gitStdinFile(
  cwd: string,
  args: string[],
  stdinPath: string,
  extraEnv: Record<string, string> = {},
): Promise<void> {
  const fh = await open(stdinPath, "r");
  try {
    await new Promise<void>((resolve, reject) => {
      const child = spawn("git", [...CONFIG_ARGS, ...args], {
        cwd,
        env: gitEnv(extraEnv),
        stdio: [fh.fd, "ignore", "pipe"],
      });
      let stderr = "";
      child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
      child.once("error", reject);
      child.once("close", (code) =>
        code === 0
          ? resolve()
          : reject(
              new DshError("GIT_FAILED", `git ${args.join(" ")} failed in ${cwd} (exit ${code}): ${stderr.trim()}`),
            ),
      );
    });
  } finally {
    await fh.close();
  }
}

/** `git <args>` whose exit code is part of the answer (merge-tree: 1 = conflicts): code, stdout and stderr. */
export function gitExit(
  cwd: string,
  args: string[],
  extraEnv: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      "git",
      [...CONFIG_ARGS, ...args],
      { cwd, env: gitEnv(extraEnv), encoding: "utf8", maxBuffer: MAX_OUTPUT_BYTES, windowsHide: true },
      (err, stdout, stderr) => {
        if (err === null) return resolve({ code: 0, stdout, stderr });
        const code = (err as { code?: unknown }).code;
        if (typeof code === "number") return resolve({ code, stdout, stderr });
        reject(new DshError("GIT_FAILED", `git ${args.join(" ")} failed in ${cwd}: ${err.message}`));
      },
    );
  });
}
