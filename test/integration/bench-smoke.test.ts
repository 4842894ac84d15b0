// Smoke test of the benchmarks: `node scripts/run-bench.mjs` with BENCH_QUICK=1 (small sizes) runs every compiled
// script in dist/bench, each against a real daemon process, real git repos and real session files. A script that
// throws, fails its own check, or stops printing one of its figures fails this test. Figures are not judged (quick
// sizes measure nothing); only that each is printed once with a finite value and a finite baseline.
// The run gets a private TMPDIR, so any temp dir a script (or the daemon under it) leaves behind is seen here.
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const root = join(import.meta.dirname, "..", "..", "..");
const RUN_TIMEOUT_MS = 300_000;

/** A figure line as bench/_util.ts figureLine prints it; name and baseline are regex sources. */
interface Expected {
  name: string;
  unit: string;
  baseline: string;
}

const fig = (name: string, unit: string, baseline: string): Expected => ({ name, unit, baseline });

const STATUS: Expected[] = [];
// The quick plan of status-latency: both paths at N=1 and N=10.
for (const path of ["extension", "file"])
  for (const n of [1, 10])
    for (const p of [50, 99])
      for (const signal of ["owner\\.delivery", "task\\.wait returns", "board card \\(SSE\\)"])
        STATUS.push(fig(`status ${path} N=${n} p${p} append→${signal}`, "ms", "500 ms poll"));

const FIGURES: Record<string, Expected[]> = {
  "cli-startup": [
    ...["wall", "CPU"].flatMap((what) =>
      ["--version", "list", "show <id>"].map((c) =>
        fig(`dsh-herdr ${c} ${what} time \\(median of \\d+\\)`, "ms", "node -e 0"),
      ),
    ),
    fig("npm run demo wall time \\(3 tasks, real pi, scripted model\\)", "ms", "pi --version"),
  ],
  "live-tasks": [
    fig("daemon RSS, [\\d,]+ open tasks streaming", "MB", "idle daemon, empty home"),
    fig("task\\.list of [\\d,]+ open tasks, one page \\(p99 of \\d+\\)", "ms", "directory scan"),
    fig("status with [\\d,]+ open tasks streaming, \\d+ settling, p50 append→owner\\.delivery", "ms", "500 ms poll"),
    fig("status with [\\d,]+ open tasks streaming, \\d+ settling, p99 append→owner\\.delivery", "ms", "500 ms poll"),
    fig("daemon start recovering [\\d,]+ open tasks", "ms", "start on an empty home"),
  ],
  "memory-history": [
    fig("idle daemon RSS, [\\d,]+ closed \\+ \\d+ open tasks", "MB", "idle daemon, empty home"),
    fig("daemon start with \\d+ records \\(index repaired from task\\.json\\)", "ms", "start on an empty home"),
    fig("daemon start with \\d+ records \\(index current\\)", "ms", "start on an empty home"),
    fig("task\\.list limit 50 of \\d+ \\(p50\\)", "ms", "directory scan"),
    fig("task\\.list limit 50 of \\d+ \\(p99\\)", "ms", "directory scan"),
    fig("task\\.list default page \\(200\\) of \\d+ \\(p99\\)", "ms", "directory scan"),
    fig("task\\.list all \\d+ in pages of [\\d,]+ \\(median of 3\\)", "ms", "directory scan"),
  ],
  "session-read": [
    fig("session read \\d+ MB, daemon reader in-process", "MB/s", "wc -l"),
    fig("session read \\d+ MB, daemon reader in-process", "MB/s", "split\\+JSON\\.parse floor"),
    fig("one appended line after \\d+ MB read \\(reader\\)", "µs", "same on a 2 KB session"),
    fig("session read \\d+ MB by the daemon process \\(appear → settled push\\)", "MB/s", "wc -l"),
    fig("daemon RSS after reading \\d+ MB", "MB", "RSS before"),
    fig("daemon peak RSS \\(VmHWM\\) over the whole run", "MB", "RSS before"),
    fig("daemon: settling append → push, \\d+ MB session", "ms", "same on a 2 KB session"),
  ],
  "spawn-overhead": [
    fig("spawn→launch, isolated \\(p50 of \\d+\\)", "ms", "raw git worktree add \\+ launch"),
    fig("spawn→launch, isolated \\(p90 of \\d+\\)", "ms", "raw git worktree add \\+ launch"),
  ],
  "status-latency": STATUS,
  land: [
    fig(
      "land of a [\\d,]+-file change against a moved base \\(median of \\d+\\)",
      "ms",
      "git add \\+ commit \\+ merge by hand",
    ),
    fig("land of a [\\d,]+-file change against a moved base \\(median of \\d+\\)", "ms", "git merge alone"),
  ],
  "verify-all": [
    fig(
      "verify --all of [\\d,]+ closed tasks, rebuilt in full \\(median of \\d+\\)",
      "ms",
      "node reading and JSON\\.parse of their result\\.json",
    ),
  ],
  // Over real ssh to a second user; without root or sshd the script prints "remote-status skipped: <why>" instead.
  "remote-status": [50, 99].map((p) => fig(`status remote N=\\d+ p${p} append→owner\\.delivery`, "ms", "local N=\\d+")),
  // Several sshd users on 127.0.0.1, each its own daemon; skipped like remote-status.
  "remote-machines": [
    ...[50, 99].map((p) => fig(`status \\d+ machines × \\d+ p${p} append→owner\\.delivery`, "ms", "1 machine × \\d+")),
    fig(
      "status \\d+ machines × \\d+ p99 remote settle→owner\\.delivery \\(the links and this daemon\\)",
      "ms",
      "1 machine × \\d+",
    ),
    fig("local daemon RSS peak while \\d+ remote tasks stream", "MB", "idle, before the first spawn"),
  ],
};

/** diff-harvest prints its own lines, not figureLine: each pattern captures one number. */
const DIFF_LINES = [
  /^plain git diff \+ ls-files: median (\S+) ms/gm,
  /^harvestDiff: +median (\S+) ms/gm,
  /^ratio: (\S+)x \(target <= [\d.]+x\)/gm,
];

const SCRIPTS = [
  "cli-startup",
  "diff-harvest",
  "land",
  "live-tasks",
  "memory-history",
  "remote-machines",
  "remote-status",
  "session-read",
  "spawn-overhead",
  "status-latency",
  "verify-all",
];

/**
 * Pids of processes whose command line mentions `dir` (the bench daemons take their home under it) or whose working
 * directory is under it (a git child such as a detached `git gc --auto`, whose command line names no path).
 */
function processesNaming(dir: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, "utf8").includes(dir)) out.push(Number(name));
      else if (readlinkSync(`/proc/${name}/cwd`).startsWith(dir + "/")) out.push(Number(name));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return out;
}

/**
 * A global git config that makes git's automatic gc and maintenance run (detached) after nearly every commit, as a
 * busy machine's repos do after large commits: a bench repo that does not turn them off for itself then leaves a
 * git child writing into the temp dir it removes (the ENOTEMPTY cleanup failure that made `npm run bench` exit 1).
 */
function eagerGcConfig(dir: string): string {
  const path = join(dir, "gitconfig");
  writeFileSync(path, "[gc]\n\tauto = 1\n\tautoPackLimit = 1\n\tautoDetach = true\n[maintenance]\n\tauto = true\n");
  return path;
}

let tmp: string;
let gitHome: string;
let run: {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  leftDirs: string[];
  leftPids: number[];
};
/** The output of each `## <name>` section. */
const sections = new Map<string, string>();

describe("npm run bench, quick mode (BENCH_QUICK=1)", { timeout: RUN_TIMEOUT_MS + 30_000 }, () => {
  before(async () => {
    tmp = mkdtempSync(join(tmpdir(), "dsh-smoke-tmp-"));
    gitHome = mkdtempSync(join(tmpdir(), "dsh-smoke-git-"));
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      BENCH_QUICK: "1",
      TMPDIR: tmp,
      GIT_CONFIG_GLOBAL: eagerGcConfig(gitHome),
    };
    delete env.BENCH_KEEP; // kept dirs would read as leaks
    // Its own process group, so a timeout kills the bench scripts and their daemons too, not only run-bench.
    const child = spawn(process.execPath, [join(root, "scripts", "run-bench.mjs")], {
      cwd: root,
      env,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    const timer = setTimeout(() => process.kill(-child.pid!, "SIGKILL"), RUN_TIMEOUT_MS);
    const [code, signal] = await new Promise<[number | null, string | null]>((resolve) =>
      child.once("exit", (c, s) => resolve([c, s])),
    );
    clearTimeout(timer);
    // A daemon left running would hold the output pipes open (it inherits run-bench's stderr): read what is there
    // for a moment, then judge; the leak test names it.
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, 2000);
      child.once("close", () => (clearTimeout(t), resolve()));
    });
    child.stdout.destroy();
    child.stderr.destroy();
    run = { code, signal, stdout, stderr, leftDirs: readdirSync(tmp), leftPids: processesNaming(tmp) };
    for (const part of stdout.split(/^## /m).slice(1)) {
      const nl = part.indexOf("\n");
      sections.set(part.slice(0, nl).trim(), part.slice(nl + 1));
    }
  });

  after(() => {
    for (const pid of processesNaming(tmp)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    rmSync(tmp, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
    rmSync(gitHome, { recursive: true, force: true });
  });

  const failure = () => `stdout:\n${run.stdout}\nstderr:\n${run.stderr}`;

  test("run-bench exits 0, names no failed script and prints a header for each script", () => {
    assert.equal(run.signal, null, `run-bench was killed (over ${RUN_TIMEOUT_MS / 1000} s?)\n${failure()}`);
    assert.equal(run.code, 0, failure());
    assert.doesNotMatch(run.stderr, /run-bench: .* failed/);
    assert.doesNotMatch(run.stderr, /cleanup failed|ENOTEMPTY/, failure());
    assert.deepEqual([...sections.keys()].sort(), SCRIPTS);
  });

  test("diff-harvest prints the plain git time, the harvest time and their ratio, each a finite number", () => {
    const out = sections.get("diff-harvest") ?? "";
    for (const re of DIFF_LINES) {
      const hits = [...out.matchAll(re)];
      assert.equal(hits.length, 1, `${re} once in:\n${out}`);
      assert.ok(Number.isFinite(Number(hits[0]![1])), `${re}: ${hits[0]![0]}`);
    }
  });

  for (const [script, figures] of Object.entries(FIGURES)) {
    test(`${script} prints each of its ${figures.length} figures once, with a finite value and baseline`, (t) => {
      const out = sections.get(script) ?? "";
      const skipped = /^(remote-status|remote-machines) skipped: (.+)$/m.exec(out);
      if (skipped?.[1] === script) return t.skip(`${script} skipped: ${skipped[2]}`);
      for (const f of figures) {
        const re = new RegExp(
          `^${f.name}: (\\S+) ${f.unit} \\| baseline ${f.baseline}: (\\S+) ${f.unit} \\| ratio `,
          "gm",
        );
        const hits = [...out.matchAll(re)];
        assert.equal(hits.length, 1, `${re} once in the ${script} section:\n${out}`);
        const [line, value, baseline] = hits[0]!;
        assert.ok(
          Number.isFinite(Number(value)) && Number.isFinite(Number(baseline)),
          `not a finite value or baseline: ${line}`,
        );
      }
    });
  }

  test("leaves no temp dir and no process behind", () => {
    assert.deepEqual(run.leftDirs, [], `left in TMPDIR ${tmp}`);
    assert.deepEqual(run.leftPids, [], "processes still running with the bench's temp dirs in their command line");
  });
});
