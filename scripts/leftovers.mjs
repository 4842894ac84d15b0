// Processes a run must not leave behind: supervised pi children (loaded with this checkout's child extension) and
// headless wrappers of this checkout. Found in /proc by their command line; zombies (state Z) do not count.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

export function leftoverChildren(root) {
  const marks = [
    join(root, "dist", "src", "extensions", "child.js"),
    join(root, "dist", "src", "runtime", "headless", "wrapper.js"),
  ];
  const out = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      if (/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${name}/stat`, "utf8"))) continue;
      const cmd = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").join(" ").trim();
      if (marks.some((m) => cmd.includes(m))) out.push({ pid: Number(name), cmd: cmd.slice(0, 200) });
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/** Prints and kills what a run left; returns how many there were. */
export function reportLeftovers(root, label) {
  const left = leftoverChildren(root);
  if (left.length === 0) return 0;
  console.error(
    `\n${label}: ${left.length} pi child process(es) or wrapper(s) left running after the run (killed now):`,
  );
  for (const p of left) {
    console.error(`  ${p.pid} ${p.cmd}`);
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      /* already gone */
    }
  }
  return left.length;
}
