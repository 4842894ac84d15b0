// CLI start-up: wall time of `dsh-herdr --version`, `list` and `show <id>` on a home with a few closed tasks and no
// daemon, against a bare `node -e 0` measured alternately in the same run (target: at most 2x). The
// machine-independent half, which modules a command loads, is asserted by test/unit/cli-startup.test.ts.
// Then the first step a newcomer takes: `npm run demo` on a built checkout, against one bare `pi --version` (the floor
// of starting the pi the demo starts three of), with an absolute target of 30 s; it must compile nothing (dist/ is
// current after `npm ci`), or the script fails.
// Run: node dist/bench/cli-startup.js
import { spawnSync } from "node:child_process";
import { mkdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { median, printFigure, repoRoot, sizes, tempDir } from "./_util.js";

const RUNS = sizes(21, 3);
const bin = join(repoRoot, "bin", "dsh-herdr");

/** A home with one closed task in its index, so `list` and `show` read something real. */
function seedHome(home: string): string {
  const id = "t0000000000ab";
  mkdirSync(join(home, "tasks", id), { recursive: true });
  return id;
}

function wallMs(args: string[], env: NodeJS.ProcessEnv): number {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, args, { env, stdio: ["ignore", "ignore", "pipe"] });
  const ms = performance.now() - t0;
  if (r.error) throw r.error;
  return ms;
}

const tmp = tempDir("dsh-bench-cli-");
try {
  const home = join(tmp.dir, "home");
  const id = seedHome(home);
  const env = { ...process.env, DSH_HERDR_HOME: home, NO_COLOR: "1" };
  const commands: [string, string[]][] = [
    ["--version", ["--version"]],
    ["list", ["list"]],
    ["show <id>", ["show", id]],
  ];
  const bare: number[] = [];
  const times = new Map<string, number[]>(commands.map(([n]) => [n, []]));
  // Warm the page cache once, then alternate so a slow spell of the machine falls on both sides alike.
  wallMs(["-e", "0"], env);
  for (const [, a] of commands) wallMs([bin, ...a], env);
  for (let i = 0; i < RUNS; i++) {
    bare.push(wallMs(["-e", "0"], env));
    for (const [n, a] of commands) times.get(n)!.push(wallMs([bin, ...a], env));
  }
  const base = median(bare);
  for (const [n] of commands) {
    const v = median(times.get(n)!);
    printFigure({
      name: `dsh-herdr ${n} wall time (median of ${RUNS})`,
      value: v,
      unit: "ms",
      baselineName: "node -e 0",
      baseline: base,
      better: "lower",
      target: "≤ 2x",
      met: v <= 2 * base,
    });
  }
  demoFigure(join(tmp.dir, "demo-tmp"));
} finally {
  tmp.cleanup();
}

function demoFigure(demoTmp: string): void {
  // pi keeps its extension loader's cache (jiti) in TMPDIR after the demo ends: a private one, removed with the bench's.
  mkdirSync(demoTmp, { recursive: true });
  const pi = join(repoRoot, "node_modules", ".bin", "pi");
  const stamp = join(repoRoot, "dist", "src", "cli", "main.js");
  const before = statSync(stamp).mtimeMs;
  const piStart = median([0, 1, 2].map(() => wallMs([pi, "--version"], { ...process.env, TMPDIR: demoTmp })));
  const t0 = performance.now();
  const r = spawnSync("npm", ["run", "--silent", "demo"], {
    cwd: repoRoot,
    env: { ...process.env, NO_COLOR: "1", TMPDIR: demoTmp },
    stdio: ["ignore", "ignore", "pipe"],
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
}
