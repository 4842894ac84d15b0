// Figure 4, memory and history: RSS of an idle daemon with 1,000 closed task records and 50 open tasks (against
// the same daemon on an empty home), start-up with a large history, and task.list with 10,000 records (against
// an index-less listing: readdir + read every task.json, what a directory scan costs).
import { createConnection } from "node:net";
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { readFile, readdir } from "node:fs/promises";
import { join } from "node:path";
import { newTaskId } from "../src/core/ids.js";
import { attachOwner, rawList, scanListMs, spawnTask, startDaemon, type BenchDaemon } from "./_harness.js";
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

/** Closed records for the RSS figure (the template is one more), open tasks, records added for the list figures,
 * the idle waits before reading RSS (empty home, then with tasks), timed lists per figure, the page size for
 * listing everything. */
const { CLOSED, OPEN, MORE, EMPTY_IDLE_MS, IDLE_MS, LISTS, PAGE } = sizes(
  { CLOSED: 999, OPEN: 50, MORE: 9_000, EMPTY_IDLE_MS: 1500, IDLE_MS: 2000, LISTS: 20, PAGE: 1000 },
  { CLOSED: 49, OPEN: 3, MORE: 150, EMPTY_IDLE_MS: 200, IDLE_MS: 200, LISTS: 3, PAGE: 50 },
);
const thousands = (x: number) => x.toLocaleString("en-US");

const TARGET_RSS_MB = 100;
const TARGET_LIST_MS = 50;

/** One closed task's files as the daemon wrote them, to clone into a history. */
interface Template {
  task: Record<string, unknown>;
  result: Record<string, unknown>;
  events: string;
}

async function makeTemplate(home: string, work: string): Promise<Template> {
  const d = await startDaemon(home);
  try {
    const owner = await attachOwner(home);
    const t = await spawnTask(home, owner, { cwd: work });
    writeFileSync(
      t.sessionPath,
      fixtureEntries("completed-write")
        .map((e) => stamped(e, Date.now()))
        .join(""),
    );
    await owner.nextSettle(t.taskId, 0);
    await owner.client.request("task.close", { taskId: t.taskId });
    owner.close();
    return {
      task: JSON.parse(readFileSync(join(t.dir, "task.json"), "utf8")) as Record<string, unknown>,
      result: JSON.parse(readFileSync(join(t.dir, "result.json"), "utf8")) as Record<string, unknown>,
      events: readFileSync(join(t.dir, "events.jsonl"), "utf8"),
    };
  } finally {
    await d.stop();
  }
}

/** Write `count` closed tasks shaped like the template (ids spread over the last 30 days). */
function addHistory(home: string, tpl: Template, count: number): void {
  const now = Date.now();
  for (let i = 0; i < count; i++) {
    const createdAt = now - 30 * 86_400_000 + Math.floor((i / count) * 29 * 86_400_000) + (i % 1000);
    const taskId = newTaskId(createdAt, randomBytes(3));
    const dir = join(home, "tasks", taskId);
    mkdirSync(dir, { mode: 0o700 });
    const swap = (s: string) => s.split(String(tpl.task.taskId)).join(taskId);
    writeFileSync(
      join(dir, "task.json"),
      swap(JSON.stringify({ ...tpl.task, createdAt, status: "closed", lifecycle: "closed" }, null, 2)) + "\n",
      { mode: 0o600 },
    );
    writeFileSync(join(dir, "result.json"), swap(JSON.stringify({ ...tpl.result, status: "closed" }, null, 2)) + "\n", {
      mode: 0o600,
    });
    writeFileSync(join(dir, "events.jsonl"), swap(tpl.events), { mode: 0o600 });
  }
}

/** Every page of task.list over one raw connection, following nextCursor; total ms from the first request. */
function rawPages(
  home: string,
  params: Record<string, unknown>,
): Promise<{ ms: number; pages: number; count: number; maxBytes: number }> {
  return new Promise((resolve, reject) => {
    const s = createConnection(join(home, "daemon.sock"));
    let buf = "";
    let t0 = 0;
    let pages = 0;
    let count = 0;
    let maxBytes = 0;
    const ask = (cursor?: string) =>
      s.write(
        JSON.stringify({ id: 2, method: "task.list", params: { ...params, ...(cursor ? { cursor } : {}) } }) + "\n",
      );
    s.on("connect", () => s.write(JSON.stringify({ id: 1, method: "hello", params: { kind: "cli" } }) + "\n"));
    s.on("data", (d) => {
      buf += d.toString("utf8");
      for (let nl; (nl = buf.indexOf("\n")) >= 0; ) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        const msg = JSON.parse(line) as {
          id?: number;
          result?: { tasks: unknown[]; nextCursor?: string };
          error?: { message: string };
        };
        if (msg.id === 1) {
          t0 = epochMs();
          ask();
        } else if (msg.id === 2) {
          if (msg.error) return (s.destroy(), reject(new Error(msg.error.message)));
          pages++;
          count += msg.result!.tasks.length;
          maxBytes = Math.max(maxBytes, Buffer.byteLength(line));
          if (msg.result!.nextCursor) ask(msg.result!.nextCursor);
          else {
            s.destroy();
            resolve({ ms: epochMs() - t0, pages, count, maxBytes });
          }
        }
      }
    });
    s.on("error", reject);
  });
}

async function timedStart(home: string, config: Record<string, unknown> = {}): Promise<{ d: BenchDaemon; ms: number }> {
  const t = performance.now();
  const d = await startDaemon(home, config);
  return { d, ms: performance.now() - t };
}

async function main(): Promise<void> {
  const { dir, cleanup } = tempDir("memory");
  const home = join(dir, "home");
  const work = join(dir, "work");
  mkdirSync(work);
  let running: BenchDaemon | undefined;
  try {
    // Baseline: the same daemon, idle on an empty home.
    const empty = await timedStart(join(dir, "empty-home"));
    running = empty.d;
    await sleep(EMPTY_IDLE_MS);
    const emptyRss = rssOf(empty.d.pid).rssMb;
    await empty.d.stop();

    const tpl = await makeTemplate(home, work);
    addHistory(home, tpl, CLOSED);
    const withHistory = await timedStart(home, { maxParallelAgents: 60, maxQueuedAgents: 60 });
    running = withHistory.d;
    const owner = await attachOwner(home);
    for (let i = 0; i < OPEN; i++) await spawnTask(home, owner, { cwd: work });
    await sleep(IDLE_MS);
    const rss = rssOf(withHistory.d.pid);
    printFigure({
      name: `idle daemon RSS, ${thousands(CLOSED + 1)} closed + ${OPEN} open tasks`,
      value: rss.rssMb,
      unit: "MB",
      baselineName: "idle daemon, empty home",
      baseline: emptyRss,
      better: "lower",
      target: `< ${TARGET_RSS_MB} MB`,
      met: rss.rssMb < TARGET_RSS_MB,
    });
    owner.close();
    await withHistory.d.stop();

    addHistory(home, tpl, MORE);
    const records = readdirSync(join(home, "tasks")).filter((n) => n.startsWith("t")).length;
    const big = await timedStart(home, { maxParallelAgents: 60, maxQueuedAgents: 60 });
    running = big.d;
    const again = await (async () => {
      await big.d.stop();
      return timedStart(home, { maxParallelAgents: 60, maxQueuedAgents: 60 });
    })();
    running = again.d;
    printFigure({
      name: `daemon start with ${records} records (index repaired from task.json)`,
      value: big.ms,
      unit: "ms",
      baselineName: "start on an empty home",
      baseline: empty.ms,
      better: "lower",
    });
    printFigure({
      name: `daemon start with ${records} records (index current)`,
      value: again.ms,
      unit: "ms",
      baselineName: "start on an empty home",
      baseline: empty.ms,
      better: "lower",
    });

    const scan: number[] = [];
    for (let i = 0; i < 3; i++) scan.push(await scanListMs(home));
    const limited: number[] = [];
    for (let i = 0; i < LISTS; i++) limited.push((await rawList(home, { limit: 50 })).ms);
    printFigure({
      name: `task.list limit 50 of ${records} (p50)`,
      value: median(limited),
      unit: "ms",
      baselineName: "directory scan",
      baseline: median(scan),
      better: "lower",
    });
    printFigure({
      name: `task.list limit 50 of ${records} (p99)`,
      value: percentile(limited, 99),
      unit: "ms",
      baselineName: "directory scan",
      baseline: median(scan),
      better: "lower",
      target: `< ${TARGET_LIST_MS} ms`,
      met: percentile(limited, 99) < TARGET_LIST_MS,
    });
    const page: number[] = [];
    for (let i = 0; i < LISTS; i++) page.push((await rawList(home, {})).ms);
    printFigure({
      name: `task.list default page (200) of ${records} (p99)`,
      value: percentile(page, 99),
      unit: "ms",
      baselineName: "directory scan",
      baseline: median(scan),
      better: "lower",
      target: `< ${TARGET_LIST_MS} ms`,
      met: percentile(page, 99) < TARGET_LIST_MS,
    });
    const all: { ms: number; pages: number; count: number; maxBytes: number }[] = [];
    for (let i = 0; i < 3; i++) all.push(await rawPages(home, { limit: PAGE }));
    const allMs = median(all.map((f) => f.ms));
    printFigure({
      name: `task.list all ${records} in pages of ${thousands(PAGE)} (median of 3)`,
      value: allMs,
      unit: "ms",
      baselineName: "directory scan",
      baseline: median(scan),
      better: "lower",
    });
    console.log(
      `task.list all: ${all[0]!.count} tasks in ${all[0]!.pages} pages, largest reply ${(all[0]!.maxBytes / 1024).toFixed(0)} KiB (client frame cap 1,024 KiB)`,
    );
  } finally {
    await running?.stop();
    cleanup();
  }
}

await main();
