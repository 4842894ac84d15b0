// Facts about the repository around a directory: its top level, HEAD (or none yet), the empty tree.
import { readFile, stat } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { DshError } from "../core/errors.js";
import { git, gitProbe } from "./run.js";

/** The repo's top-level directory, or undefined when cwd is not inside a work tree. */
export async function repoRoot(cwd: string): Promise<string | undefined> {
  const st = await stat(cwd).catch(() => undefined);
  if (st === undefined || !st.isDirectory()) {
    throw new DshError("BAD_PARAMS", `${cwd} is not a directory; pass an existing working directory.`);
  }
  // One git call: "true\n<top level>" inside a work tree; inside .git, "false" and an error; elsewhere an error.
  const out = await gitProbe(cwd, ["rev-parse", "--is-inside-work-tree", "--show-toplevel"]);
  const [inside, top] = (out ?? "").split("\n");
  return inside === "true" && top ? top : undefined;
}

/** The top level and HEAD in one git call (HEAD null before the first commit); undefined outside a work tree. */
export async function repoFacts(cwd: string): Promise<{ root: string; head: string | null } | undefined> {
  const out = await gitProbe(cwd, [
    "rev-parse",
    "--is-inside-work-tree",
    "--show-toplevel",
    "--verify",
    "-q",
    "HEAD^{commit}",
  ]);
  const [inside, top, sha] = (out ?? "").split("\n");
  if (inside === "true" && top && sha && /^[0-9a-f]{40,64}$/.test(sha)) return { root: top, head: sha };
  // No HEAD yet (or not a repo): ask for the top level alone.
  const root = await repoRoot(cwd);
  return root === undefined ? undefined : { root, head: await headCommit(root) };
}

/**
 * The work tree around `cwd` found the way git discovers it (the nearest directory with a `.git` entry), without
 * running git: the spawn request's check for an isolated task, whose `git worktree add` then asks git itself (and
 * fails with git's words if git disagrees). HEAD is not read here: the new worktree's branch gives it.
 */
export async function locateRepo(cwd: string): Promise<{ root: string } | undefined> {
  const st = await stat(cwd).catch(() => undefined);
  if (st === undefined || !st.isDirectory()) {
    throw new DshError("BAD_PARAMS", `${cwd} is not a directory; pass an existing working directory.`);
  }
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    if (basename(dir) === ".git") return undefined; // inside a git dir: not a work tree
    const dotGit = join(dir, ".git");
    const g = await stat(dotGit).catch(() => undefined);
    if (g?.isDirectory() && (await stat(join(dotGit, "HEAD")).catch(() => undefined))) return { root: dir };
    // A linked worktree or submodule: .git is a file naming the git dir.
    if (g?.isFile() && (await readFile(dotGit, "utf8").catch(() => "")).startsWith("gitdir:")) return { root: dir };
    if (dirname(dir) === dir) return undefined;
  }
}

/** locateRepo, or NOT_A_REPO naming the fix. */
export async function requireRepo(cwd: string): Promise<{ root: string }> {
  const found = await locateRepo(cwd);
  if (found === undefined)
    throw new DshError(
      "NOT_A_REPO",
      `${cwd} is not inside a git work tree; run \`git init\` there or pick a repo directory.`,
    );
  return found;
}

/** repoFacts, or NOT_A_REPO naming the fix. */
export async function requireRepoFacts(cwd: string): Promise<{ root: string; head: string | null }> {
  const facts = await repoFacts(cwd);
  if (facts === undefined)
    throw new DshError(
      "NOT_A_REPO",
      `${cwd} is not inside a git work tree; run \`git init\` there or pick a repo directory.`,
    );
  return facts;
}

export async function requireRepoRoot(cwd: string): Promise<string> {
  const root = await repoRoot(cwd);
  if (root === undefined)
    throw new DshError(
      "NOT_A_REPO",
      `${cwd} is not inside a git work tree; run \`git init\` there or pick a repo directory.`,
    );
  return root;
}

/** The commit HEAD points at, or null in a repo with no commits yet. */
export async function headCommit(root: string): Promise<string | null> {
  const out = await gitProbe(root, ["rev-parse", "--verify", "HEAD^{commit}"]);
  const sha = out?.trim() ?? "";
  return /^[0-9a-f]{40,64}$/.test(sha) ? sha : null;
}

/** The empty tree's id in this repo's hash (sha1 or sha256): the baseline of a repo with no commits. */
export async function emptyTree(root: string): Promise<string> {
  return (await git(root, ["hash-object", "-t", "tree", "/dev/null"])).trim();
}
