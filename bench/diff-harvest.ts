// Diff harvest vs plain git on a synthetic repo (20,000 files, 1,000 changed, 100 untracked). Prints the harvest
// time as a ratio to `git diff <base>` + `git ls-files --others --exclude-standard` measured in the same run.
// Target: at most 1.5x. Run: node dist/bench/diff-harvest.js
import { spawnSync } from "node:child_process";
import { closeSync, mkdirSync, mkdtempSync, openSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { harvestDiff } from "../src/git/diff.js";
import { quietRepo, removeDir, sizes } from "./_util.js";

// FILES is a multiple of 100 (one package per 100 files) with at least UNTRACKED and IGNORED packages.
const { FILES, CHANGED, UNTRACKED, IGNORED, RUNS } = sizes(
  { FILES: 20_000, CHANGED: 1_000, UNTRACKED: 100, IGNORED: 50, RUNS: 7 },
  { FILES: 1_000, CHANGED: 50, UNTRACKED: 5, IGNORED: 5, RUNS: 2 },
);
const TARGET = 1.5;

function git(cwd: string, args: string[], out: number | "pipe" = "pipe"): string {
  const r = spawnSync(
    "git",
    ["-c", "user.name=bench", "-c", "user.email=bench@dsh.invalid", "-c", "commit.gpgsign=false", ...args],
    {
      cwd,
      stdio: ["ignore", out, "pipe"],
      encoding: "utf8",
      maxBuffer: 512 * 1024 * 1024,
    },
  );
  if (r.status !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr}`);
  return r.stdout ?? "";
}

function body(i: number, variant: string): string {
  let s = `// file ${i} ${variant}\n`;
  for (let l = 0; l < 20; l++) s += `export const v${l} = ${(i * 31 + l) % 997}; // ${variant}\n`;
  return s;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function main(): Promise<void> {
  const base = mkdtempSync(join(tmpdir(), "dsh-bench-diff-"));
  const repo = join(base, "repo");
  try {
    const t0 = performance.now();
    mkdirSync(repo);
    git(repo, ["init", "-q"]);
    quietRepo(repo); // no detached gc after the 20,000-file commit (it made the cleanup fail with ENOTEMPTY)
    for (let d = 0; d < FILES / 100; d++) {
      mkdirSync(join(repo, `pkg${d}`, "src"), { recursive: true });
      for (let f = 0; f < 100; f++) writeFileSync(join(repo, `pkg${d}`, "src", `m${f}.ts`), body(d * 100 + f, "v1"));
    }
    writeFileSync(join(repo, ".gitignore"), "*.log\n");
    git(repo, ["add", "-A"]);
    git(repo, ["commit", "-q", "-m", "base"]);
    const head = git(repo, ["rev-parse", "HEAD"]).trim();
    const step = Math.floor(FILES / CHANGED);
    for (let k = 0; k < CHANGED; k++) {
      const i = k * step;
      writeFileSync(join(repo, `pkg${Math.floor(i / 100)}`, "src", `m${i % 100}.ts`), body(i, "v2"));
    }
    for (let k = 0; k < UNTRACKED; k++) writeFileSync(join(repo, `pkg${k}`, `new-${k}.ts`), body(k, "new"));
    for (let k = 0; k < IGNORED; k++) writeFileSync(join(repo, `pkg${k}`, `debug-${k}.log`), "ignored\n");
    git(repo, ["status", "--porcelain"]); // refresh the index's stat cache once, as a user's repo would have
    const setupMs = performance.now() - t0;

    const plainOut = join(base, "plain.patch");
    const plain: number[] = [];
    const harvest: number[] = [];
    let last: Awaited<ReturnType<typeof harvestDiff>> | undefined;
    for (let r = 0; r < RUNS; r++) {
      // Alternate, so drift in the machine's load affects both sides alike.
      const a = performance.now();
      const fd = openSync(plainOut, "w");
      git(repo, ["diff", head], fd);
      closeSync(fd);
      git(repo, ["ls-files", "--others", "--exclude-standard"]);
      plain.push(performance.now() - a);
      const b = performance.now();
      last = await harvestDiff({
        cwd: repo,
        baselineHead: head,
        patchPath: join(base, "diff.patch"),
        capBytes: 64 * 1024 * 1024,
      });
      harvest.push(performance.now() - b);
    }
    const ratio = median(harvest) / median(plain);
    console.log(
      `machine: ${cpus().length} x ${cpus()[0]?.model ?? "cpu"}, node ${process.version}, ${git(repo, ["--version"]).trim()}`,
    );
    console.log(
      `repo: ${FILES} files, ${CHANGED} changed, ${UNTRACKED} untracked (setup ${(setupMs / 1000).toFixed(1)} s)`,
    );
    console.log(
      `harvest: ${last?.files.length} files, ${last?.untracked.length} untracked, patch ${last?.patchBytes} bytes, stat "${last?.stat.trim()}"`,
    );
    console.log(
      `plain git diff + ls-files: median ${median(plain).toFixed(1)} ms  [${plain.map((x) => x.toFixed(0)).join(", ")}]`,
    );
    console.log(
      `harvestDiff:               median ${median(harvest).toFixed(1)} ms  [${harvest.map((x) => x.toFixed(0)).join(", ")}]`,
    );
    console.log(`ratio: ${ratio.toFixed(2)}x (target <= ${TARGET}x) ${ratio <= TARGET ? "OK" : "OVER TARGET"}`);
    if (last?.files.length !== CHANGED + UNTRACKED || last.untracked.length !== UNTRACKED) {
      console.error("harvest result is wrong: expected every changed and untracked file");
      process.exitCode = 1;
    }
  } finally {
    removeDir(base);
  }
}

await main();
