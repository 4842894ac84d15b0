// Figure 5, many live tasks: 1,000 open tasks on one daemon (the bench's stub runtime), every one streaming session
// lines as pi does while working (an assistant tool call, then its result, one append each). Measured against the
// same baselines as the other figures, in the same run:
// - status p99, append of the settling line → owner push, for a sample of tasks settling while the rest stream
//   (baseline: the 500 ms poll over the same files, as in status-latency);
// - daemon RSS with them all open (baseline: the idle daemon on an empty home, as in memory-history);
// - start-up of a daemon that finds them all open and recovers each (baseline: start on an empty home);
// - task.list of them, one page of all (baseline: a directory scan reading every task.json).
import { appendFileSync, closeSync, existsSync, mkdirSync, openSync, readSync } from "node:fs";
import { join } from "node:path";
import { SessionReader } from "../src/core/session/session-reader.js";
import { resultMdFor, writeResultMd } from "../src/extensions/child-report.js";
import {
  attachOwner,
  rawList,
  scanListMs,
  spawnTask,
  startDaemon,
  type BenchDaemon,
  type BenchTask,
  type Owner,
} from "./_harness.js";
import {
  epochMs,
  fixtureEntries,
  median,
  percentile,
  printFigure,
  rssOf,
  sizes,
  sleep,
  stamped,
  tempDir,
} from "./_util.js";

/** Open tasks, how many of them settle (measured), how often each task appends a line, how long all stream first. */
const { N, SETTLE, LINE_EVERY_MS, WARM_MS, LISTS } = sizes(
  { N: 1000, SETTLE: 100, LINE_EVERY_MS: 2000, WARM_MS: 3000, LISTS: 20 },
  { N: 30, SETTLE: 10, LINE_EVERY_MS: 300, WARM_MS: 300, LISTS: 3 },
);
const SPAWN_POOL = 16;
const POLL_MS = 500;
const GRACE_MS = 5000;
const TARGET = { statusP99Ms: 50, rssMb: 200, startMs: 2000, listMs: 50 };
const thousands = (x: number) => x.toLocaleString("en-US");

const entries = fixtureEntries("crew-report");
/** Entries 0-3 (header, the prompt) at once; 4/5 (a bash call and its result) are the streamed work; 6/7 settle. */
const HEAD = entries.slice(0, 4);
const WORK = [entries[4]!, entries[5]!];
const SETTLING = [entries[6]!, entries[7]!];

/** Spawn `n` tasks, SPAWN_POOL at a time (the file path: each child leaves once its prompt is taken). */
async function spawnAll(home: string, owner: Owner, cwd: string, n: number): Promise<BenchTask[]> {
  const tasks: BenchTask[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: SPAWN_POOL }, async () => {
      while (next < n) {
        next++;
        const t = await spawnTask(home, owner, { cwd });
        appendFileSync(t.sessionPath, HEAD.map((e) => stamped(e, Date.now())).join(""));
        tasks.push(t);
      }
    }),
  );
  return tasks;
}

/** Every task appends one work line every LINE_EVERY_MS (spread evenly), until stopped or it starts settling. */
function startStreaming(tasks: BenchTask[]): { settling: Set<string>; lines(): number; stop(): void } {
  const settling = new Set<string>();
  let lines = 0;
  let k = 0;
  const tickMs = 10;
  const perTick = Math.max(1, Math.round((tasks.length * tickMs) / LINE_EVERY_MS));
  const iv = setInterval(() => {
    for (let i = 0; i < perTick; i++) {
      const t = tasks[k++ % tasks.length]!;
      if (settling.has(t.taskId)) continue;
      const n = (t as BenchTask & { work?: number }).work ?? 0;
      (t as BenchTask & { work?: number }).work = n + 1;
      appendFileSync(t.sessionPath, stamped(WORK[n % 2]!, Date.now()));
      lines++;
    }
  }, tickMs);
  return { settling, lines: () => lines, stop: () => clearInterval(iv) };
}

/** A task's last tool result, then crew_report's result.md and its result line; resolves at the settling append. */
async function settle(t: BenchTask & { work?: number }, delayMs: number): Promise<number> {
  await sleep(delayMs);
  // Finish an open bash call first, so the crew_report call is the only one of its batch.
  if ((t.work ?? 0) % 2 === 1) appendFileSync(t.sessionPath, stamped(WORK[1]!, Date.now()));
  appendFileSync(t.sessionPath, stamped(SETTLING[0]!, Date.now()));
  await sleep(2);
  writeResultMd(
    t.resultPath,
    resultMdFor({ outcome: "completed", report: `Bench report for ${t.taskId}\n\nAll good.` }),
  );
  appendFileSync(t.sessionPath, stamped(SETTLING[1]!, Date.now()));
  return epochMs();
}

/** The polling baseline: every 500 ms, read each settling task's new bytes and look for a settled cycle. */
function startPoller(tasks: BenchTask[]): { detected: Map<string, number>; stop(): void } {
  const detected = new Map<string, number>();
  const state = new Map(tasks.map((t) => [t.taskId, { reader: new SessionReader(), offset: 0 }]));
  const buf = Buffer.alloc(64 * 1024);
  const iv = setInterval(() => {
    for (const t of tasks) {
      if (detected.has(t.taskId) || !existsSync(t.sessionPath)) continue;
      const st = state.get(t.taskId)!;
      const fd = openSync(t.sessionPath, "r");
      try {
        for (let n; (n = readSync(fd, buf, 0, buf.length, st.offset)) > 0; st.offset += n)
          st.reader.push(buf.subarray(0, n));
      } finally {
        closeSync(fd);
      }
      if (st.reader.facts().cycleSettled && existsSync(t.resultPath)) detected.set(t.taskId, epochMs());
    }
  }, POLL_MS);
  return { detected, stop: () => clearInterval(iv) };
}

async function timedStart(home: string, config: Record<string, unknown>): Promise<{ d: BenchDaemon; ms: number }> {
  const t = performance.now();
  const d = await startDaemon(home, config);
  return { d, ms: performance.now() - t };
}

async function main(): Promise<void> {
  const { dir, cleanup } = tempDir("live");
  const home = join(dir, "home");
  const cwd = join(dir, "work");
  mkdirSync(cwd);
  const config = { maxParallelAgents: N + 10, maxQueuedAgents: N + 10, idleChildMs: 0 };
  let running: BenchDaemon | undefined;
  try {
    // Baselines: the same daemon started on, and idle on, an empty home.
    const empty = await timedStart(join(dir, "empty-home"), config);
    running = empty.d;
    await sleep(sizes(1500, 200));
    const emptyRss = rssOf(empty.d.pid).rssMb;
    await empty.d.stop();

    const first = await timedStart(home, config);
    running = first.d;
    const owner = await attachOwner(home);
    const t0 = performance.now();
    const tasks = await spawnAll(home, owner, cwd, N);
    console.log(
      `live tasks: ${thousands(N)} open (spawned in ${((performance.now() - t0) / 1000).toFixed(1)} s), each appending a line every ${LINE_EVERY_MS} ms`,
    );
    const stream = startStreaming(tasks);
    await sleep(WARM_MS);

    const rss = rssOf(first.d.pid);
    printFigure({
      name: `daemon RSS, ${thousands(N)} open tasks streaming`,
      value: rss.rssMb,
      unit: "MB",
      baselineName: "idle daemon, empty home",
      baseline: emptyRss,
      better: "lower",
      target: `≤ ${TARGET.rssMb} MB`,
      met: rss.rssMb <= TARGET.rssMb,
    });

    // task.list of them all, one page, while they stream.
    const scan: number[] = [];
    for (let i = 0; i < 3; i++) scan.push(await scanListMs(home));
    const lists: number[] = [];
    let listed = 0;
    for (let i = 0; i < LISTS; i++) {
      const r = await rawList(home, { limit: 1000 });
      lists.push(r.ms);
      listed = r.count;
    }
    if (listed !== Math.min(N, 1000)) throw new Error(`task.list returned ${listed} of ${N} open tasks`);
    printFigure({
      name: `task.list of ${thousands(N)} open tasks, one page (p99 of ${LISTS})`,
      value: percentile(lists, 99),
      unit: "ms",
      baselineName: "directory scan",
      baseline: median(scan),
      better: "lower",
      target: `≤ ${TARGET.listMs} ms`,
      met: percentile(lists, 99) <= TARGET.listMs,
    });

    // A sample settles over one second while the others keep streaming.
    const sample = tasks.slice(0, SETTLE);
    for (const t of sample) stream.settling.add(t.taskId);
    const poller = startPoller(sample);
    const settledAt = await Promise.all(sample.map((t) => settle(t, Math.random() * 1000)));
    const deadline = Date.now() + GRACE_MS;
    while (
      Date.now() < deadline &&
      !sample.every((t) => owner.settledAt.has(t.taskId) && poller.detected.has(t.taskId))
    )
      await sleep(20);
    poller.stop();
    const lines = stream.lines();
    stream.stop();
    const push: number[] = [];
    const poll: number[] = [];
    let lost = 0;
    sample.forEach((t, i) => {
      const at = owner.settledAt.get(t.taskId);
      poll.push((poller.detected.get(t.taskId) ?? NaN) - settledAt[i]!);
      if (at === undefined) lost++;
      else push.push(at - settledAt[i]!);
    });
    for (const p of [50, 99]) {
      const value = percentile(push, p);
      printFigure({
        name: `status with ${thousands(N)} open tasks streaming, ${SETTLE} settling, p${p} append→${owner.channel}`,
        value,
        unit: "ms",
        baselineName: `${POLL_MS} ms poll`,
        baseline: percentile(poll, p),
        better: "lower",
        ...(p === 99
          ? { target: `≤ ${TARGET.statusP99Ms} ms, none lost`, met: lost === 0 && value <= TARGET.statusP99Ms }
          : {}),
      });
    }
    console.log(
      `live tasks: ${thousands(lines)} work lines streamed; ${lost} of ${SETTLE} settles never reached the owner within ${GRACE_MS} ms`,
    );
    owner.close();
    await first.d.stop();

    // A daemon that finds them all open: it reads each task's record, journal and session before serving.
    const again = await timedStart(home, config);
    running = again.d;
    printFigure({
      name: `daemon start recovering ${thousands(N)} open tasks`,
      value: again.ms,
      unit: "ms",
      baselineName: "start on an empty home",
      baseline: empty.ms,
      better: "lower",
      target: `≤ ${TARGET.startMs} ms`,
      met: again.ms <= TARGET.startMs,
    });
    const recovered = await rawList(home, { limit: 1000, status: ["running", "working", "completed"] });
    console.log(`live tasks: after the restart ${recovered.count} tasks list as running, working or completed`);
  } finally {
    await running?.stop();
    cleanup();
  }
}

await main();
