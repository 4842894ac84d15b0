// Figure 1, status latency: N concurrent tasks (1, 10, 100) whose session lines and result.md a driver writes
// exactly as pi does (one append per line, result.md by the crew_report tool just before its toolResult line).
// Measured from the settling append to (a) the owner-side push over the socket and (b) task.wait returning.
// (c) the browser board's live stream (a card leaving the running column), read in the owner's thread as a page would.
// Baseline: a 500 ms polling loop over the same files (claude-squad's tick), run alongside in the same process.
// Two paths: "extension" (the child extension stays connected and sends agent_end after the last line, as
// src/extensions/child.ts does) and "file" (no extension: the session watcher alone must see the settle).
import { execFileSync } from "node:child_process";
import { appendFileSync, mkdirSync, openSync, readSync, closeSync, existsSync, readFileSync } from "node:fs";
import { open } from "node:fs/promises";
import { Worker } from "node:worker_threads";
import { loadavg } from "node:os";
import { join } from "node:path";
import type { DaemonClient } from "../src/client/index.js";
import { SessionReader } from "../src/core/session/session-reader.js";
import { resultMdFor, writeResultMd } from "../src/extensions/child-report.js";
import { attachOwner, spawnTask, startDaemon, type BenchTask, type Owner } from "./_harness.js";
import { monoMs, type FromListener, type ToListener } from "./_owner-listener.js";
import {
  clockTick,
  cpuSeconds,
  epochMs,
  fixtureEntries,
  percentile,
  printFigure,
  repoRoot,
  sizes,
  sleep,
  stamped,
  tempDir,
} from "./_util.js";

const POLL_MS = 500;
/** p99 at the largest N: append → owner push (issue 27's 10 ms; issue 15 asked 20) and → task.wait returning. */
const TARGET_P99_MS = 10;
const TARGET_WAIT_P99_MS = 25;
/** pi writes the entries up to the first assistant message at once, then one line per message as it ends. */
const FIRST_BURST = 5;
/**
 * [path, N, rounds, where] to measure; the target applies to the largest N in a plain directory. "repo": the tasks'
 * cwd is a git repository, so each settle also harvests its diff (git processes); a figure without a target.
 */
type Planned = [Path, number, number, ("repo" | "dir")?];
const SIZED = sizes<{ PLAN: Planned[]; TARGET_N: number }>(
  {
    PLAN: [
      ["extension", 1, 20],
      ["extension", 10, 3],
      ["extension", 100, 1],
      ["file", 1, 20],
      ["file", 100, 1],
      ["file", 20, 2, "repo"],
    ],
    TARGET_N: 100,
  },
  {
    PLAN: [
      ["extension", 1, 2],
      ["extension", 10, 1],
      ["file", 1, 2],
      ["file", 10, 1],
      ["file", 5, 1, "repo"],
    ],
    TARGET_N: 10,
  },
);
/** BENCH_PLAN="extension:100:2,file:100:2,file:20:2:repo" measures only those rounds (an A/B of one figure). */
const PLAN: Planned[] = process.env.BENCH_PLAN
  ? process.env.BENCH_PLAN.split(",").map((p) => {
      const [path, n, rounds, where] = p.split(":");
      if (
        (path !== "extension" && path !== "file") ||
        !(Number(n) > 0) ||
        !(Number(rounds) > 0) ||
        (where !== undefined && where !== "repo")
      )
        throw new Error(`BENCH_PLAN: "${p}" is not path:N:rounds[:repo] (path extension or file)`);
      return [path, Number(n), Number(rounds), where === "repo" ? "repo" : "dir"];
    })
  : SIZED.PLAN;
const TARGET_N = process.env.BENCH_PLAN
  ? Math.max(...PLAN.filter((p) => p[3] !== "repo").map((p) => p[1]))
  : SIZED.TARGET_N;

const entries = fixtureEntries("crew-report");
const TICK = clockTick();
const rand = (lo: number, hi: number) => lo + Math.random() * (hi - lo);

/** How the daemon learns the cycle ended: the child extension's agent_end event, or the session file alone. */
type Path = "extension" | "file";

/** Write one task's session as pi would; resolves with the epoch ms right after the settling append. */
async function drive(t: BenchTask & { child?: DaemonClient }, startDelayMs: number): Promise<number> {
  await sleep(startDelayMs);
  let settleAt = 0;
  for (let i = 0; i < entries.length; i++) {
    const last = i === entries.length - 1;
    if (i >= FIRST_BURST) await sleep(rand(20, 60));
    if (last) {
      // crew_report writes result.md, then pi appends the tool's result: the settling line.
      writeResultMd(
        t.resultPath,
        resultMdFor({ outcome: "completed", report: `Bench report for ${t.taskId}\n\nAll good.` }),
      );
      await sleep(rand(1, 5));
    }
    appendFileSync(t.sessionPath, stamped(entries[i]!, Date.now()));
    if (last) settleAt = monoMs();
  }
  // What src/extensions/child.ts sends when pi's agent loop ends.
  if (t.child)
    await t.child.request("child.event", {
      type: "agent_end",
      cycle: 1,
      sessionFile: t.sessionPath,
      stopReason: "toolUse",
      willRetry: false,
    });
  return settleAt;
}

/** What polling peers do: every 500 ms, read each session's new bytes and look for a settled cycle. */
function startPoller(tasks: BenchTask[]): { detected: Map<string, number>; stop(): void } {
  const detected = new Map<string, number>();
  const readers = new Map(tasks.map((t) => [t.taskId, { reader: new SessionReader(), offset: 0 }]));
  const buf = Buffer.alloc(64 * 1024);
  const tick = () => {
    for (const t of tasks) {
      if (detected.has(t.taskId) || !existsSync(t.sessionPath)) continue;
      const st = readers.get(t.taskId)!;
      const fd = openSync(t.sessionPath, "r");
      try {
        for (let n; (n = readSync(fd, buf, 0, buf.length, st.offset)) > 0; st.offset += n)
          st.reader.push(buf.subarray(0, n));
      } finally {
        closeSync(fd);
      }
      if (st.reader.facts().cycleSettled && existsSync(t.resultPath)) detected.set(t.taskId, monoMs());
    }
  };
  const iv = setInterval(tick, POLL_MS);
  return { detected, stop: () => clearInterval(iv) };
}

/**
 * The disk, measured alongside: a 100-byte append + fdatasync every 5 ms in the bench's temp dir while the burst
 * runs. A delivery is pushed once its outbox record is written, with its fsync (through the commit log) after the
 * push; `task.wait` returns once the settled task.json/result.json are fsynced and renamed, so its latency follows
 * what an fsync takes on this disk under the same write load.
 */
function startFsyncProbe(dir: string): { samples: number[]; stop(): Promise<void> } {
  const samples: number[] = [];
  let running = true;
  const loop = (async () => {
    const fh = await open(join(dir, "fsync-probe.log"), "a");
    try {
      while (running) {
        const t = monoMs();
        await fh.write("x".repeat(99) + "\n");
        await fh.datasync();
        samples.push(monoMs() - t);
        await sleep(5);
      }
    } finally {
      await fh.close();
    }
  })();
  return {
    samples,
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

interface Samples {
  push: number[];
  /** append → the board's card event (SSE), in the same run as the owner push. */
  board: number[];
  wait: number[];
  poll: number[];
  /** append + fdatasync latencies of the probe during the bursts (only at the target N). */
  fsync: number[];
  /** Settles the daemon never reported (within GRACE_MS after the driver finished). */
  lost: number;
  /** The daemon's CPU seconds (user + system) while the bursts ran, and how many settles they carried. */
  cpu: { seconds: number; settles: number };
  /** Each burst at the target N, epoch ms from its first drive to its last settle seen (the GC figure's windows). */
  bursts: [number, number][];
  /** Each settle at the target N: append and owner push, epoch ms (to meet the daemon's GC pauses). */
  spans: [number, number][];
}

const GRACE_MS = 3000;

/** The owner-side stamps, taken in the listener thread (bench/_owner-listener.ts). */
interface Listener {
  pushedAt: Map<string, number>;
  boardAt: Map<string, number>;
  waited: Map<string, number>;
  wait(taskId: string): void;
  stop(): Promise<void>;
}

async function startListener(
  home: string,
  ownerId: string,
  secret: string | undefined,
  board: boolean,
): Promise<Listener> {
  const worker = new Worker(new URL("./_owner-listener.js", import.meta.url), {
    workerData: { home, ownerId, secret, board },
  });
  const pushedAt = new Map<string, number>();
  const boardAt = new Map<string, number>();
  const waited = new Map<string, number>();
  await new Promise<void>((resolve, reject) => {
    worker.once("error", reject);
    worker.on("message", (m: FromListener) => {
      if (m.type === "ready") resolve();
      else if (m.type === "pushed") pushedAt.has(m.taskId) || pushedAt.set(m.taskId, m.at);
      else if (m.type === "waited") waited.set(m.taskId, m.at);
      else if (m.type === "board") boardAt.has(m.taskId) || boardAt.set(m.taskId, m.at);
    });
  });
  const post = (m: ToListener) => worker.postMessage(m);
  return {
    pushedAt,
    boardAt,
    waited,
    wait: (taskId) => post({ type: "wait", taskId }),
    stop: async () => {
      const gone = new Promise<void>((r) => worker.once("exit", () => r()));
      post({ type: "stop" });
      await gone;
    },
  };
}

async function round(
  daemonPid: number,
  home: string,
  cwd: string,
  owner: Owner,
  listener: Listener,
  n: number,
  path: Path,
  targeted: boolean,
  s: Samples,
): Promise<void> {
  const tasks: (BenchTask & { child?: DaemonClient })[] = [];
  for (let i = 0; i < n; i++) tasks.push(await spawnTask(home, owner, { cwd, keepChild: path === "extension" }));
  const { pushedAt, waited } = listener;
  for (const t of tasks) listener.wait(t.taskId);
  const poller = startPoller(tasks);
  const probe = targeted ? startFsyncProbe(join(home, "..")) : undefined;
  const spread = n === 1 ? 0 : 1000;
  const cpu0 = cpuSeconds(daemonPid, TICK);
  const burstFrom = epochMs();
  const settled = await Promise.all(tasks.map((t) => drive(t, rand(0, spread))));
  const deadline = Date.now() + GRACE_MS;
  const allSeen = () =>
    tasks.every((t) => pushedAt.has(t.taskId) && waited.has(t.taskId) && poller.detected.has(t.taskId));
  while (!allSeen() && Date.now() < deadline) await sleep(20);
  s.cpu.seconds += cpuSeconds(daemonPid, TICK) - cpu0;
  if (targeted) s.bursts.push([burstFrom, epochMs()]);
  s.cpu.settles += n;
  poller.stop();
  if (probe) {
    await probe.stop();
    s.fsync.push(...probe.samples);
  }
  tasks.forEach((t, i) => {
    const at = settled[i]!;
    const pushed = pushedAt.get(t.taskId);
    s.poll.push((poller.detected.get(t.taskId) ?? NaN) - at);
    if (pushed === undefined || !waited.has(t.taskId)) {
      s.lost++;
      return;
    }
    s.push.push(pushed - at);
    const card = listener.boardAt.get(t.taskId);
    if (card !== undefined) s.board.push(card - at);
    if (targeted) s.spans.push([at + monoToEpoch, pushed + monoToEpoch]);
    s.wait.push(waited.get(t.taskId)! - at);
  });
  // Closing also ends the waits of settles the daemon missed.
  for (const t of tasks) {
    t.child?.close();
    await owner.client.request("task.close", { taskId: t.taskId });
  }
  const end = Date.now() + 10_000;
  while (tasks.some((t) => !waited.has(t.taskId)) && Date.now() < end) await sleep(20);
}

function report(channel: string, path: string, n: number, targeted: boolean, s: Samples): void {
  const total = s.push.length + s.lost;
  for (const p of [50, 99]) {
    const isTarget = targeted && p === 99;
    const pushMet = s.lost === 0 && percentile(s.push, 99) <= TARGET_P99_MS;
    const waitMet = s.lost === 0 && percentile(s.wait, 99) <= TARGET_WAIT_P99_MS;
    const base = {
      unit: "ms",
      baselineName: `${POLL_MS} ms poll`,
      baseline: percentile(s.poll, p),
      better: "lower" as const,
    };
    printFigure({
      name: `status ${path} N=${n} p${p} append→${channel}`,
      value: percentile(s.push, p),
      ...base,
      ...(isTarget ? { target: `≤ ${TARGET_P99_MS} ms, none lost`, met: pushMet } : {}),
    });
    printFigure({
      name: `status ${path} N=${n} p${p} append→task.wait returns`,
      value: percentile(s.wait, p),
      ...base,
      ...(isTarget ? { target: `≤ ${TARGET_WAIT_P99_MS} ms, none lost`, met: waitMet } : {}),
    });
    if (s.board.length > 0)
      printFigure({
        name: `status ${path} N=${n} p${p} append→board card (SSE)`,
        value: percentile(s.board, p),
        ...base,
      });
  }
  if (s.fsync.length > 0)
    console.log(
      `status ${path} N=${n}: the disk during the burst (100-byte append + fdatasync every 5 ms, same run): p50 ${percentile(s.fsync, 50).toFixed(1)} ms, p99 ${percentile(s.fsync, 99).toFixed(1)} ms over ${s.fsync.length} fsyncs; a delivery is pushed once its outbox record is written, task.wait returns after the record's fsync`,
    );
  // The repo rounds too: there a settle's git processes are what the daemon does most.
  if ((targeted || path.includes("git repo")) && s.cpu.settles > 0)
    console.log(
      `status ${path} N=${n}: daemon CPU (user + system, /proc) while the bursts ran: ${((1000 * s.cpu.seconds) / s.cpu.settles).toFixed(2)} ms per settled task (${s.cpu.seconds.toFixed(2)} s over ${s.cpu.settles}; each task ${entries.length} session lines, result.md${path === "extension" ? ", agent_end" : ""}); less daemon work per task leaves less to queue behind on a shared CPU`,
    );
  if (s.lost > 0)
    console.log(
      `status ${path} N=${n}: ${s.lost} of ${total} settles never reached the owner within ${GRACE_MS} ms (the percentiles above leave them out)`,
    );
}

interface Gc {
  at: number;
  ms: number;
  kind: string;
}

function readGc(file: string): Gc[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as Gc);
}

/** The daemon's collections that overlap a burst: each one holds every settle in flight for its whole pause. */
function gcLine(what: string, all: Gc[], windows: [number, number][], spans: [number, number][]): string {
  const inBurst = all.filter((g) => windows.some(([from, to]) => g.at + g.ms >= from && g.at <= to));
  const minor = inBurst.filter((g) => g.kind === "minor").map((g) => g.ms);
  const other = inBurst.filter((g) => g.kind !== "minor").map((g) => g.ms);
  const span = windows.reduce((sum, [from, to]) => sum + (to - from), 0);
  const f = (x: number) => x.toFixed(1);
  const total = [...minor, ...other].reduce((a, b) => a + b, 0);
  // The slowest 2 % of settles (the p99 and above): how many of them had a pause inside their own append → push.
  const slowest = [...spans]
    .sort((a, b) => b[1] - b[0] - (a[1] - a[0]))
    .slice(0, Math.max(1, Math.ceil(spans.length / 50)));
  const met = slowest.filter(([from, to]) => inBurst.some((g) => g.at + g.ms >= from && g.at <= to)).length;
  return (
    `status ${what}: the daemon's garbage collections while the bursts ran (${windows.length} burst(s), ${f(span / 1000)} s): ` +
    `${minor.length} scavenges (p50 ${f(percentile(minor, 50))} ms, max ${f(Math.max(0, ...minor))} ms), ` +
    `${other.length} other (max ${f(Math.max(0, ...other))} ms), ${f(total)} ms in all; a settle in flight waits out each pause: ` +
    `${met} of the ${slowest.length} slowest settles (the p99 and above) had one between their append and their push`
  );
}

/** The driver's monotonic clock (monoMs, as the owner thread stamps) to epoch ms, as the daemon's GC entries are. */
const monoToEpoch = epochMs() - monoMs();

/** One daemon on a fresh temp home and the plan measured against it. */
interface Session {
  plan: Planned[];
  targetN: number;
  /** The checkout whose dist/bench/_daemon.js runs (bench/_build.ts); this one's by default. */
  root?: string;
  /** Config beside the plan's limits (board.enabled for an A/B). */
  config?: Record<string, unknown>;
  /** Whether the owner thread opens the board's live stream, when the daemon serves one. */
  boardClient: boolean;
  /** Print each path's figures and the daemon's collections (the bench's own run), or only collect (an A/B). */
  print: boolean;
  /**
   * Hand the home's removal to the caller instead of removing it at once: an A/B removes every home at its end, so no
   * daemon starts right after thousands of files were removed (on an ext4 without a journal the creates that follow
   * cost several times more for a minute, and every record a task writes is a create).
   */
  later?: (cleanup: () => void) => void;
}

/** Each planned path's samples, keyed as its figures name it ("file (cwd a git repo) N=20"). */
async function session(o: Session): Promise<Map<string, Samples>> {
  const { dir, cleanup } = tempDir("latency");
  const home = join(dir, "home");
  const cwd = join(dir, "work");
  mkdirSync(cwd);
  // The cwd most tasks have: a repository, whose settle harvests the diff with git (no target: a figure to watch).
  const repo = join(dir, "repo");
  mkdirSync(repo);
  for (const a of [
    ["init", "-q"],
    ["-c", "user.email=b@b.invalid", "-c", "user.name=b", "commit", "-q", "--allow-empty", "-m", "x"],
  ])
    execFileSync("git", a, {
      cwd: repo,
      env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" },
    });
  const gcFile = join(dir, "gc.jsonl");
  const daemon = await startDaemon(
    home,
    { maxParallelAgents: 200, maxQueuedAgents: 200, ...o.config },
    o.print ? { BENCH_GC: gcFile } : {},
    o.root,
  );
  const gcWindows: [string, [number, number][], [number, number][]][] = [];
  const out = new Map<string, Samples>();
  try {
    const owner = await attachOwner(home);
    // Attached after the driver's owner connection, so the deliveries go to it.
    const listener = await startListener(home, owner.id, owner.secret, o.boardClient);
    if (o.print)
      console.log(
        `owner-side signal: ${owner.channel} push, received in its own thread (as a pi owner is its own process); driver: fixtures/sessions/crew-report.jsonl, one append per line`,
      );
    for (const [path, n, rounds, where] of o.plan) {
      const s: Samples = {
        push: [],
        board: [],
        wait: [],
        poll: [],
        fsync: [],
        lost: 0,
        cpu: { seconds: 0, settles: 0 },
        bursts: [],
        spans: [],
      };
      const inRepo = where === "repo";
      const targeted = n === o.targetN && !inRepo;
      for (let r = 0; r < rounds; r++)
        await round(daemon.pid, home, inRepo ? repo : cwd, owner, listener, n, path, targeted, s);
      const what = inRepo ? `${path} (cwd a git repo)` : path;
      out.set(`${what} N=${n}`, s);
      if (o.print) report(owner.channel, what, n, targeted, s);
      if (s.bursts.length > 0) gcWindows.push([`${path} N=${n}`, s.bursts, s.spans]);
    }
    await listener.stop();
    owner.close();
  } finally {
    await daemon.stop();
    // The daemon writes its collections as it exits.
    if (o.print)
      for (const [what, windows, spans] of gcWindows) console.log(gcLine(what, readGc(gcFile), windows, spans));
    if (o.later) o.later(cleanup);
    else cleanup();
  }
  return out;
}

/** The A/B's plan: the paths whose daemon CPU per settled task the bench prints, one burst each per daemon. */
const AB_PLAN: Planned[] = process.env.BENCH_PLAN
  ? PLAN
  : sizes<Planned[]>(
      [
        ["extension", 100, 1],
        ["file", 100, 1],
        ["file", 20, 1, "repo"],
      ],
      [
        ["extension", 10, 1],
        ["file", 10, 1],
        ["file", 5, 1, "repo"],
      ],
    );

/**
 * `--before <commit>`: the daemon CPU per settled task of that commit's build against this one's, under the same
 * driver (this file), each on a fresh home, interleaved: round r runs every build once, in an order that turns each
 * round (before, after, after with the board | after with the board, after, before | …), so drift in the machine's
 * load falls on every build alike (4 rounds by default, `--rounds N`). CPU time is what is compared (less bent by load
 * than latency, though a loaded machine still stretches it): the figure is the median over the rounds of each build's
 * ms per settled task, beside the median of each round's own ratio. The daemon's CPU is its process's alone (git
 * children not counted). This build runs with the board off, as older builds have none; `--with-board` adds this
 * build with its board on (no browser connected) as a third.
 */
async function compareBuilds(before: string, rounds: number, withBoard: boolean): Promise<void> {
  const { buildAt } = await import("./_build.js");
  const t0 = Date.now();
  const old = buildAt(before);
  const head = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: repoRoot, encoding: "utf8" }).trim();
  console.log(
    `cpu per task A/B: ${old.commit} (built in ${((Date.now() - t0) / 1000).toFixed(0)} s) against this checkout's build (${head}${dirty() ? ", with uncommitted changes" : ""}); ${rounds} rounds, each a fresh daemon per build running ${AB_PLAN.map(([p, n, , w]) => `${p}${w === "repo" ? " (git repo)" : ""} N=${n}`).join(", ")}; load ${loadNow()}`,
  );
  const builds: { name: string; session: Omit<Session, "plan" | "targetN" | "print"> }[] = [
    { name: old.commit, session: { root: old.root, boardClient: false } },
    { name: "this build", session: { config: { board: { enabled: false } }, boardClient: false } },
    ...(withBoard ? [{ name: "this build, board on (no client)", session: { boardClient: false } }] : []),
  ];
  /** build name → path → ms per settled task, one per round. */
  const perTask = new Map(builds.map((b) => [b.name, new Map<string, number[]>()]));
  const homes: (() => void)[] = [];
  // Each home kept until the end holds its exit listener (bench/_util.ts tempDir) until then.
  process.setMaxListeners(rounds * builds.length + 10);
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? builds : [...builds].reverse();
    for (const b of order) {
      const got = await session({
        ...b.session,
        plan: AB_PLAN,
        targetN: Number.POSITIVE_INFINITY,
        print: false,
        later: (c) => homes.push(c),
      });
      const line: string[] = [];
      for (const [path, s] of got) {
        const ms = (1000 * s.cpu.seconds) / s.cpu.settles;
        const per = perTask.get(b.name)!;
        per.set(path, [...(per.get(path) ?? []), ms]);
        line.push(`${path} ${ms.toFixed(2)}${s.lost > 0 ? ` (${s.lost} lost)` : ""}`);
      }
      console.log(`round ${r + 1}, ${b.name}: ${line.join(", ")} ms per settled task; load ${loadNow()}`);
    }
  }
  const base = perTask.get(old.commit)!;
  for (const b of builds.slice(1))
    for (const [path, samples] of perTask.get(b.name)!) {
      const before = base.get(path) ?? [];
      // Each round's ratio pairs two daemons that ran minutes apart at most: drift in the load cancels out of it.
      const paired = mid(samples.map((v, r) => v / before[r]!));
      printFigure({
        name: `status daemon CPU per settled task, ${path}, ${b.name} (median of ${rounds} daemons)`,
        value: mid(samples),
        unit: "ms",
        baselineName: `${old.commit} build`,
        baseline: mid(before),
        better: "lower",
      });
      console.log(`  ${path}, ${b.name}: median of the ${rounds} rounds' own ratios ${paired.toFixed(2)}x`);
    }
  for (const c of homes) c();
  for (const b of builds)
    console.log(
      `${b.name}: ${[...perTask.get(b.name)!].map(([path, v]) => `${path} [${v.map((x) => x.toFixed(2)).join(", ")}]`).join("; ")} ms per settled task, by round`,
    );
  console.log(`cpu per task A/B: done in ${((Date.now() - t0) / 1000).toFixed(0)} s; load ${loadNow()}`);
}

/** The middle value (the mean of the two middle ones for an even count: 4 rounds by default). */
function mid(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const h = Math.floor(s.length / 2);
  return s.length === 0 ? NaN : s.length % 2 ? s[h]! : (s[h - 1]! + s[h]!) / 2;
}

const loadNow = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");
/** Whether the checkout differs from HEAD in anything but the history the benches append to. */
const dirty = () =>
  execFileSync("git", ["status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/history.jsonl"], {
    cwd: repoRoot,
    encoding: "utf8",
  }).trim() !== "";

function option(name: string): string | undefined {
  const args = process.argv.slice(2);
  const i = args.findIndex((a) => a === `--${name}` || a.startsWith(`--${name}=`));
  if (i < 0) return undefined;
  const a = args[i]!;
  return a.includes("=") ? a.slice(a.indexOf("=") + 1) : (args[i + 1] ?? "");
}

const before = option("before");
if (before !== undefined) {
  if (before === "" || before.startsWith("--")) throw new Error("bench: --before needs a commit (--before 5c731d4)");
  const rounds = Number(option("rounds") ?? 4);
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error("bench: --rounds needs a whole number ≥ 1");
  await compareBuilds(before, rounds, process.argv.includes("--with-board"));
} else await session({ plan: PLAN, targetN: TARGET_N, boardClient: true, print: true });
