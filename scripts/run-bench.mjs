#!/usr/bin/env node
// Runs every compiled benchmark in dist/bench (or the ones named) one after another; each prints its own figures
// as ratios against a baseline measured in the same run.
import { readdirSync, existsSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { reportLeftovers, newRunId, RUN_MARKER } from "./leftovers.mjs";
import { cpus, loadavg } from "node:os";

const dir = join(import.meta.dirname, "..", "dist", "bench");
if (!existsSync(dir)) {
  console.error("run-bench: dist/bench is missing; run `npm run build` first");
  process.exit(2);
}
const wanted = process.argv.slice(2);
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
const failed = [];
// Everything the benches start inherits this run's marker, so the sweep at the end ends only this run's processes.
const runId = newRunId();
for (const b of benches) {
  console.log(`\n## ${b.replace(/\.js$/, "")}`);
  const r = spawnSync(process.execPath, ["--expose-gc", join(dir, b)], {
    stdio: "inherit",
    env: { ...process.env, [RUN_MARKER]: runId },
  });
  if (r.status !== 0) failed.push(b.replace(/\.js$/, ""));
}
// Said last, so a script that died mid-way is not lost in the figures above it.
if (failed.length)
  console.error(
    `\nrun-bench: ${failed.length} script(s) failed: ${failed.join(", ")} (their figures above are incomplete)`,
  );
const leaked = reportLeftovers(join(import.meta.dirname, ".."), "run-bench", runId);
process.exit(failed.length || leaked ? 1 : 0);
