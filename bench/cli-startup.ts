// CLI start-up: `dsh-herdr --version`, `list` and `show <id>` on a home the demo just left (three closed tasks with
// their results, no daemon), against a bare `node -e 0` measured alternately in the same run (target: at most 2x).
// Two figures per command: wall time, and CPU time (user + system, read by each process as it exits), which a busy
// shared machine moves far less than wall time. Which modules a command loads is asserted by
// test/unit/cli-startup.test.ts.
// First the step a newcomer takes: `npm run demo` on a built checkout, against one bare `pi --version` (the floor of
// starting the pi the demo starts three of), with an absolute target of 30 s; it must compile nothing (dist/ is
// current after `npm ci`), or the script fails.
// Run: node dist/bench/cli-startup.js
import { spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { median, printFigure, repoRoot, sizes, tempDir } from "./_util.js";

const RUNS = sizes(21, 3);
const bin = join(repoRoot, "bin", "dsh-herdr");

/** Loaded with --import by every timed process alike: it writes the process's own CPU time as it exits. */
const CPU_HOOK = `process.on("exit", () => {
  const u = process.cpuUsage();
  require("node:fs").appendFileSync(process.env.DSH_BENCH_CPU_LOG, (u.user + u.system) / 1000 + "\\n");
});`;

interface Sample {
  wallMs: number;
  cpuMs: number;
}

function run(args: string[], env: NodeJS.ProcessEnv, cpuLog: string, hook: string): Sample {
  writeFileSync(cpuLog, "");
  const t0 = performance.now();
  const r = spawnSync(process.execPath, ["--require", hook, ...args], {
    env: { ...env, DSH_BENCH_CPU_LOG: cpuLog },
    stdio: ["ignore", "ignore", "pipe"],
  });
  const wallMs = performance.now() - t0;
  if (r.error) throw r.error;
  const cpuMs = Number(readFileSync(cpuLog, "utf8").trim());
  if (!Number.isFinite(cpuMs)) throw new Error(`no CPU time from ${args.join(" ")}: ${r.stderr}`);
  return { wallMs, cpuMs };
}

const tmp = tempDir("dsh-bench-cli-");
try {
  const home = demoFigure(join(tmp.dir, "demo-tmp"));
  const id = readdirSync(join(home, "tasks")).find((n) => /^[a-z0-9]{12}$/.test(n));
  if (!id) throw new Error(`the demo left no task in ${home}`);
  const hook = join(tmp.dir, "cpu-hook.cjs");
  writeFileSync(hook, CPU_HOOK);
  const cpuLog = join(tmp.dir, "cpu.log");
  const env = { ...process.env, DSH_HERDR_HOME: home, NO_COLOR: "1" };
  const commands: [string, string[]][] = [
    ["--version", ["--version"]],
    ["list", ["list", "--all"]],
    ["show <id>", ["show", id]],
  ];
  const bare: Sample[] = [];
  const samples = new Map<string, Sample[]>(commands.map(([n]) => [n, []]));
  // Warm the page cache once, then alternate so a slow spell of the machine falls on both sides alike.
  run(["-e", "0"], env, cpuLog, hook);
  for (const [, a] of commands) run([bin, ...a], env, cpuLog, hook);
  for (let i = 0; i < RUNS; i++) {
    bare.push(run(["-e", "0"], env, cpuLog, hook));
    for (const [n, a] of commands) samples.get(n)!.push(run([bin, ...a], env, cpuLog, hook));
  }
  for (const [what, unitOf] of [
    ["wall time", (s: Sample) => s.wallMs],
    ["CPU time", (s: Sample) => s.cpuMs],
  ] as const) {
    const base = median(bare.map(unitOf));
    for (const [n] of commands) {
      const v = median(samples.get(n)!.map(unitOf));
      printFigure({
        name: `dsh-herdr ${n} ${what} (median of ${RUNS})`,
        value: v,
        unit: "ms",
        baselineName: "node -e 0",
        baseline: base,
        better: "lower",
        target: "≤ 2x",
        met: v <= 2 * base,
      });
    }
  }
} finally {
  tmp.cleanup();
}

/** Times `npm run demo` (kept, so its home serves the start-up figures) and returns that home. */
function demoFigure(demoTmp: string): string {
  // pi keeps its extension loader's cache (jiti) in TMPDIR after the demo ends: a private one, removed with the bench's.
  mkdirSync(demoTmp, { recursive: true });
  const pi = join(repoRoot, "node_modules", ".bin", "pi");
  const stamp = join(repoRoot, "dist", "src", "cli", "main.js");
  const before = statSync(stamp).mtimeMs;
  const piStart = median(
    [0, 1, 2].map(() => {
      const t0 = performance.now();
      spawnSync(process.execPath, [pi, "--version"], { env: { ...process.env, TMPDIR: demoTmp }, stdio: "ignore" });
      return performance.now() - t0;
    }),
  );
  const t0 = performance.now();
  const r = spawnSync("npm", ["run", "--silent", "demo", "--", "--keep"], {
    cwd: repoRoot,
    env: { ...process.env, NO_COLOR: "1", TMPDIR: demoTmp },
    stdio: ["ignore", "pipe", "pipe"],
    encoding: "utf8",
  });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`npm run demo exited ${r.status}: ${r.stderr.slice(-2000)}`);
  if (statSync(stamp).mtimeMs !== before) throw new Error("npm run demo compiled dist/ again on a built checkout");
  printFigure({
    name: "npm run demo wall time (3 tasks, real pi, scripted model)",
    value: ms,
    unit: "ms",
    baselineName: "pi --version",
    baseline: piStart,
    better: "lower",
    target: "≤ 30 s",
    met: ms <= 30_000,
  });
  const home = /kept: .* \(home (.+?), repo /.exec(r.stdout + r.stderr)?.[1];
  if (!home) throw new Error(`npm run demo -- --keep named no home: ${r.stdout.slice(-2000)}`);
  return home;
}
