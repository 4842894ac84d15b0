// Bench harness: a real daemon process (bench/_daemon.ts) on a temp home, an owner connection over its Unix
// socket, and tasks whose child the driver plays: hello with the task token, accept the prompt, then leave, so the
// session file and result.md (written by the driver as pi would) are the only evidence the daemon gets.
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { readFile, readdir } from "node:fs/promises";
import { createConnection } from "node:net";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { DAEMON_NODE_FLAGS } from "../src/client/daemon-control.js";
import { connect, type DaemonClient } from "../src/client/index.js";
import { epochMs, repoRoot, until } from "./_util.js";

export interface BenchDaemon {
  home: string;
  pid: number;
  proc: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Start dist/bench/_daemon.js on `home` and wait until it serves its socket. `root`: the checkout whose build runs
 * (another commit's, built by bench/_build.ts, for an A/B of two builds driven by the same bench code).
 */
export async function startDaemon(
  home: string,
  config: Record<string, unknown> = {},
  env: Record<string, string> = {},
  root = repoRoot,
): Promise<BenchDaemon> {
  const entry = join(root, "dist", "bench", "_daemon.js");
  // BENCH_DAEMON_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof": node flags for the daemon only (NODE_OPTIONS refuses
  // --cpu-prof, and would profile the driver too); how the burst's profile in docs/performance.md was taken.
  const nodeArgs = (process.env.BENCH_DAEMON_ARGS ?? "").split(/\s+/).filter(Boolean);
  const proc = spawn(process.execPath, [...DAEMON_NODE_FLAGS, ...nodeArgs, entry, home, JSON.stringify(config)], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, HOME: join(home, ".."), DSH_HERDR_HOME: home, ...env },
  });
  const lines = createInterface({ input: proc.stdout! });
  const ready = await new Promise<{ pid: number }>((resolve, reject) => {
    proc.once("exit", (code) => reject(new Error(`bench daemon exited early (code ${code}); see its stderr above`)));
    lines.on("line", (l) => {
      if (l.startsWith('{"ready"')) resolve(JSON.parse(l) as { pid: number });
    });
  });
  // BENCH_DAEMON_STDOUT=<file>: what the daemon prints after its ready line (V8's --trace-gc-nvp, through
  // BENCH_DAEMON_ARGS), kept in a file; how the scavenges' phases in docs/performance.md were read.
  if (process.env.BENCH_DAEMON_STDOUT) {
    const out = (await import("node:fs")).createWriteStream(process.env.BENCH_DAEMON_STDOUT);
    lines.on("line", (l) => out.write(l + "\n"));
  } else lines.close();
  let exited = false;
  proc.once("exit", () => (exited = true));
  return {
    home,
    pid: ready.pid,
    proc,
    async stop() {
      if (exited) return;
      const gone = new Promise<void>((r) => proc.once("exit", () => r()));
      proc.kill("SIGTERM");
      const t = setTimeout(() => proc.kill("SIGKILL"), 10_000);
      await gone;
      clearTimeout(t);
    },
  };
}

export interface Owner {
  id: string;
  client: DaemonClient;
  /** The secret the owner's first hello was issued: another connection as this owner says hello with it. */
  secret?: string;
  /** "owner.delivery" when the daemon serves owner.attach, else "task.status" (task.subscribe pushes). */
  channel: string;
  /** First settled push per task, in epoch ms. */
  settledAt: Map<string, number>;
  /** Every settled push in arrival order (a task settles once per cycle). */
  settles: { taskId: string; at: number }[];
  /** The first settled push for taskId that arrives after `afterMs`. */
  nextSettle(taskId: string, afterMs: number, timeoutMs?: number): Promise<number>;
  close(): void;
}

const SETTLED = new Set(["completed", "blocked", "failed", "gone", "interrupted", "closed"]);

/** An owner (a pi session id) attached for deliveries and subscribed to its tasks' status pushes. */
export async function attachOwner(home: string): Promise<Owner> {
  const id = randomUUID();
  const client = await connect(home, { kind: "owner", ownerId: id, timeoutMs: 120_000 });
  const settledAt = new Map<string, number>();
  const settles: { taskId: string; at: number }[] = [];
  let channel = "task.status";
  const mark = (taskId: unknown) => {
    const at = epochMs();
    if (typeof taskId !== "string") return;
    if (!settledAt.has(taskId)) settledAt.set(taskId, at);
    settles.push({ taskId, at });
  };
  try {
    await client.request("owner.attach", {});
    channel = "owner.delivery";
    client.onPush("owner.delivery", (p: { taskId?: string; subagent_id?: string }) => mark(p.taskId ?? p.subagent_id));
  } catch {
    // Older daemon without owner deliveries: the status push is the owner-side signal.
    client.onPush("task.status", (p: { taskId: string; status: string }) => SETTLED.has(p.status) && mark(p.taskId));
  }
  await client.request("task.subscribe", {});
  const nextSettle = (taskId: string, afterMs: number, timeoutMs = 30_000) =>
    until(
      () => settles.find((e) => e.taskId === taskId && e.at > afterMs)?.at,
      `a settled push for ${taskId}`,
      timeoutMs,
      2,
    );
  const secret = client.hello.secret;
  return {
    id,
    client,
    ...(secret ? { secret } : {}),
    channel,
    settledAt,
    settles,
    nextSettle,
    close: () => client.close(),
  };
}

export interface BenchTask {
  taskId: string;
  dir: string;
  sessionPath: string;
  resultPath: string;
  /** Epoch ms just before task.spawn was sent, and when the stub runtime's launch ran (daemon clock). */
  spawnAt: number;
  launchAt: number;
}

export interface SpawnOptions {
  cwd: string;
  isolated?: boolean;
  /** Keep the child connection (the extension path) instead of leaving after the prompt. */
  keepChild?: boolean;
}

/** Spawn through the socket, then play the child until the daemon counts the prompt as taken. */
export async function spawnTask(
  home: string,
  owner: Owner,
  o: SpawnOptions,
): Promise<BenchTask & { child?: DaemonClient }> {
  const spawnAt = epochMs();
  const r = await owner.client.request("task.spawn", {
    cwd: o.cwd,
    prompt: "bench task",
    model: "bench/model",
    runtime: "headless",
    isolated: o.isolated ?? false,
  });
  const dir = join(home, "tasks", r.taskId);
  const launch = await until(() => {
    try {
      return JSON.parse(readFileSync(join(dir, "launch.json"), "utf8")) as { at: number; token: string };
    } catch {
      return undefined;
    }
  }, `launch of ${r.taskId}`);
  const child = await connect(home, { kind: "child", taskId: r.taskId, token: launch.token });
  await child.request("child.event", { type: "prompt_accepted", cycle: 1 });
  // As the child extension does once pi starts the run (the task reads starting until then).
  await child.request("child.event", { type: "agent_start", cycle: 1 });
  // The readiness barrier resolves on that event; wait until the task reads as working.
  await until(
    async () => {
      const res = await owner.client.request("task.get", { taskId: r.taskId });
      return res.status === "running" || res.status === "working" ? true : undefined;
    },
    `${r.taskId} running`,
    30_000,
    10,
  );
  if (!o.keepChild) child.close();
  const t: BenchTask & { child?: DaemonClient } = {
    taskId: r.taskId,
    dir,
    sessionPath: join(dir, "session.jsonl"),
    resultPath: join(dir, "result.md"),
    spawnAt,
    launchAt: launch.at,
  };
  if (o.keepChild) t.child = child;
  return t;
}

/** One task.list request over a raw socket. Returns ms and reply bytes. */
export function rawList(
  home: string,
  params: Record<string, unknown>,
): Promise<{ ms: number; bytes: number; count: number }> {
  return new Promise((resolve, reject) => {
    const s = createConnection(join(home, "daemon.sock"));
    let buf = "";
    let t0 = 0;
    s.on("connect", () => s.write(JSON.stringify({ id: 1, method: "hello", params: { kind: "cli" } }) + "\n"));
    s.on("data", (d) => {
      buf += d.toString("utf8");
      for (let nl; (nl = buf.indexOf("\n")) >= 0; ) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        const msg = JSON.parse(line) as { id?: number; result?: { tasks: unknown[] }; error?: { message: string } };
        if (msg.id === 1) {
          t0 = epochMs();
          s.write(JSON.stringify({ id: 2, method: "task.list", params }) + "\n");
        } else if (msg.id === 2) {
          const ms = epochMs() - t0;
          s.destroy();
          if (msg.error) reject(new Error(msg.error.message));
          else resolve({ ms, bytes: Buffer.byteLength(line), count: msg.result!.tasks.length });
        }
      }
    });
    s.on("error", reject);
  });
}

/** What an index-less daemon does per list: read the directory and every task.json. */
export async function scanListMs(home: string): Promise<number> {
  const t = performance.now();
  const tasks = join(home, "tasks");
  const rows = [];
  for (const id of await readdir(tasks)) {
    if (!id.startsWith("t")) continue;
    const rec = JSON.parse(await readFile(join(tasks, id, "task.json"), "utf8")) as {
      taskId: string;
      createdAt: number;
    };
    rows.push(rec);
  }
  rows.sort((a, b) => b.createdAt - a.createdAt);
  return performance.now() - t;
}
