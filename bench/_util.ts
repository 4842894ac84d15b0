// Shared bench helpers (the leading "_" keeps run-bench from running this file): a clock comparable across
// processes, percentiles, one printed line per figure, RSS from /proc, temp dirs, git repos, pi-shaped lines.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const repoRoot = join(import.meta.dirname, "..", "..");

/** BENCH_QUICK=1: every script runs on small sizes, so a smoke test can run them all in seconds. */
export const QUICK = process.env.BENCH_QUICK === "1";

let quickSaid = false;
/** The full sizes, or the quick ones under BENCH_QUICK=1; each script picks its sizes here, in one place. */
export function sizes<T>(full: T, quick: T): T {
  if (!QUICK) return full;
  // Said once, so quick figures are never mistaken for measurements.
  if (!quickSaid)
    console.log("quick mode (BENCH_QUICK=1): small sizes, the figures below are a smoke check, not measurements");
  quickSaid = true;
  return quick;
}

/** Epoch milliseconds with sub-millisecond resolution; comparable between processes on one machine. */
export function epochMs(): number {
  return performance.timeOrigin + performance.now();
}

/** Nearest-rank percentile (p in 0..100) of unsorted samples; NaN for none. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export function median(samples: readonly number[]): number {
  return percentile(samples, 50);
}

export function fmt(n: number, unit: string): string {
  if (!Number.isFinite(n)) return `n/a ${unit}`.trim();
  const digits = Math.abs(n) >= 100 ? 0 : Math.abs(n) >= 10 ? 1 : 2;
  return `${n.toFixed(digits)} ${unit}`.trim();
}

export interface Figure {
  name: string;
  value: number;
  unit: string;
  baselineName: string;
  baseline: number;
  /** "lower" when a smaller value is better (latency, memory). Named with the ratio, which is always value / baseline. */
  better: "lower" | "higher";
  target?: string;
  /** Whether the target is met; undefined when there is none. */
  met?: boolean;
}

/**
 * One line per figure: value, baseline, the ratio measured / baseline (always that way round, so "lower is better"
 * is true of the number shown for a latency or a size, "higher is better" for a throughput), target.
 */
export function figureLine(f: Figure): string {
  const ratio = f.value / f.baseline;
  const r = Number.isFinite(ratio) ? `${ratio >= 10 ? ratio.toFixed(0) : ratio.toFixed(2)}x` : "n/a";
  const target = f.target ? `  target ${f.target}: ${f.met ? "met" : "MISSED"}` : "";
  return `${f.name}: ${fmt(f.value, f.unit)} | baseline ${f.baselineName}: ${fmt(f.baseline, f.unit)} | ratio ${r} (measured / baseline, ${f.better} is better)${target}`;
}

export function printFigure(f: Figure): void {
  console.log(figureLine(f));
}

/** Clock ticks per second (what /proc/<pid>/stat counts CPU time in). */
export function clockTick(): number {
  return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
}

/** CPU seconds (user + system) a process used so far, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number, tick: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / tick;
}

/** Resident set size and its peak (kB → MB) of a process, from /proc/<pid>/status. */
export function rssOf(pid: number): { rssMb: number; peakMb: number } {
  const text = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? NaN);
  return { rssMb: kb("VmRSS") / 1024, peakMb: kb("VmHWM") / 1024 };
}

/** A temp dir removed by the returned cleanup (also on exit, so a failed bench leaves nothing behind). */
export function tempDir(prefix: string): { dir: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), `dsh-bench-${prefix}-`));
  // BENCH_KEEP=1 keeps it for a post-mortem (daemon.log, journals).
  let done = false;
  const cleanup = () => {
    if (done) return;
    done = true;
    // A script that makes many homes in turn (an A/B's daemons) holds no exit listener per home it removed.
    process.off("exit", cleanup);
    if (process.env.BENCH_KEEP) console.error(`kept ${dir}`);
    else removeDir(dir);
  };
  process.once("exit", cleanup);
  return { dir, cleanup };
}

/**
 * No background git in a bench repo: git's automatic gc and maintenance detach a child after a commit that keeps
 * writing into .git, so removing the temp dir failed with ENOTEMPTY (and the timings shared the CPU with it).
 * Repo-level config, so it wins over whatever the machine's global config says.
 */
export function quietRepo(repo: string): void {
  for (const [k, v] of [
    ["gc.auto", "0"],
    ["gc.autoDetach", "false"],
    ["maintenance.auto", "false"],
  ] as const) {
    execFileSync("git", ["config", k, v], { cwd: repo, stdio: "pipe" });
  }
}

/** Pids of processes (other than this one) whose working directory is `dir` or below it: git children, daemons. */
export function processesIn(dir: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const cwd = readlinkSync(`/proc/${name}/cwd`);
      if (cwd === dir || cwd.startsWith(dir + "/")) out.push(Number(name));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return out;
}

/**
 * Remove a bench temp dir once nothing runs in it any more (up to 30 s), retrying busy removals; a failure is said
 * on stderr and fails the script (exit code 1) instead of passing as a clean run.
 */
export function removeDir(dir: string): void {
  const deadline = Date.now() + 30_000;
  while (processesIn(dir).length > 0 && Date.now() < deadline)
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
  try {
    rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  } catch (e) {
    console.error(
      `bench: cleanup failed: ${(e as Error).message} (still running there: ${processesIn(dir).join(", ") || "nothing"})`,
    );
    process.exitCode = 1;
  }
}

export function gitRepo(parent: string, name = "repo"): string {
  const repo = join(parent, name);
  mkdirSync(repo, { recursive: true });
  const g = (...args: string[]) => execFileSync("git", args, { cwd: repo, stdio: "pipe" });
  g("init", "-q", "-b", "main");
  quietRepo(repo);
  g("config", "user.email", "bench@example.invalid");
  g("config", "user.name", "bench");
  for (let i = 0; i < 20; i++) writeFileSync(join(repo, `file${i}.txt`), `line ${i}\n`.repeat(50));
  g("add", ".");
  g("commit", "-q", "-m", "init");
  return repo;
}

/** The lines of a recorded pi 0.73.1 session (fixtures/sessions), parsed. */
export function fixtureEntries(name: string): Record<string, unknown>[] {
  const text = readFileSync(join(repoRoot, "fixtures", "sessions", `${name}.jsonl`), "utf8");
  return text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** Re-stamp an entry (and its message) with the given time, as pi would have written it now. */
export function stamped(entry: Record<string, unknown>, atMs: number): string {
  const e: Record<string, unknown> = { ...entry, timestamp: new Date(atMs).toISOString() };
  if (typeof e.message === "object" && e.message !== null)
    e.message = { ...(e.message as object), timestamp: Math.floor(atMs) };
  return JSON.stringify(e) + "\n";
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Poll a condition (driver side only, never on a measured path). */
export async function until<T>(
  fn: () => T | undefined | Promise<T | undefined>,
  what: string,
  timeoutMs = 30_000,
  everyMs = 5,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`bench: timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}
