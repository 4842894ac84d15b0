// Several machines (issue 27): 4 remote daemons (4 sshd users on 127.0.0.1, each its own bench daemon, as in
// bench/remote-status) × 25 tasks each, settling together, relayed by one local daemon. Figures: status p99
// append → local owner push against the single-machine remote figure measured in the same run (25 tasks on one
// machine; target ≤ 2x), and the local daemon's RSS (target ≤ 150 MB) and CPU while the 100 remote tasks stream
// (their live statuses and settles come over 4 links). A per-stage trace says where the time goes.
// Needs root (useradd, sshd) and /usr/sbin/sshd; without them it says why and exits 0 without figures.
import type { ChildProcess } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { pidsOfUid, sshdUnavailable, startSshd, type TestSshd } from "../test/helpers/sshd.js";
import { attachOwner, startDaemon, type Owner } from "./_harness.js";
import {
  GRACE_MS,
  readTrace,
  remoteStages,
  round,
  spawnRemote,
  stageLine,
  startRemoteDaemon,
  stopRemoteDaemon,
  type Played,
  type Settle,
  type TraceLine,
  linkTransports,
} from "./_remote.js";
import { clockTick, cpuSeconds, fmt, percentile, printFigure, rssOf, sizes, sleep, tempDir } from "./_util.js";

const { PER, MACHINES, ROUNDS } = sizes({ PER: 25, MACHINES: 4, ROUNDS: 2 }, { PER: 3, MACHINES: 2, ROUNDS: 1 });
const TARGET = { ratio: 2, rssMb: 150 };

interface Machine {
  label: string;
  sshd: TestSshd;
  daemon: ChildProcess;
  cwd: string;
  trace: string;
}

/** Which part of a link a process is, by its command line: the machine's daemon, its bridge, its sshd, ssh here. */
type LinkPart = "daemon" | "bridge" | "sshd" | "other" | "ssh";
const LINK_PARTS: LinkPart[] = ["daemon", "bridge", "sshd", "other", "ssh"];

function partOf(pid: number): LinkPart | undefined {
  let cmd: string;
  try {
    cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
  } catch {
    return undefined; // gone meanwhile
  }
  if (cmd.includes("_daemon.js")) return "daemon";
  if (cmd.includes("daemon connect")) return "bridge";
  if (cmd.startsWith("sshd")) return "sshd";
  return "other"; // e.g. the shell sshd runs the remote command with
}

/** The ssh clients this machine's daemon runs (one per link). */
function sshChildrenOf(daemonPid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const [comm, rest] = [
        stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")),
        stat.slice(stat.lastIndexOf(")") + 2),
      ];
      if (comm === "ssh" && Number(rest.split(" ")[1]) === daemonPid) out.push(Number(name));
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/**
 * CPU seconds used so far by the links' processes, by part: every process of the machines' uids (their daemons,
 * `daemon connect` bridges, sshd sessions) and the ssh clients of this machine's daemon.
 */
function linkCpuSeconds(uids: number[], daemonPid: number, tick: number): Record<LinkPart, number> {
  const out: Record<LinkPart, number> = { daemon: 0, bridge: 0, sshd: 0, other: 0, ssh: 0 };
  const add = (part: LinkPart | undefined, pid: number) => {
    if (!part) return;
    try {
      out[part] += cpuSeconds(pid, tick);
    } catch {
      // gone meanwhile
    }
  };
  for (const uid of uids) for (const pid of pidsOfUid(uid)) add(partOf(pid), pid);
  for (const pid of sshChildrenOf(daemonPid)) add("ssh", pid);
  return out;
}

interface RoundCpu {
  /** The local daemon. */
  local: number;
  /** The machines' processes (their daemons, bridges, sshd sessions), all together. */
  machines: number;
  /** The same by part, and the ssh clients here (not in `machines`). */
  parts: Record<LinkPart, number>;
  /** This driver (it writes 100 sessions and receives the owner's pushes). */
  driver: number;
  wallS: number;
}

/** Run a round while sampling the local daemon's RSS (peak of the samples) and everyone's CPU over the round. */
async function measuredRound(
  owner: Owner,
  tasks: Played[],
  pid: number,
  uids: number[],
  tick: number,
): Promise<{ settles: Settle[]; rssMb: number; cpu: RoundCpu }> {
  let peak = 0;
  let running = true;
  const sampler = (async () => {
    while (running) {
      peak = Math.max(peak, rssOf(pid).rssMb);
      await sleep(50);
    }
  })();
  const local0 = cpuSeconds(pid, tick);
  const parts0 = linkCpuSeconds(uids, pid, tick);
  const driver0 = process.cpuUsage();
  const t0 = Date.now();
  const settles = await round(owner, tasks);
  const wallS = (Date.now() - t0) / 1000;
  const d = process.cpuUsage(driver0);
  const parts1 = linkCpuSeconds(uids, pid, tick);
  const parts = Object.fromEntries(LINK_PARTS.map((k) => [k, parts1[k] - parts0[k]])) as Record<LinkPart, number>;
  const cpu: RoundCpu = {
    local: cpuSeconds(pid, tick) - local0,
    machines: parts.daemon + parts.bridge + parts.sshd + parts.other,
    parts,
    driver: (d.user + d.system) / 1e6,
    wallS,
  };
  running = false;
  await sampler;
  return { settles, rssMb: peak, cpu };
}

async function main(): Promise<void> {
  const why = sshdUnavailable();
  if (why) {
    console.log(`remote-machines skipped: ${why}; no several-machines figure in this run`);
    return;
  }
  const tick = clockTick();
  const { dir, cleanup } = tempDir("machines");
  const home = join(dir, "home");
  const machines: Machine[] = [];
  let daemon: Awaited<ReturnType<typeof startDaemon>> | undefined;
  const localTrace = join(dir, "trace.local.jsonl");
  try {
    for (let i = 0; i < MACHINES; i++) {
      const sshd = await startSshd({ userSuffix: String.fromCharCode(97 + i) });
      const cwd = join(sshd.user.home, "work");
      mkdirSync(cwd);
      sshd.giveToUser(cwd);
      const trace = join(sshd.user.home, "trace.remote.jsonl");
      machines.push({ label: `m${i + 1}`, sshd, daemon: await startRemoteDaemon(sshd, trace), cwd, trace });
    }
    daemon = await startDaemon(
      home,
      {
        maxParallelAgents: 200,
        maxQueuedAgents: 200,
        machines: Object.fromEntries(machines.map((m) => [m.label, m.sshd.machine])),
      },
      { BENCH_TRACE: localTrace, BENCH_LINKS: join(dir, "links.json") },
    );
    const owner = await attachOwner(home);
    console.log(
      `owner-side signal: ${owner.channel} push; ${MACHINES} machines (sshd users on 127.0.0.1, each its own daemon) × ${PER} tasks, ${ROUNDS} round(s); baseline: ${PER} tasks on one machine, same run`,
    );
    const single: Settle[] = [];
    const several: Settle[] = [];
    const rss: number[] = [];
    const cpu: RoundCpu[] = [];
    const idleRss = rssOf(daemon.pid).rssMb;
    for (let r = 0; r < ROUNDS; r++) {
      const one: Played[] = [];
      for (let i = 0; i < PER; i++)
        one.push(await spawnRemote(home, owner, machines[0]!.sshd, machines[0]!.label, machines[0]!.cwd));
      single.push(...(await round(owner, one)));
      const all: Played[] = [];
      for (let i = 0; i < PER; i++)
        for (const m of machines) all.push(await spawnRemote(home, owner, m.sshd, m.label, m.cwd));
      const got = await measuredRound(
        owner,
        all,
        daemon.pid,
        machines.map((m) => m.sshd.user.uid),
        tick,
      );
      several.push(...got.settles);
      rss.push(got.rssMb);
      cpu.push(got.cpu);
    }
    owner.close();
    await daemon.stop();
    for (const m of machines) await stopRemoteDaemon(m.daemon);

    const ms = (s: Settle[]) => s.filter((x) => x.pushAt !== undefined).map((x) => x.pushAt! - x.appendAt);
    for (const p of [50, 99]) {
      const value = percentile(ms(several), p);
      const baseline = percentile(ms(single), p);
      printFigure({
        name: `status ${MACHINES} machines × ${PER} p${p} append→owner.delivery`,
        value,
        unit: "ms",
        baselineName: `1 machine × ${PER}`,
        baseline,
        better: "lower",
        ...(p === 99 ? { target: `≤ ${TARGET.ratio}x`, met: value <= TARGET.ratio * baseline } : {}),
      });
    }
    // The same settles from the moment each machine's daemon settled them: what the links and this daemon add
    // (the append → settle part is each machine's own, and here 4 "machines" share this machine's 2 CPUs).
    const lt = readTrace(localTrace);
    const rt: TraceLine[] = machines.flatMap((m) => readTrace(m.trace));
    const fromSettle = (s: Settle[]) => {
      const st = remoteStages(s, lt, rt);
      return st.total.map((t, i) => t - st["remote settle"][i]!);
    };
    printFigure({
      name: `status ${MACHINES} machines × ${PER} p99 remote settle→owner.delivery (the links and this daemon)`,
      value: percentile(fromSettle(several), 99),
      unit: "ms",
      baselineName: `1 machine × ${PER}`,
      baseline: percentile(fromSettle(single), 99),
      better: "lower",
    });
    const peak = Math.max(...rss);
    printFigure({
      name: `local daemon RSS peak while ${MACHINES * PER} remote tasks stream`,
      value: peak,
      unit: "MB",
      baselineName: "idle, before the first spawn",
      baseline: idleRss,
      better: "lower",
      target: `≤ ${TARGET.rssMb} MB`,
      met: peak <= TARGET.rssMb,
    });
    const sum = (k: Exclude<keyof RoundCpu, "parts">) => cpu.reduce((a, c) => a + c[k], 0);
    const part = (k: LinkPart) => cpu.reduce((a, c) => a + c.parts[k], 0);
    const wallS = sum("wallS");
    const share = (s: number) => `${fmt(s, "s")} (${fmt((100 * s) / wallS, "%")} of one core)`;
    console.log(
      `local daemon CPU while ${MACHINES * PER} remote tasks stream: ${share(sum("local"))} over ${fmt(wallS, "s")}, ${fmt((1000 * sum("local")) / (ROUNDS * MACHINES * PER), "ms")} per task; the ${MACHINES} machines' processes (daemons, bridges, sshd) ${share(sum("machines"))}; this driver ${share(sum("driver"))}; load average ${loadavg()[0]!.toFixed(2)}, ${cpus().length} CPUs`,
    );
    const perTask = (s: number) => fmt((1000 * s) / (ROUNDS * MACHINES * PER), "ms");
    console.log(
      `the links' CPU per task, by part: the machines' daemons ${perTask(part("daemon"))}, their \`daemon connect\` bridges ${perTask(part("bridge"))}, their sshd ${perTask(part("sshd"))}, other processes of theirs ${perTask(part("other"))}, the ssh clients here ${perTask(part("ssh"))} (this daemon ${perTask(sum("local"))})`,
    );
    console.log(stageLine(`1 machine × ${PER}`, remoteStages(single, lt, rt)));
    console.log(stageLine(`${MACHINES} machines × ${PER}`, remoteStages(several, lt, rt)));
    console.log(linkTransports(join(dir, "links.json")));
    for (const [what, s] of [
      ["several", several],
      ["single", single],
    ] as const) {
      const lost = s.filter((x) => x.pushAt === undefined).length;
      if (lost > 0)
        console.log(`status ${what}: ${lost} settles never reached the owner within ${GRACE_MS} ms (left out above)`);
    }
  } finally {
    await daemon?.stop();
    for (const m of machines) await stopRemoteDaemon(m.daemon);
    for (const m of machines) await m.sshd.close();
    cleanup();
  }
}

await main();
