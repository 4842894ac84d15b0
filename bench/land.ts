// land vs plain git on a synthetic repo: a task worktree with a 1,000-file uncommitted change, its base moved by
// another commit since it branched. Measures landTask (snapshot, merge-tree, merge commit, the checkout moved,
// the task branch and index updated) against doing it by hand: `git add -A && git commit` in the worktree and
// `git merge --no-edit` in the checkout; and, second, against that `git merge` alone. Each run starts from the same
// state (the checkout reset to the moved base, the task branch back at its tip with the change uncommitted).
// Run: node dist/bench/land.js
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { landTask } from "../src/git/land.js";
import { childIdentity } from "../src/git/landability.js";
import { createWorktree } from "../src/git/worktree.js";
import { median, printFigure, quietRepo, removeDir, sizes } from "./_util.js";

const { FILES, CHANGED, RUNS } = sizes(
  { FILES: 10_000, CHANGED: 1_000, RUNS: 7 },
  { FILES: 400, CHANGED: 40, RUNS: 2 },
);
const TASK = "tmg3k2a1d001";

function git(cwd: string, args: string[]): string {
  const r = spawnSync(
    "git",
    ["-c", "user.name=bench", "-c", "user.email=bench@dsh.invalid", "-c", "commit.gpgsign=false", ...args],
    { cwd, stdio: ["ignore", "pipe", "pipe"], encoding: "utf8", maxBuffer: 512 * 1024 * 1024 },
  );
  if (r.status !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr}`);
  return r.stdout ?? "";
}

function body(i: number, variant: string): string {
  let s = `// file ${i} ${variant}\n`;
  for (let l = 0; l < 20; l++) s += `export const v${l} = ${(i * 31 + l) % 997}; // ${variant}\n`;
  return s;
}

const fileOf = (i: number) => join(`pkg${Math.floor(i / 100)}`, `m${i % 100}.ts`);

async function main(): Promise<void> {
  const base = mkdtempSync(join(tmpdir(), "dsh-bench-land-"));
  const repo = join(base, "repo");
  try {
    const t0 = performance.now();
    mkdirSync(repo);
    git(repo, ["init", "-q", "-b", "main"]);
    quietRepo(repo);
    for (let d = 0; d < FILES / 100; d++) {
      mkdirSync(join(repo, `pkg${d}`), { recursive: true });
      for (let f = 0; f < 100; f++) writeFileSync(join(repo, fileOf(d * 100 + f)), body(d * 100 + f, "v1"));
    }
    git(repo, ["add", "-A"]);
    git(repo, ["commit", "-q", "-m", "base"]);
    const wt = await createWorktree({ repoCwd: repo, home: join(base, "home"), taskId: TASK });
    const tip = wt.head;
    // The child's change: CHANGED files of the first half, uncommitted.
    const step = Math.floor(FILES / 2 / CHANGED);
    for (let k = 0; k < CHANGED; k++) writeFileSync(join(wt.path, fileOf(k * step)), body(k * step, "child"));
    // The base moves: a commit touching files of the other half.
    for (let k = 0; k < 50; k++) writeFileSync(join(repo, fileOf(FILES - 1 - k)), body(FILES - 1 - k, "base"));
    git(repo, ["commit", "-q", "-am", "base moves"]);
    const moved = git(repo, ["rev-parse", "HEAD"]).trim();
    git(repo, ["status", "--porcelain"]);
    git(wt.path, ["status", "--porcelain"]);
    const setupMs = performance.now() - t0;

    /** Back to the start: checkout at the moved base, task branch at its tip, the change uncommitted again. */
    const reset = () => {
      git(repo, ["reset", "-q", "--hard", moved]);
      git(wt.path, ["update-ref", `refs/heads/${wt.branch}`, tip]);
      git(wt.path, ["reset", "-q"]);
      git(wt.path, ["status", "--porcelain"]);
    };
    const author = childIdentity("worker-bench-d001", TASK);
    const byHand: number[] = [];
    const mergeOnly: number[] = [];
    const land: number[] = [];
    let said = "";
    for (let r = 0; r < RUNS; r++) {
      // Alternate, so drift in the machine's load affects both sides alike.
      reset();
      const a = performance.now();
      git(wt.path, ["add", "-A"]);
      git(wt.path, ["commit", "-q", "-m", "child work"]);
      const m = performance.now();
      git(repo, ["merge", "-q", "--no-edit", wt.branch]);
      const b = performance.now();
      byHand.push(b - a);
      mergeOnly.push(b - m);
      reset();
      const c = performance.now();
      const out = await landTask({ taskId: TASK, worktree: wt, author, message: "child work" });
      land.push(performance.now() - c);
      said = `${out.landing.strategy}: ${out.said}`;
      if (out.landing.strategy !== "merge" || git(repo, ["rev-parse", "HEAD"]).trim() !== out.landing.landedAs)
        throw new Error(`land did not make the merge commit: ${JSON.stringify(out)}`);
    }
    console.log(
      `machine: ${cpus().length} x ${cpus()[0]?.model ?? "cpu"}, node ${process.version}, ${git(repo, ["--version"]).trim()}`,
    );
    console.log(
      `repo: ${FILES} files, the task changed ${CHANGED} (uncommitted), the base moved by 50 (setup ${(setupMs / 1000).toFixed(1)} s); land: ${said}`,
    );
    console.log(`by hand (add + commit + merge): [${byHand.map((x) => x.toFixed(0)).join(", ")}] ms`);
    console.log(`git merge alone:                [${mergeOnly.map((x) => x.toFixed(0)).join(", ")}] ms`);
    console.log(`landTask:                       [${land.map((x) => x.toFixed(0)).join(", ")}] ms`);
    const n = CHANGED.toLocaleString("en-US");
    printFigure({
      name: `land of a ${n}-file change against a moved base (median of ${RUNS})`,
      value: median(land),
      unit: "ms",
      baselineName: "git add + commit + merge by hand",
      baseline: median(byHand),
      better: "lower",
    });
    printFigure({
      name: `land of a ${n}-file change against a moved base (median of ${RUNS})`,
      value: median(land),
      unit: "ms",
      baselineName: "git merge alone",
      baseline: median(mergeOnly),
      better: "lower",
    });
    console.log(
      `land / by hand: ${(median(land) / median(byHand)).toFixed(2)}x; land / git merge alone: ${(median(land) / median(mergeOnly)).toFixed(2)}x (measured / baseline, lower is better)`,
    );
  } finally {
    removeDir(base);
  }
}

await main();
