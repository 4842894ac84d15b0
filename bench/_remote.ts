// Shared by the remote benches (remote-status, remote-machines): another machine is a second Unix user behind a
// real sshd on 127.0.0.1 (test/helpers/sshd.ts, compiled next to the benches) running its own bench daemon
// (bench/_daemon.ts: stub runtimes, the driver plays the child), which this machine's daemon relays to. The driver
// writes each remote task's session as pi would and measures from the settling append to the local owner's push.
// With BENCH_TRACE the daemons note when each settle passes them (bench/_daemon.ts traceStages), for a per-stage
// breakdown: remote settle → link push → local settled record → owner push.
import { spawn, type ChildProcess } from "node:child_process";
import { appendFileSync, chownSync, existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { DAEMON_NODE_FLAGS } from "../src/client/daemon-control.js";
import { connect, type DaemonClient } from "../src/client/index.js";
import { resultMdFor } from "../src/extensions/child-report.js";
import type { TestSshd } from "../test/helpers/sshd.js";
import type { Owner } from "./_harness.js";
import { epochMs, fixtureEntries, percentile, sleep, stamped, until } from "./_util.js";

/** pi writes the entries up to the first assistant message at once, then one line per message as it ends. */
const FIRST_BURST = 5;
export const GRACE_MS = 10_000;
const entries = fixtureEntries("crew-report");
const rand = (lo: number, hi: number) => lo + Math.random() * (hi - lo);

/** A task whose child the driver plays: where it writes, as whom, and its child connection (for agent_end). */
export interface Played {
  taskId: string;
  /** The task's id on the other machine (relayed tasks). */
  remoteTaskId?: string;
  sessionPath: string;
  resultPath: string;
  child: DaemonClient;
  /** The remote user's uid/gid: files the driver (root) creates there are handed to it, as its child's would be. */
  owner?: { uid: number; gid: number };
}

/** One settle as measured: the settling append and the owner's push (undefined: never came). */
export interface Settle {
  taskId: string;
  remoteTaskId?: string;
  appendAt: number;
  pushAt?: number;
}

function writeAs(path: string, text: string, who: Played["owner"]): void {
  const tmp = `${path}.bench.tmp`;
  writeFileSync(tmp, text, { mode: 0o600 });
  if (who) chownSync(tmp, who.uid, who.gid);
  renameSync(tmp, path);
}

/** Write one task's session as pi would (one append per line); resolves with the epoch ms of the settling append. */
export async function drive(t: Played, startDelayMs: number): Promise<number> {
  await sleep(startDelayMs);
  let settleAt = 0;
  for (let i = 0; i < entries.length; i++) {
    const last = i === entries.length - 1;
    if (i >= FIRST_BURST) await sleep(rand(20, 60));
    if (last) {
      // crew_report writes result.md, then pi appends the tool's result: the settling line.
      writeAs(t.resultPath, resultMdFor({ outcome: "completed", report: `Bench report for ${t.taskId}` }), t.owner);
      await sleep(rand(1, 5));
    }
    appendFileSync(t.sessionPath, stamped(entries[i]!, Date.now()));
    if (last) settleAt = epochMs();
  }
  // What src/extensions/child.ts sends when pi's agent loop ends.
  await t.child.request("child.event", {
    type: "agent_end",
    cycle: 1,
    sessionFile: t.sessionPath,
    stopReason: "toolUse",
    willRetry: false,
  });
  return settleAt;
}

/** Drive every task at once (spread over `spreadMs`), wait for their pushes, close them; one Settle per task. */
export async function round(owner: Owner, tasks: Played[], spreadMs = 1000): Promise<Settle[]> {
  const settled = await Promise.all(tasks.map((t) => drive(t, rand(0, tasks.length === 1 ? 0 : spreadMs))));
  const deadline = Date.now() + GRACE_MS;
  while (!tasks.every((t) => owner.settledAt.has(t.taskId)) && Date.now() < deadline) await sleep(20);
  const out = tasks.map((t, i) => ({
    taskId: t.taskId,
    ...(t.remoteTaskId ? { remoteTaskId: t.remoteTaskId } : {}),
    appendAt: settled[i]!,
    ...(owner.settledAt.has(t.taskId) ? { pushAt: owner.settledAt.get(t.taskId)! } : {}),
  }));
  for (const t of tasks) {
    t.child.close();
    await owner.client.request("task.close", { taskId: t.taskId });
  }
  return out;
}

/** The second user's own bench daemon on its dsh-herdr home (the home `daemon connect` bridges to over ssh). */
export async function startRemoteDaemon(sshd: TestSshd, trace?: string): Promise<ChildProcess> {
  const node = sshd.command.split(" ")[0]!;
  const u = sshd.user;
  const proc = spawn(
    "runuser",
    [
      "-u",
      u.name,
      "--",
      "env",
      "-i",
      `HOME=${u.home}`,
      `DSH_HERDR_HOME=${u.dshHome}`,
      "PATH=/usr/local/bin:/usr/bin:/bin",
      ...(trace ? [`BENCH_TRACE=${trace}`] : []),
      node,
      ...DAEMON_NODE_FLAGS,
      join(sshd.appRoot, "dist", "bench", "_daemon.js"),
      u.dshHome,
      JSON.stringify({ maxParallelAgents: 200, maxQueuedAgents: 200 }),
    ],
    // stderr kept for an early exit only: runuser says "Session terminated" when the run's end stops it.
    { stdio: ["ignore", "pipe", "pipe"], cwd: "/" },
  );
  let err = "";
  proc.stderr!.on("data", (c: Buffer) => (err = (err + c.toString("utf8")).slice(-4000)));
  const lines = createInterface({ input: proc.stdout! });
  await new Promise<void>((resolve, reject) => {
    proc.once("exit", (code) => reject(new Error(`remote bench daemon exited early (code ${code}): ${err}`)));
    lines.once("line", () => resolve());
  });
  lines.close();
  return proc;
}

export async function stopRemoteDaemon(proc: ChildProcess | undefined): Promise<void> {
  if (!proc || proc.exitCode !== null) return;
  const gone = new Promise((r) => proc.once("exit", r));
  proc.kill("SIGTERM");
  await Promise.race([gone, sleep(10_000)]);
}

/** Spawn on the machine through this daemon, then play the remote child until the local task reads as working. */
export async function spawnRemote(
  home: string,
  owner: Owner,
  sshd: TestSshd,
  label: string,
  cwd: string,
): Promise<Played> {
  const r = await owner.client.request("task.spawn", {
    machine: label,
    cwd,
    prompt: "bench task",
    model: "bench/model",
    runtime: "headless",
  });
  const rec = JSON.parse(readFileSync(join(home, "tasks", r.taskId, "task.json"), "utf8")) as {
    remote: { taskId: string };
  };
  const dir = join(sshd.user.dshHome, "tasks", rec.remote.taskId);
  const launch = await until(() => {
    try {
      return JSON.parse(readFileSync(join(dir, "launch.json"), "utf8")) as { token: string };
    } catch {
      return undefined;
    }
  }, `launch of ${rec.remote.taskId} there`);
  const child = await connect(sshd.user.dshHome, { kind: "child", taskId: rec.remote.taskId, token: launch.token });
  await child.request("child.event", { type: "prompt_accepted", cycle: 1 });
  await child.request("child.event", { type: "agent_start", cycle: 1 });
  await until(
    async () => {
      const res = await owner.client.request("task.get", { taskId: r.taskId });
      return res.status === "running" || res.status === "working" ? true : undefined;
    },
    `${r.taskId} running (relayed)`,
    30_000,
    10,
  );
  const who = { uid: sshd.user.uid, gid: sshd.user.gid };
  const sessionPath = join(dir, "session.jsonl");
  writeAs(sessionPath, "", who); // its child's file, so the remote daemon reads it as its own
  return {
    taskId: r.taskId,
    remoteTaskId: rec.remote.taskId,
    sessionPath,
    resultPath: join(dir, "result.md"),
    child,
    owner: who,
  };
}

export interface TraceLine {
  stage: "settled" | "link.push";
  taskId?: string;
  remoteTaskId?: string;
  at: number;
}

export function readTrace(file: string): TraceLine[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as TraceLine);
}

/** Per-stage milliseconds of remote settles, from the local and the remote daemons' traces. */
export function remoteStages(
  settles: Settle[],
  local: TraceLine[],
  remote: TraceLine[],
): Record<"remote settle" | "link" | "relay record" | "delivery" | "total", number[]> {
  const first = (lines: TraceLine[], pred: (l: TraceLine) => boolean) => lines.find(pred)?.at;
  const out = { "remote settle": [], link: [], "relay record": [], delivery: [], total: [] } as Record<
    "remote settle" | "link" | "relay record" | "delivery" | "total",
    number[]
  >;
  for (const s of settles) {
    if (s.pushAt === undefined || !s.remoteTaskId) continue;
    const b = first(remote, (l) => l.stage === "settled" && l.taskId === s.remoteTaskId);
    const c = first(local, (l) => l.stage === "link.push" && l.remoteTaskId === s.remoteTaskId);
    const d = first(local, (l) => l.stage === "settled" && l.taskId === s.taskId);
    if (b === undefined || c === undefined || d === undefined) continue;
    out["remote settle"].push(b - s.appendAt);
    out.link.push(c - b);
    out["relay record"].push(d - c);
    out.delivery.push(s.pushAt - d);
    out.total.push(s.pushAt - s.appendAt);
  }
  return out;
}

/** Per-stage milliseconds of local settles: settle (append → the supervisor's listeners), delivery (→ owner push). */
export function localStages(settles: Settle[], local: TraceLine[]): Record<"settle" | "delivery" | "total", number[]> {
  const out = { settle: [] as number[], delivery: [] as number[], total: [] as number[] };
  for (const s of settles) {
    if (s.pushAt === undefined) continue;
    const d = local.find((l) => l.stage === "settled" && l.taskId === s.taskId)?.at;
    if (d === undefined) continue;
    out.settle.push(d - s.appendAt);
    out.delivery.push(s.pushAt - d);
    out.total.push(s.pushAt - s.appendAt);
  }
  return out;
}

export function stageLine(what: string, stages: Record<string, number[]>): string {
  const parts = Object.entries(stages).map(
    ([k, v]) => `${k} p50 ${percentile(v, 50).toFixed(2)} / p99 ${percentile(v, 99).toFixed(2)}`,
  );
  return `trace ${what} (ms): ${parts.join(" | ")}`;
}

/**
 * How each machine's link carried its frames, from the bench daemon's BENCH_LINKS file: a forward (`ssh -L` to the
 * remote daemon's socket) or the `daemon connect` bridge, with why the forward was not made.
 */
export function linkTransports(file: string): string {
  let seen: Record<string, { transport: string; forwardError?: string }>;
  try {
    seen = JSON.parse(readFileSync(file, "utf8")) as typeof seen;
  } catch (e) {
    return `link transport: unknown (${(e as Error).message})`;
  }
  const each = Object.values(seen).map((v) => `${v.transport}${v.forwardError ? ` (${v.forwardError})` : ""}`);
  if (each.length === 0) return "link transport: unknown (no link was made)";
  const kinds = [...new Set(each)];
  return `link transport: ${
    kinds.length === 1
      ? `${kinds[0]} (all ${each.length})`
      : Object.entries(seen)
          .map(([l, v]) => `${l} ${v.transport}`)
          .join(", ")
  }; forward = ssh -L to the remote daemon's socket, bridge = daemon connect`;
}
