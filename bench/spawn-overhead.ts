// Figure 3, spawn overhead: the daemon's time from task.spawn (isolated, in a real git repo) to its runtime launch
// call, excluding pi's own start (the runtime is a stub that records the call), against what it wraps done by hand:
// `git worktree add -b <branch> <path> HEAD` and the same stub launch. Samples alternate so drift hits both.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { stubRuntime } from "./_daemon.js";
import { attachOwner, startDaemon } from "./_harness.js";
import { epochMs, gitRepo, median, percentile, printFigure, sizes, tempDir, until } from "./_util.js";

const SAMPLES = sizes(15, 3);
const TARGET_RATIO = 1.3;

async function main(): Promise<void> {
  const { dir, cleanup } = tempDir("spawn");
  const home = join(dir, "home");
  const repo = gitRepo(dir);
  const daemon = await startDaemon(home, { maxParallelAgents: 50, maxQueuedAgents: 50, readinessTimeoutMs: 120_000 });
  try {
    const owner = await attachOwner(home);
    const stub = stubRuntime("headless");
    const viaDaemon: number[] = [];
    const raw: number[] = [];
    for (let i = 0; i < SAMPLES + 1; i++) {
      // The daemon: spawn → baseline → worktree → prompt.md → launch.
      const t0 = epochMs();
      const r = await owner.client.request("task.spawn", {
        cwd: repo,
        prompt: "bench spawn",
        model: "bench/model",
        runtime: "headless",
        isolated: true,
      });
      const launchFile = join(home, "tasks", r.taskId, "launch.json");
      // launch.json may be seen half-written: retry until it parses.
      const launched = await until(
        () => {
          try {
            return (JSON.parse(readFileSync(launchFile, "utf8")) as { at: number }).at;
          } catch {
            return undefined;
          }
        },
        `launch of ${r.taskId}`,
        30_000,
        1,
      );
      await owner.client.request("task.close", { taskId: r.taskId });
      // By hand: the worktree, then the same launch call.
      const path = join(dir, "raw-worktrees", `wt-${i}`);
      const t1 = performance.now();
      execFileSync("git", ["worktree", "add", "-b", `raw/${i}`, path, "HEAD"], { cwd: repo, stdio: "pipe" });
      await stub.launch({
        taskId: r.taskId,
        name: `raw-${i}`,
        argv: ["pi"],
        env: {},
        cwd: path,
        taskDir: join(home, "tasks", r.taskId),
      });
      const rawMs = performance.now() - t1;
      if (i === 0) continue; // warm-up: first git and module loads
      viaDaemon.push(launched - t0);
      raw.push(rawMs);
    }
    for (const p of [50, 90]) {
      const value = percentile(viaDaemon, p);
      const baseline = percentile(raw, p);
      printFigure({
        name: `spawn→launch, isolated (p${p} of ${SAMPLES})`,
        value,
        unit: "ms",
        baselineName: "raw git worktree add + launch",
        baseline,
        better: "lower",
        ...(p === 50 ? { target: `≤ ${TARGET_RATIO}x the raw steps`, met: value <= TARGET_RATIO * baseline } : {}),
      });
    }
    console.log(
      `spawn overhead: the daemon adds ${(median(viaDaemon) - median(raw)).toFixed(1)} ms (median) to the raw steps; daemon / raw at p50 = ${(percentile(viaDaemon, 50) / percentile(raw, 50)).toFixed(2)}x (target ≤ ${TARGET_RATIO}x)`,
    );
    owner.close();
  } finally {
    await daemon.stop();
    cleanup();
  }
}

await main();
