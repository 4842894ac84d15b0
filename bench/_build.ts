// Another commit's bench daemon, built apart from this checkout, for an A/B of two builds under one driver: the
// commit's tree is exported (git archive, so this repository's worktrees and index are left alone) into a temp dir
// that shares this checkout's node_modules, and only bench/_daemon.ts and what it imports are compiled (seconds,
// not the whole tree). The dir is removed when the process exits.
import { execFileSync } from "node:child_process";
import { existsSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot, tempDir } from "./_util.js";

export interface Build {
  /** The commit, abbreviated, as `git rev-parse --short` says it. */
  commit: string;
  /** The exported tree holding dist/bench/_daemon.js (bench/_harness.ts startDaemon's `root`). */
  root: string;
}

export function buildAt(rev: string): Build {
  const git = (...args: string[]) => execFileSync("git", args, { cwd: repoRoot, encoding: "utf8" }).trim();
  let commit: string;
  try {
    commit = git("rev-parse", "--short", "--verify", `${rev}^{commit}`);
  } catch {
    throw new Error(`bench: "${rev}" names no commit in ${repoRoot}; pass a commit, branch or tag to --before`);
  }
  const { dir } = tempDir(`build-${commit}`);
  const tar = execFileSync("git", ["archive", "--format=tar", commit], { cwd: repoRoot, maxBuffer: 1 << 30 });
  execFileSync("tar", ["-x", "-C", dir], { input: tar });
  symlinkSync(realpathSync(join(repoRoot, "node_modules")), join(dir, "node_modules"));
  writeFileSync(
    join(dir, "tsconfig.bench-build.json"),
    JSON.stringify({ extends: "./tsconfig.json", include: [], files: ["bench/_daemon.ts"] }),
  );
  const tsc = join(dir, "node_modules", "typescript", "bin", "tsc");
  try {
    execFileSync(process.execPath, [tsc, "-p", "tsconfig.bench-build.json"], { cwd: dir, stdio: "pipe" });
  } catch (e) {
    const out = (e as { stdout?: Buffer }).stdout?.toString() ?? "";
    throw new Error(`bench: building ${commit}'s bench daemon failed:\n${out.slice(0, 2000)}`);
  }
  if (!existsSync(join(dir, "dist", "bench", "_daemon.js")))
    throw new Error(`bench: ${commit} has no bench/_daemon.ts to build`);
  return { commit, root: dir };
}
