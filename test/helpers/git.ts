// Real git repositories in temp dirs for tests: a per-repo identity (never the global config) and small helpers.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

const IDENTITY = [
  "-c",
  "user.name=dsh test",
  "-c",
  "user.email=test@dsh.invalid",
  "-c",
  "commit.gpgsign=false",
  "-c",
  "init.defaultBranch=main",
];

/** Run git in cwd (sync) and return stdout; throws with git's stderr on failure. */
export function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", [...IDENTITY, ...args], {
    cwd,
    encoding: "utf8",
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null", GIT_OPTIONAL_LOCKS: "0" },
    stdio: ["ignore", "pipe", "pipe"],
    maxBuffer: 256 * 1024 * 1024,
  });
}

/** Raw bytes of a git command's stdout (for byte-identical comparisons). */
export function gitBytes(cwd: string, ...args: string[]): Buffer {
  return execFileSync("git", [...IDENTITY, ...args], {
    cwd,
    stdio: ["ignore", "pipe", "pipe"],
    maxBuffer: 256 * 1024 * 1024,
  });
}

export function write(root: string, rel: string, content: string | Buffer): void {
  const p = join(root, rel);
  mkdirSync(dirname(p), { recursive: true });
  writeFileSync(p, content);
}

export interface TempRepo {
  dir: string;
  /** A temp dir around the repo (for homes, patches); removed by cleanup(). */
  base: string;
  cleanup(): void;
}

/** A fresh repo in a temp dir; `files` are committed as the first commit unless `commit` is false. */
export function makeRepo(files: Record<string, string | Buffer> = { "README.md": "hello\n" }, commit = true): TempRepo {
  const base = mkdtempSync(join(tmpdir(), "dsh-git-"));
  const dir = join(base, "repo");
  mkdirSync(dir);
  git(dir, "init", "-q");
  for (const [rel, content] of Object.entries(files)) write(dir, rel, content);
  if (commit) {
    git(dir, "add", "-A");
    git(dir, "commit", "-q", "-m", "initial");
  }
  return { dir, base, cleanup: () => rmSync(base, { recursive: true, force: true }) };
}

/** Stage everything and commit with the test identity. */
export function commitAll(dir: string, message: string): string {
  git(dir, "add", "-A");
  git(dir, "commit", "-q", "-m", message);
  return git(dir, "rev-parse", "HEAD").trim();
}

/** A committed repo at <parent>/<name> with a README; its identity is in the repo's own config, for the children. */
export function initRepo(parent: string, name = "repo"): string {
  const dir = join(parent, name);
  mkdirSync(dir, { recursive: true });
  git(dir, "init", "-q");
  git(dir, "config", "user.email", "t@example.invalid");
  git(dir, "config", "user.name", "t");
  write(dir, "README.md", "# demo\n");
  commitAll(dir, "init");
  return dir;
}
