// The one change land makes to the user's checkout, and what it must never touch.
//
// Before: every path the landing creates, replaces or deletes is looked at in the checkout; anything there that git
// does not track (an untracked or ignored file, a directory holding one, a file where the landing needs a directory)
// refuses the landing by name. git's own fast-forward treats ignored files as expendable; the user's .env is not.
//
// The update itself is plumbing, not `git merge`: `git read-tree -m -u OLD NEW` on a copy of the checkout's index
// writes the changed files (refusing, like a merge, to overwrite anything it does not know), then the branch moves
// with a compare-and-swap `update-ref`, then the copy becomes the index by rename. So no merge hook runs (post-merge,
// post-checkout: the user's hooks for their own merges), the real index is never half-written, and on any failure
// (a full disk, a timeout, a signal) the files the update may have written are put back from the untouched index:
// what the landing added is removed, what it changed or removed is checked out again (`git checkout-index -f`). The
// changed paths are known exactly (the two trees' diff), so the put-back touches nothing else.
import { copyFile, lstat, mkdtemp, readdir, rename, rm, rmdir, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { DshError } from "../core/errors.js";
import { git, gitExit as gitExitAny, gitMaybe, gitStdinFile, gitStdinFileOut, splitZ, withoutCancel } from "./run.js";

/** Something in the checkout, not tracked there, that the landing would overwrite or remove. */
export interface InTheWay {
  path: string;
  /** Ignored by the checkout's .gitignore rules, or merely untracked. */
  kind: "ignored" | "untracked";
  what: "file" | "directory";
}

const SHOWN = 10;

function exists(p: string) {
  return lstat(p).then(
    (st) => st,
    (e: NodeJS.ErrnoException) => {
      if (e.code === "ENOENT" || e.code === "ENOTDIR") return undefined;
      throw e;
    },
  );
}

/** Paths that differ between two trees (both sides: added, changed, removed), one per file. */
export async function changedPaths(repo: string, from: string, to: string): Promise<string[]> {
  return splitZ(await git(repo, ["diff-tree", "-r", "-z", "--name-only", "--no-renames", from, to]));
}

/** What of the checkout's untracked and ignored content a landing from `from` to `to` would overwrite or remove. */
export async function checkoutInTheWay(repo: string, from: string, to: string): Promise<InTheWay[]> {
  const changed = await changedPaths(repo, from, to);
  if (changed.length === 0) return [];
  const tracked = new Set(splitZ(await git(repo, ["ls-files", "-z", "--cached"])));
  const trackedDirs = new Set<string>();
  for (const t of tracked)
    for (let i = t.indexOf("/"); i !== -1; i = t.indexOf("/", i + 1)) trackedDirs.add(t.slice(0, i));
  const found = new Map<string, "file" | "directory">();
  for (const p of changed) {
    // A file (or symlink) of the user's where the landing needs a directory.
    const parts = p.split("/");
    let blocked = false;
    for (let i = 1; i < parts.length && !blocked; i++) {
      const a = parts.slice(0, i).join("/");
      if (tracked.has(a)) break; // a tracked file the landing removes: the diff has it
      const st = await exists(join(repo, a));
      if (st && !st.isDirectory()) {
        found.set(a, "file");
        blocked = true;
      }
    }
    if (blocked || tracked.has(p)) continue; // a tracked file: the dirty check covers its content
    const st = await exists(join(repo, p));
    if (!st) continue;
    if (!st.isDirectory()) {
      found.set(p, "file");
      continue;
    }
    // A directory where the landing puts a file: wholly untracked, it is named itself; else what in it is untracked.
    if (!trackedDirs.has(p)) found.set(p, "directory");
    else for (const u of await untrackedUnder(repo, p, tracked, trackedDirs)) found.set(u.path, u.what);
  }
  if (found.size === 0) return [];
  const paths = [...found.keys()].sort();
  const ignored = await ignoredOf(repo, paths, found);
  return paths.map((path) => ({ path, what: found.get(path)!, kind: ignored.has(path) ? "ignored" : "untracked" }));
}

/** Which of `paths` the checkout's ignore rules ignore (`git check-ignore`, paths on stdin). */
async function ignoredOf(repo: string, paths: string[], what: Map<string, "file" | "directory">): Promise<Set<string>> {
  const dir = await mkdtemp(join(tmpdir(), `dsh-land-${process.pid}-`));
  try {
    const list = join(dir, "paths");
    await writeFile(list, paths.map((p) => (what.get(p) === "directory" ? `${p}/` : p)).join("\0") + "\0");
    const out = await gitStdinFileOut(repo, ["check-ignore", "-z", "--stdin", "--no-index"], list);
    return new Set(splitZ(out).map((p) => p.replace(/\/$/, "")));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Files and symlinks under `dir` (relative to the repo) that the index does not hold; wholly untracked subdirectories by name. */
async function untrackedUnder(
  repo: string,
  dir: string,
  tracked: Set<string>,
  trackedDirs: Set<string>,
): Promise<{ path: string; what: "file" | "directory" }[]> {
  const out: { path: string; what: "file" | "directory" }[] = [];
  const prefixOfTracked = (d: string) => trackedDirs.has(d);
  const walk = async (rel: string): Promise<void> => {
    for (const e of await readdir(join(repo, rel), { withFileTypes: true })) {
      const p = `${rel}/${e.name}`;
      if (e.isDirectory()) {
        if (prefixOfTracked(p)) await walk(p);
        else out.push({ path: p, what: "directory" });
      } else if (!tracked.has(p)) out.push({ path: p, what: "file" });
    }
  };
  await walk(dir);
  return out;
}

/** CHECKOUT_IN_THE_WAY naming what the landing from `from` to `to` would overwrite or remove, else nothing. */
export async function refuseIfInTheWay(repo: string, taskId: string, from: string, to: string): Promise<void> {
  const hit = await checkoutInTheWay(repo, from, to);
  if (hit.length === 0) return;
  const named = hit
    .slice(0, SHOWN)
    .map((h) => `${h.path} (${h.kind} ${h.what})`)
    .join(", ");
  const more = hit.length > SHOWN ? `, +${hit.length - SHOWN} more` : "";
  throw new DshError(
    "CHECKOUT_IN_THE_WAY",
    `landing task ${taskId} would overwrite or remove ${hit.length} path(s) in the checkout ${repo} that git does not track there: ${named}${more}; nothing was changed; move them out of the way (or commit them), then land again`,
    { paths: hit },
  );
}

/** Where the checkout's index is, and a private copy's path beside it (same filesystem: a rename replaces it). */
export async function indexPaths(repo: string, taskId: string): Promise<{ index: string; copy: string }> {
  const [gitDir = "", indexRel = ""] = (await git(repo, ["rev-parse", "--absolute-git-dir", "--git-path", "index"]))
    .trim()
    .split("\n");
  return { index: resolve(repo, indexRel), copy: join(gitDir, `dsh-land-${taskId}.index`) };
}

export interface CheckoutMove {
  repo: string;
  taskId: string;
  branch: string;
  from: string;
  to: string;
  message: string;
  /** Told after the files are written (the branch not moved yet), and after the branch moved. */
  progress?: (step: "checkout_updated" | "branch_moved") => void;
}

/**
 * Move the checkout and its branch from `from` to `to`, all or nothing. Throws with the checkout as it was (or, when
 * even the put-back failed, a message naming what was left and the command that restores it).
 */
export async function moveCheckout(m: CheckoutMove): Promise<void> {
  const { index, copy } = await indexPaths(m.repo, m.taskId);
  await rm(`${copy}.lock`, { force: true });
  await copyFile(index, copy); // the stat cache comes along: unchanged files are not rewritten
  const undo = async (why: string, code: "GIT_FAILED" | "TIMEOUT" | "LAND_CANCELLED" = "GIT_FAILED") => {
    await rm(copy, { force: true });
    await rm(`${copy}.lock`, { force: true });
    await restoreOrSay(m.repo, m.from, m.to, `${why}; nothing was landed`, code, absent);
  };
  const absent = new Set<string>();
  for (const p of await addedPaths(m.repo, m.from, m.to)) if (!(await exists(join(m.repo, p)))) absent.add(p);
  try {
    // Stat information refreshed first (as `git merge` does): a file touched but unchanged is not "not uptodate".
    await gitExitAny(m.repo, ["update-index", "-q", "--refresh"], { GIT_INDEX_FILE: copy });
    await git(m.repo, ["read-tree", "-m", "-u", m.from, m.to], { GIT_INDEX_FILE: copy });
  } catch (e) {
    const d = e as DshError;
    await undo(`could not update the checkout ${m.repo} to ${m.to.slice(0, 12)}: ${d.message}`, codeOf(d));
  }
  m.progress?.("checkout_updated");
  // The branch moves only from where it was (a commit made meanwhile refuses it); its new tip is read back rather than
  // taken from the exit code: a hook ended by the timeout may have let the move through.
  let failure: DshError | undefined;
  try {
    await git(m.repo, ["update-ref", "-m", m.message, `refs/heads/${m.branch}`, m.to, m.from]);
  } catch (e) {
    failure = e as DshError;
  }
  const tip = (await gitMaybeUnbounded(m.repo, ["rev-parse", "--verify", "-q", `refs/heads/${m.branch}`]))?.trim();
  if (tip !== m.to)
    await undo(
      `could not move ${m.branch} in ${m.repo} from ${m.from.slice(0, 12)} to ${m.to.slice(0, 12)}: ${failure?.message ?? `it is at ${tip ?? "nothing"}`}`,
      failure ? codeOf(failure) : "GIT_FAILED",
    );
  m.progress?.("branch_moved");
  await rename(copy, index);
}

function codeOf(e: DshError): "GIT_FAILED" | "TIMEOUT" | "LAND_CANCELLED" {
  return e.code === "TIMEOUT" || e.code === "LAND_CANCELLED" ? e.code : "GIT_FAILED";
}

/** A read that must answer even after a cancel: the truth about the branch decides what to undo. */
async function gitMaybeUnbounded(repo: string, args: string[]): Promise<string | undefined> {
  return withoutCancel(() => gitMaybe(repo, args));
}

/** Put back the checkout's files (restoreCheckout) and throw `why`; if that fails too, say what is left and how. */
async function restoreOrSay(
  repo: string,
  from: string,
  to: string,
  why: string,
  code: DshError["code"],
  absent: ReadonlySet<string>,
): Promise<never> {
  try {
    await restoreCheckout(repo, from, to, { absent });
  } catch (e) {
    const changed = await changedPaths(repo, from, to).catch(() => [] as string[]);
    const added = await addedPaths(repo, from, to).catch(() => [] as string[]);
    const shown =
      changed.slice(0, SHOWN).join(", ") + (changed.length > SHOWN ? `, +${changed.length - SHOWN} more` : "");
    const clean = added.length ? ` && git -C ${repo} clean -fdxq -- ${added.map(shellWord).join(" ")}` : "";
    throw new DshError(
      code,
      `${why}; the checkout could not be put back either (${(e as Error).message}): these paths may hold the landing's content: ${shown}; restore them with \`git -C ${repo} reset -q --hard ${from.slice(0, 12)}${clean}\``,
      { left: changed },
    );
  }
  throw new DshError(code, `${why}; the checkout is as it was`);
}

function shellWord(s: string): string {
  return /^[A-Za-z0-9._/@%+=:,-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`;
}

async function addedPaths(repo: string, from: string, to: string): Promise<string[]> {
  const out = splitZ(
    await git(repo, ["diff-tree", "-r", "-z", "--name-only", "--no-renames", "--diff-filter=A", from, to]),
  );
  return out;
}

/** Which of the landing's paths the put-back may touch. */
export interface RestoreScope {
  /**
   * Added paths found absent just before the update: whatever they hold now the update wrote. (One that was there
   * is the user's, made since the in-the-way check: git refused to overwrite it, and it is left alone.)
   */
  absent?: ReadonlySet<string>;
  /**
   * After a crash, with no record of what the update wrote: only a path holding the landing's own content (or, for a
   * path the landing deletes, missing) is put back; anything else there is the user's since, and left.
   */
  onlyOurs?: boolean;
}

/**
 * The checkout's files back to `from` on the paths a landing from `from` to `to` changes: what it added removed (with
 * the directories it made, once empty), the rest checked out from the index, which still holds `from`.
 */
export async function restoreCheckout(repo: string, from: string, to: string, scope: RestoreScope = {}): Promise<void> {
  await withoutCancel(async () => {
    const added = await addedPaths(repo, from, to);
    const addedSet = new Set(added);
    let inFrom = (await changedPaths(repo, from, to)).filter((p) => !addedSet.has(p));
    const ours = scope.onlyOurs ? await holdsLanded(repo, to, [...added, ...inFrom]) : undefined;
    // Removals first: they free the room the put-back needs on a full disk.
    for (const p of added) {
      if (scope.absent && !scope.absent.has(p)) continue;
      if (ours && !ours.has(p)) continue;
      const abs = join(repo, p);
      const st = await exists(abs);
      if (!st || st.isDirectory()) continue; // never a directory: the landing's paths are files
      await unlink(abs);
      for (let d = p.lastIndexOf("/"); d > 0; d = p.lastIndexOf("/", d - 1)) {
        try {
          await rmdir(join(repo, p.slice(0, d)));
        } catch {
          break; // not empty (or not there): it was the user's, or holds more
        }
      }
    }
    if (ours) inFrom = inFrom.filter((p) => ours.has(p));
    if (inFrom.length === 0) return;
    const dir = await mkdtemp(join(tmpdir(), `dsh-land-${process.pid}-`));
    try {
      const list = join(dir, "paths");
      await writeFile(list, inFrom.join("\0") + "\0");
      await gitStdinFile(repo, ["checkout-index", "-f", "-u", "-q", "-z", "--stdin"], list);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
}

/**
 * Of `paths`, those the checkout holds as the landing left them: the file's content is the landed blob, or the path
 * is missing where the landing deletes it.
 */
async function holdsLanded(repo: string, to: string, paths: string[]): Promise<Set<string>> {
  const blobs = new Map<string, string>();
  for (const line of splitZ(await git(repo, ["ls-tree", "-r", "-z", to]))) {
    const tab = line.indexOf("\t");
    blobs.set(line.slice(tab + 1), line.slice(0, tab).split(" ")[2] ?? "");
  }
  const out = new Set<string>();
  const present: string[] = [];
  for (const p of paths) {
    const st = await exists(join(repo, p));
    if (!st) {
      if (!blobs.has(p)) out.add(p); // deleted by the landing, and missing
    } else if (st.isFile() && blobs.has(p) && !p.includes("\n")) present.push(p);
  }
  if (present.length === 0) return out;
  const dir = await mkdtemp(join(tmpdir(), `dsh-land-${process.pid}-`));
  try {
    const list = join(dir, "paths");
    await writeFile(list, `${present.join("\n")}\n`);
    const hashes = (await gitStdinFileOut(repo, ["hash-object", "--stdin-paths"], list, [0])).trim().split("\n");
    present.forEach((p, i) => {
      if (hashes[i] === blobs.get(p)) out.add(p);
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  return out;
}
