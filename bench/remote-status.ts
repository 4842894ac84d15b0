// Remote status latency (issue 14): N tasks on another machine, reached over real OpenSSH to 127.0.0.1 (a real
// sshd and a second Unix user, from test/helpers/sshd.ts, which the build compiles next to the benches), against
// the same N tasks on this machine, in the same run and with the same owner. Both daemons are bench daemons
// (bench/_daemon.ts: stub runtimes, the driver plays the child); the remote one runs as the second user on its own
// home, and this daemon relays to it over its ssh link (src/remote/relay.ts). Measured from the settling session
// append (on the remote's session file, as its child would write it) to the local owner's owner.delivery push.
// Needs root (useradd, sshd) and /usr/sbin/sshd; without them it says why and exits 0 without figures.
import { spawn, type ChildProcess } from "node:child_process";
import { appendFileSync, chownSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { connect, type DaemonClient } from "../src/client/index.js";
import { resultMdFor } from "../src/extensions/child-report.js";
import { sshdUnavailable, startSshd, type TestSshd } from "../test/helpers/sshd.js";
import { attachOwner, spawnTask, startDaemon, type Owner } from "./_harness.js";
import { epochMs, fixtureEntries, percentile, printFigure, sizes, sleep, stamped, tempDir, until } from "./_util.js";

const { N, ROUNDS } = sizes({ N: 20, ROUNDS: 3 }, { N: 3, ROUNDS: 1 });
/** pi writes the entries up to the first assistant message at once, then one line per message as it ends. */
const FIRST_BURST = 5;
const GRACE_MS = 10_000;
const entries = fixtureEntries("crew-report");
const rand = (lo: number, hi: number) => lo + Math.random() * (hi - lo);

/** A task whose child the driver plays: where it writes, as whom, and its child connection (for agent_end). */
interface Played {
  taskId: string;
  sessionPath: string;
  resultPath: string;
  child: DaemonClient;
  /** The remote user's uid/gid: files the driver (root) creates there are handed to it, as its child's would be. */
  owner?: { uid: number; gid: number };
}

function writeAs(path: string, text: string, who: Played["owner"]): void {
  const tmp = `${path}.bench.tmp`;
  writeFileSync(tmp, text, { mode: 0o600 });
  if (who) chownSync(tmp, who.uid, who.gid);
  renameSync(tmp, path);
}

/** Write one task's session as pi would (one append per line); resolves with the epoch ms of the settling append. */
async function drive(t: Played, startDelayMs: number): Promise<number> {
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

/** The second user's own bench daemon on its dsh-herdr home (the home `daemon connect` bridges to over ssh). */
async function startRemoteDaemon(sshd: TestSshd): Promise<ChildProcess> {
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
      node,
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

/** Spawn on the machine through this daemon, then play the remote child until the local task reads as working. */
async function spawnRemote(home: string, owner: Owner, sshd: TestSshd, cwd: string): Promise<Played> {
  const r = await owner.client.request<{ taskId: string }>("task.spawn", {
    machine: "builder",
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
      const res = await owner.client.request<{ status: string }>("task.get", { taskId: r.taskId });
      return res.status === "running" || res.status === "working" ? true : undefined;
    },
    `${r.taskId} running (relayed)`,
    30_000,
    10,
  );
  const who = { uid: sshd.user.uid, gid: sshd.user.gid };
  const sessionPath = join(dir, "session.jsonl");
  writeAs(sessionPath, "", who); // its child's file, so the remote daemon reads it as its own
  return { taskId: r.taskId, sessionPath, resultPath: join(dir, "result.md"), child, owner: who };
}

interface Samples {
  push: number[];
  lost: number;
}

async function round(owner: Owner, tasks: Played[], s: Samples): Promise<void> {
  const settled = await Promise.all(tasks.map((t) => drive(t, rand(0, tasks.length === 1 ? 0 : 1000))));
  const deadline = Date.now() + GRACE_MS;
  while (!tasks.every((t) => owner.settledAt.has(t.taskId)) && Date.now() < deadline) await sleep(20);
  tasks.forEach((t, i) => {
    const pushed = owner.settledAt.get(t.taskId);
    if (pushed === undefined) s.lost++;
    else s.push.push(pushed - settled[i]!);
  });
  for (const t of tasks) {
    t.child.close();
    await owner.client.request("task.close", { taskId: t.taskId });
  }
}

async function main(): Promise<void> {
  const why = sshdUnavailable();
  if (why) {
    console.log(`remote-status skipped: ${why}; no remote figure in this run`);
    return;
  }
  const { dir, cleanup } = tempDir("remote");
  const home = join(dir, "home");
  const cwd = join(dir, "work");
  mkdirSync(cwd);
  let sshd: TestSshd | undefined;
  let remote: ChildProcess | undefined;
  let daemon: Awaited<ReturnType<typeof startDaemon>> | undefined;
  try {
    sshd = await startSshd();
    const remoteCwd = join(sshd.user.home, "work");
    mkdirSync(remoteCwd);
    sshd.giveToUser(remoteCwd);
    remote = await startRemoteDaemon(sshd);
    daemon = await startDaemon(home, {
      maxParallelAgents: 200,
      maxQueuedAgents: 200,
      machines: { builder: sshd.machine },
    });
    const owner = await attachOwner(home);
    console.log(
      `owner-side signal: ${owner.channel} push; ${N} tasks per round, ${ROUNDS} round(s); remote: ssh to ${sshd.machine.ssh}:${sshd.port}, the second user's own daemon`,
    );
    const local: Samples = { push: [], lost: 0 };
    const far: Samples = { push: [], lost: 0 };
    for (let r = 0; r < ROUNDS; r++) {
      const here: Played[] = [];
      for (let i = 0; i < N; i++) {
        const t = await spawnTask(home, owner, { cwd, keepChild: true });
        here.push({ taskId: t.taskId, sessionPath: t.sessionPath, resultPath: t.resultPath, child: t.child! });
      }
      await round(owner, here, local);
      const there: Played[] = [];
      for (let i = 0; i < N; i++) there.push(await spawnRemote(home, owner, sshd, remoteCwd));
      await round(owner, there, far);
    }
    for (const p of [50, 99])
      printFigure({
        name: `status remote N=${N} p${p} append→${owner.channel}`,
        value: percentile(far.push, p),
        unit: "ms",
        baselineName: `local N=${N}`,
        baseline: percentile(local.push, p),
        better: "lower",
      });
    for (const [what, s] of [
      ["remote", far],
      ["local", local],
    ] as const)
      if (s.lost > 0)
        console.log(`status ${what}: ${s.lost} settles never reached the owner within ${GRACE_MS} ms (left out above)`);
    owner.close();
  } finally {
    await daemon?.stop();
    if (remote && remote.exitCode === null) {
      const gone = new Promise((r) => remote!.once("exit", r));
      remote.kill("SIGTERM");
      await Promise.race([gone, sleep(10_000)]);
    }
    await sshd?.close();
    cleanup();
  }
}

await main();
