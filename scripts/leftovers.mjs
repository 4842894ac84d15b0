// Processes a run must not leave behind: supervised pi children (loaded with this checkout's child extension) and
// headless wrappers of this checkout, started by this run. Found in /proc by their command line; zombies (state Z)
// do not count. A run is known by a marker in the environment (RUN_MARKER=<id>) that run-tests and run-bench set
// for what they start and every descendant inherits (daemons, runtimes, pi): a process without this run's marker
// (a user's real child after `npm install -g .`, which names this checkout's child.js too, or the children of
// another run beside this one) is never counted and never killed.
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

export const RUN_MARKER = "DSH_HERDR_TEST_RUN";

/**
 * A new run's id. Inside another run (run-bench under a test), the id extends the outer one ("outer.inner"), so the
 * outer sweep still counts what the inner run left and the inner sweep never touches the outer run's processes.
 */
export function newRunId(env = process.env) {
  const own = `${process.pid}-${randomBytes(4).toString("hex")}`;
  const outer = env[RUN_MARKER];
  return outer ? `${outer}.${own}` : own;
}

/** The run marker in a process's environment: its value, or undefined (absent, unreadable, gone). */
function markerOf(pid) {
  let env;
  try {
    env = readFileSync(`/proc/${pid}/environ`, "utf8");
  } catch {
    return undefined;
  }
  const hit = env.split("\0").find((kv) => kv.startsWith(`${RUN_MARKER}=`));
  return hit === undefined ? undefined : hit.slice(RUN_MARKER.length + 1);
}

/** Whether a marker value belongs to run `runId` (the run itself or a run nested in it). */
export function ofRun(marker, runId) {
  return marker !== undefined && (marker === runId || marker.startsWith(`${runId}.`));
}

export function leftoverChildren(root, runId) {
  if (!runId) throw new Error("leftoverChildren: a run id is required (newRunId())");
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
      if (!marks.some((m) => cmd.includes(m))) continue;
      if (!ofRun(markerOf(name), runId)) continue;
      out.push({ pid: Number(name), cmd: cmd.slice(0, 200) });
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/** Prints and kills what run `runId` left; returns how many there were. */
export function reportLeftovers(root, label, runId) {
  const left = leftoverChildren(root, runId);
  if (left.length === 0) return 0;
  console.error(
    `\n${label}: ${left.length} pi child process(es) or wrapper(s) of this run left running after it (killed now):`,
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
