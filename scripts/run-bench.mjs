#!/usr/bin/env node
// Runs every compiled benchmark in dist/bench (or the ones named) one after another; each prints its own figures
// as ratios against a baseline measured in the same run.
import { appendFileSync, closeSync, existsSync, mkdtempSync, openSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawn, spawnSync } from "node:child_process";
import { reportLeftovers, newRunId, RUN_MARKER } from "./leftovers.mjs";
import { cpus, loadavg } from "node:os";

const dir = join(import.meta.dirname, "..", "dist", "bench");
if (!existsSync(dir)) {
  console.error("run-bench: dist/bench is missing; run `npm run build` first");
  process.exit(2);
}
/**
 * Words name scripts; options (`--before 5c731d4`, `--rounds=3`, `--with-board`) are handed to each script run,
 * so `npm run bench -- status-latency --before 5c731d4` builds, runs that A/B and records its figures here.
 */
const VALUED = new Set(["--before", "--rounds"]);
const wanted = [];
const passed = [];
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (!a.startsWith("--")) wanted.push(a);
  else if (VALUED.has(a) && i + 1 < process.argv.length) passed.push(a, process.argv[++i]);
  else passed.push(a);
}
const benches = readdirSync(dir)
  .filter((f) => f.endsWith(".js") && !f.startsWith("_"))
  .filter((f) => wanted.length === 0 || wanted.some((w) => f.startsWith(w)))
  .sort();
// The machine's load first: figures from a loaded machine must never pass for quiet ones.
console.log(
  `run-bench: ${new Date().toISOString()}, ${cpus().length} CPUs, load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")} (1, 5, 15 min), node ${process.version}`,
);
/**
 * What creating a file costs in the temp dir right now (where every bench keeps its homes), said before each script
 * like the load. On an ext4 without a journal (this VM's root) the kernel will not reuse an inode freed in the last
 * 60 s (360 s while its inode table block is unwritten) and steps over each such inode, one buffer lookup apiece,
 * whenever it looks for a free one: after a script that removed thousands of files a create costs ten or more times
 * what it does on a quiet disk, and every atomic write of a task's record is a create (docs/performance.md). The
 * probe's own files stay until the run ends, so probing frees no inodes of its own.
 */
const probeDir = mkdtempSync(join(tmpdir(), "dsh-bench-fsprobe-"));
let probed = 0;
function createCostUs(files = 200) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < files; i++) closeSync(openSync(join(probeDir, `f${probed++}`), "wx", 0o600));
  return Number(process.hrtime.bigint() - t0) / files / 1000;
}
/**
 * Before each script the runner waits until the disk is quiet again: until a create costs at most twice the least
 * seen in this run (and at least 80 µs is allowed), probing every 10 s for at most 180 s, so no script's figures
 * carry the inodes the script before it freed or the writeback of its teardown. The wait is printed beside the
 * load. BENCH_QUIET_FS=0 (and BENCH_QUICK) runs the scripts back to back.
 */
const quiet = process.env.BENCH_QUIET_FS !== "0" && !process.env.BENCH_QUICK;
let leastUs = Number.POSITIVE_INFINITY;
function fsNow() {
  const t0 = Date.now();
  let us = createCostUs();
  leastUs = Math.min(leastUs, us);
  const bound = () => Math.max(80, 2 * leastUs);
  while (quiet && us > bound() && Date.now() - t0 < 180_000) {
    spawnSync("sleep", ["10"]);
    us = createCostUs();
    leastUs = Math.min(leastUs, us);
  }
  const waited = quiet ? `; waited ${Math.round((Date.now() - t0) / 1000)} s for ≤ ${bound().toFixed(0)} µs` : "";
  return `a file create in ${tmpdir()} costs ${us.toFixed(0)} µs now${waited}`;
}
const failed = [];
/**
 * Each figure line a full run prints (bench/_util.ts figureLine) is appended to bench/history.jsonl, the data behind
 * docs/bench-history.svg (scripts/plot-bench.mjs). Quick runs measure nothing and are not kept; BENCH_HISTORY=0
 * keeps a full run out too.
 */
const history =
  process.env.BENCH_QUICK || process.env.BENCH_HISTORY === "0"
    ? undefined
    : join(dir, "..", "..", "bench", "history.jsonl");
const commit = spawnSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).stdout?.trim() || undefined;
const FIGURE =
  /^(.+?): (\S+) (\S*) ?\| baseline (.+?): (\S+) \S* ?\| ratio (\S+)x \(measured \/ baseline, (lower|higher) is better\)(?:\s+target (.+?): (met|MISSED))?$/;
/** A target "≤ 2x" bounds the ratio, "≤ 10 ms" (or "< 100 MB") the value; others are kept as said. */
function bounded(target) {
  const m = /^[≤<]\s*([\d.,]+)\s*(x|\S+)?$/.exec(target ?? "");
  if (!m) return {};
  return { measure: m[2] === "x" ? "ratio" : "value", bound: Number(m[1].replace(/,/g, "")) };
}
function record(script, line) {
  const m = FIGURE.exec(line);
  if (!history || !m) return;
  const [, figure, value, unit, baselineName, baseline, ratio, , target, met] = m;
  const rec = {
    at: new Date().toISOString(),
    commit,
    load: Number(loadavg()[0].toFixed(2)),
    script,
    figure,
    value: Number(value),
    unit,
    baselineName,
    baseline: Number(baseline),
    ratio: Number(ratio),
    ...(target ? { target, ...bounded(target), met: met === "met" } : {}),
  };
  appendFileSync(history, JSON.stringify(rec) + "\n");
}
/** Runs one script, its output passed through as it comes and its figure lines recorded; resolves its exit code. */
function runScript(b) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--expose-gc", join(dir, b), ...passed], {
      stdio: ["inherit", "pipe", "inherit"],
      env: { ...process.env, [RUN_MARKER]: runId },
    });
    let pending = "";
    child.stdout.setEncoding("utf8").on("data", (d) => {
      process.stdout.write(d);
      pending += d;
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      for (const l of lines) record(b.replace(/\.js$/, ""), l);
    });
    child.on("close", (code) => {
      if (pending) record(b.replace(/\.js$/, ""), pending);
      resolve(code ?? 1);
    });
  });
}
// Everything the benches start inherits this run's marker, so the sweep at the end ends only this run's processes.
const runId = newRunId();
for (const b of benches) {
  console.log(`\n## ${b.replace(/\.js$/, "")}`);
  const fs = fsNow();
  console.log(`run-bench: load ${loadavg()[0].toFixed(2)}; ${fs}`);
  const status = await runScript(b);
  if (status !== 0) failed.push(b.replace(/\.js$/, ""));
}
// Said last, so a script that died mid-way is not lost in the figures above it.
if (failed.length)
  console.error(
    `\nrun-bench: ${failed.length} script(s) failed: ${failed.join(", ")} (their figures above are incomplete)`,
  );
rmSync(probeDir, { recursive: true, force: true });
const leaked = reportLeftovers(join(import.meta.dirname, ".."), "run-bench", runId);
process.exit(failed.length || leaked ? 1 : 0);
