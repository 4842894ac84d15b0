// Baseline and diff harvest on real git repositories in temp dirs.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  chmodSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { captureBaseline } from "../../src/git/baseline.js";
import { harvestDiff } from "../../src/git/diff.js";
import { commitAll, git, gitBytes, makeRepo, write } from "../helpers/git.js";

test("baseline records HEAD and dirty files; harvest includes modified, staged and untracked files", async () => {
  const r = makeRepo({ "a.txt": "one\n", "keep.txt": "k\n" });
  try {
    write(r.dir, "a.txt", "one\ndirty before spawn\n");
    const b = await captureBaseline(r.dir);
    assert.equal(b.isRepo, true);
    assert.equal(b.baselineHead, git(r.dir, "rev-parse", "HEAD").trim());
    assert.deepEqual(b.dirtyAtStart, [" M a.txt"]);

    write(r.dir, "new file.txt", "brand new\n");
    write(r.dir, "keep.txt", "k\nchanged\n");
    git(r.dir, "add", "keep.txt");
    const patchPath = join(r.base, "diff.patch");
    const d = await harvestDiff({ cwd: r.dir, baselineHead: b.baselineHead, dirtyAtStart: b.dirtyAtStart, patchPath });
    assert.deepEqual(d.untracked, ["new file.txt"]);
    assert.deepEqual([...d.files].sort(), ["a.txt", "keep.txt", "new file.txt"]);
    assert.equal(
      d.stat,
      git(r.dir, "diff", "--shortstat", "HEAD")
        .replace(/\n$/, "")
        .replace(" 2 files changed, 2 insertions(+)", " 3 files changed, 3 insertions(+)"),
    );
    const patch = readFileSync(patchPath, "utf8");
    assert.match(patch, /diff --git a\/new file.txt b\/new file.txt\nnew file mode 100644/);
    assert.match(patch, /\+brand new/);
    assert.equal(d.patchBytes, statSync(patchPath).size);
    assert.equal(d.truncated, false);
    assert.deepEqual(d.dirtyAtStart, [" M a.txt"]);
    // The patch applies cleanly to the baseline commit and reproduces the work.
    const clone = join(r.base, "clone");
    git(r.base, "clone", "-q", r.dir, clone);
    git(clone, "apply", "--index", patchPath);
    assert.equal(readFileSync(join(clone, "new file.txt"), "utf8"), "brand new\n");
  } finally {
    r.cleanup();
  }
});

test("the user's index is byte-identical before and after a harvest", async () => {
  const r = makeRepo({ "a.txt": "1\n", "b.txt": "2\n" });
  try {
    const head = git(r.dir, "rev-parse", "HEAD").trim();
    write(r.dir, "a.txt", "1\nstaged\n");
    git(r.dir, "add", "a.txt");
    write(r.dir, "a.txt", "1\nstaged\nunstaged\n");
    write(r.dir, "u.txt", "untracked\n");
    const cachedBefore = gitBytes(r.dir, "diff", "--cached");
    const indexBefore = readFileSync(join(r.dir, ".git", "index"));
    const statusBefore = git(r.dir, "status", "--porcelain");
    const d = await harvestDiff({ cwd: r.dir, baselineHead: head, patchPath: join(r.base, "p.patch") });
    assert.ok(d.untracked.includes("u.txt"));
    assert.deepEqual(gitBytes(r.dir, "diff", "--cached"), cachedBefore);
    assert.deepEqual(readFileSync(join(r.dir, ".git", "index")), indexBefore);
    assert.equal(git(r.dir, "status", "--porcelain"), statusBefore);
  } finally {
    r.cleanup();
  }
});

test("the throwaway index lives beside the patch and is gone after a harvest; one a killed harvest left is removed by the next", async () => {
  const r = makeRepo({ "a.txt": "1\n" });
  try {
    const head = git(r.dir, "rev-parse", "HEAD").trim();
    write(r.dir, "a.txt", "2\n");
    const taskDir = join(r.base, "task");
    mkdirSync(join(taskDir, ".harvest-killed"), { recursive: true });
    writeFileSync(join(taskDir, ".harvest-killed", "index"), "a copy of the user's index");
    const d = await harvestDiff({ cwd: r.dir, baselineHead: head, patchPath: join(taskDir, "diff.patch") });
    assert.deepEqual(d.files, ["a.txt"]);
    assert.deepEqual(readdirSync(taskDir), ["diff.patch"], "no work dir left, the stale one removed");
  } finally {
    r.cleanup();
  }
});

test("a patch over the cap is cut at a file boundary, says so, and patchBytes is the file size", async () => {
  const files: Record<string, string> = {};
  for (let i = 0; i < 20; i++) files[`f${String(i).padStart(2, "0")}.txt`] = "x\n";
  const r = makeRepo(files);
  try {
    const head = git(r.dir, "rev-parse", "HEAD").trim();
    for (let i = 0; i < 20; i++)
      write(
        r.dir,
        `f${String(i).padStart(2, "0")}.txt`,
        "y".repeat(300) + "\n".repeat(1) + String(i).repeat(200) + "\n",
      );
    const patchPath = join(r.base, "diff.patch");
    const d = await harvestDiff({ cwd: r.dir, baselineHead: head, patchPath, capBytes: 4096 });
    assert.equal(d.truncated, true);
    assert.equal(d.patchBytes, statSync(patchPath).size);
    assert.equal(d.files.length, 20, "files and stat still describe the whole change");
    const text = readFileSync(patchPath, "utf8");
    const [body, note] = text.split("\n# dsh-herdr: diff truncated");
    assert.ok(note !== undefined && /patchCapBytes 4096/.test(note) && /git diff --binary/.test(note));
    assert.ok(Buffer.byteLength(body!) <= 4096);
    const kept = body!.match(/^diff --git /gm)?.length ?? 0;
    assert.ok(kept > 0 && kept < 20, `kept ${kept} whole files`);
    assert.ok(body!.endsWith("\n") && /^diff --git a\/f00\.txt/.test(body!));
    // Every kept file patch is whole: the kept part applies on its own.
    const clone = join(r.base, "clone");
    git(r.base, "clone", "-q", r.dir, clone);
    writeFileSync(join(r.base, "kept.patch"), body!);
    git(clone, "apply", "--check", join(r.base, "kept.patch"));
  } finally {
    r.cleanup();
  }
});

test("subdirectory cwd, spaces and non-ASCII names are exact", async () => {
  const r = makeRepo({ "src/lib/a.ts": "a\n", "docs/é ü/read me.md": "x\n" });
  try {
    const sub = join(r.dir, "src", "lib");
    write(r.dir, "docs/é ü/read me.md", "x\ny\n");
    const b = await captureBaseline(sub);
    assert.equal(b.repoRoot, r.dir);
    assert.deepEqual(b.dirtyAtStart, [" M docs/é ü/read me.md"]);
    write(r.dir, "docs/ñew file.md", "n\n");
    write(r.dir, "src/lib/b.ts", "b\n");
    const d = await harvestDiff({ cwd: sub, baselineHead: b.baselineHead, patchPath: join(r.base, "p.patch") });
    assert.deepEqual([...d.untracked].sort(), ["docs/ñew file.md", "src/lib/b.ts"]);
    assert.ok(d.files.includes("docs/é ü/read me.md"));
    assert.match(readFileSync(join(r.base, "p.patch"), "utf8"), /\+\+\+ b\/docs\/ñew file\.md/);
  } finally {
    r.cleanup();
  }
});

test("a repo with no commits diffs against the empty tree; a non-repo gives a warning", async () => {
  const r = makeRepo({ "a.txt": "first\n" }, false);
  try {
    const b = await captureBaseline(r.dir);
    assert.equal(b.baselineHead, null);
    assert.deepEqual(b.dirtyAtStart, ["?? a.txt"]);
    const d = await harvestDiff({ cwd: r.dir, baselineHead: null, patchPath: join(r.base, "p.patch") });
    assert.deepEqual(d.files, ["a.txt"]);
    assert.equal(d.baselineHead, null);
    assert.equal(d.stat, " 1 file changed, 1 insertion(+)");
    const plain = join(r.base, "plain");
    mkdirSync(plain);
    const nb = await captureBaseline(plain);
    assert.equal(nb.isRepo, false);
    assert.match(nb.warnings[0] ?? "", /not a git repository/);
    await assert.rejects(harvestDiff({ cwd: plain, baselineHead: null, patchPath: join(r.base, "q.patch") }), {
      code: "NOT_A_REPO",
    });
  } finally {
    r.cleanup();
  }
});

test("binary, rename, delete, mode change and ignored files", async () => {
  const r = makeRepo({
    "img.bin": Buffer.from([0, 1, 2, 3, 0, 255]),
    "old name.txt": "line one\nline two\nline three\n",
    "gone.txt": "bye\n",
    "run.sh": "echo hi\n",
    ".gitignore": "*.log\n",
    "moved.txt": "alpha\nbeta\ngamma\ndelta\n",
  });
  try {
    const head = git(r.dir, "rev-parse", "HEAD").trim();
    write(r.dir, "img.bin", Buffer.from([0, 9, 9, 9, 0, 254, 7]));
    git(r.dir, "mv", "old name.txt", "new name.txt");
    renameSync(join(r.dir, "moved.txt"), join(r.dir, "moved-by-mv.txt")); // unstaged rename: an untracked file + a deletion
    unlinkSync(join(r.dir, "gone.txt"));
    chmodSync(join(r.dir, "run.sh"), 0o755);
    write(r.dir, "debug.log", "ignored\n");
    const patchPath = join(r.base, "p.patch");
    const d = await harvestDiff({ cwd: r.dir, baselineHead: head, patchPath });
    assert.deepEqual([...d.files].sort(), [
      "gone.txt",
      "img.bin",
      "moved-by-mv.txt",
      "moved.txt",
      "new name.txt",
      "old name.txt",
      "run.sh",
    ]);
    assert.deepEqual(d.untracked, ["moved-by-mv.txt"]);
    const patch = readFileSync(patchPath, "utf8");
    assert.match(patch, /GIT binary patch/);
    assert.match(patch, /rename from old name\.txt\nrename to new name\.txt/);
    assert.match(patch, /deleted file mode 100644/);
    assert.match(patch, /rename from moved\.txt\nrename to moved-by-mv\.txt/);
    assert.match(patch, /old mode 100644\nnew mode 100755/);
    assert.doesNotMatch(patch, /debug\.log/);
    git(r.dir, "add", "-N", "moved-by-mv.txt"); // only to ask git itself for the expected stat line
    assert.equal(d.stat, git(r.dir, "diff", "--shortstat", "-M", "HEAD").replace(/\n$/, ""));
    const clone = join(r.base, "clone");
    git(r.base, "clone", "-q", r.dir, clone);
    git(clone, "apply", "--index", patchPath);
    assert.deepEqual(readFileSync(join(clone, "img.bin")), Buffer.from([0, 9, 9, 9, 0, 254, 7]));
    assert.equal(statSync(join(clone, "run.sh")).mode & 0o111, 0o111);
  } finally {
    r.cleanup();
  }
});

test("commits the child made since the baseline are in the diff", async () => {
  const r = makeRepo({ "a.txt": "a\n" });
  try {
    const head = git(r.dir, "rev-parse", "HEAD").trim();
    write(r.dir, "committed.txt", "by the child\n");
    commitAll(r.dir, "child work");
    write(r.dir, "a.txt", "a\nuncommitted\n");
    const d = await harvestDiff({ cwd: r.dir, baselineHead: head, patchPath: join(r.base, "p.patch") });
    assert.deepEqual([...d.files].sort(), ["a.txt", "committed.txt"]);
    assert.match(readFileSync(join(r.base, "p.patch"), "utf8"), /\+by the child/);
  } finally {
    rmSync(r.base, { recursive: true, force: true });
  }
});

test("no changes gives an empty patch and a zero stat", async () => {
  const r = makeRepo();
  try {
    const head = git(r.dir, "rev-parse", "HEAD").trim();
    const d = await harvestDiff({ cwd: r.dir, baselineHead: head, patchPath: join(r.base, "p.patch") });
    assert.deepEqual(d.files, []);
    assert.equal(d.patchBytes, 0);
    assert.equal(d.stat, " 0 files changed");
  } finally {
    r.cleanup();
  }
});

test("a cwd's repo is asked of git once across harvests, and found again when a repo is made anew under the path", async () => {
  const r = makeRepo({ "a.txt": "a\n" });
  // A git on PATH that logs each call before running the real one (the harvest finds git through PATH).
  const bin = join(r.base, "bin");
  const log = join(r.base, "git-calls.log");
  mkdirSync(bin);
  writeFileSync(join(bin, "git"), `#!/bin/sh\necho "$*" >> '${log}'\nexec ${gitPath()} "$@"\n`, { mode: 0o755 });
  const path = process.env.PATH;
  process.env.PATH = `${bin}:${path}`;
  try {
    const head = git(r.dir, "rev-parse", "HEAD").trim();
    const harvest = (base: string | null) =>
      harvestDiff({ cwd: r.dir, baselineHead: base, patchPath: join(r.base, "p.patch") });
    write(r.dir, "a.txt", "a\nchanged\n");
    await harvest(head);
    await harvest(head);
    const locates = () =>
      readFileSync(log, "utf8")
        .split("\n")
        .filter((l) => l.includes("--git-path index"));
    assert.equal(locates().length, 1, "the second harvest of the same cwd did not ask where the repo is");

    // The same path, a new repository in another object format: its empty blob (for untracked files) differs.
    rmSync(join(r.dir, ".git"), { recursive: true, force: true });
    git(r.dir, "init", "-q", "--object-format=sha256");
    commitAll(r.dir, "again");
    write(r.dir, "new.txt", "untracked\n");
    const d = await harvest(git(r.dir, "rev-parse", "HEAD").trim());
    assert.deepEqual(d.untracked, ["new.txt"]);
    assert.match(readFileSync(join(r.base, "p.patch"), "utf8"), /\+untracked/);
    assert.equal(locates().length, 2, "the new repository was located again");
  } finally {
    process.env.PATH = path;
    r.cleanup();
  }
});

/** The real git's path (the wrapper must not find itself). */
function gitPath(): string {
  for (const dir of (process.env.PATH ?? "").split(":")) {
    try {
      if (statSync(join(dir, "git")).isFile()) return join(dir, "git");
    } catch {
      // not here
    }
  }
  return "git";
}
