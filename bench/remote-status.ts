// Remote status latency (issues 14, 27): N tasks on another machine, reached over real OpenSSH to 127.0.0.1 (a real
// sshd and a second Unix user, from test/helpers/sshd.ts, which the build compiles next to the benches), against
// the same N tasks on this machine, in the same run and with the same owner. Both daemons are bench daemons
// (bench/_daemon.ts: stub runtimes, the driver plays the child); the remote one runs as the second user on its own
// home, and this daemon relays to it over its ssh link (src/daemon/relay/relay.ts). Measured from the settling session
// append (on the remote's session file, as its child would write it) to the local owner's owner.delivery push,
// printed as remote / local (lower is better; target ≤ 2x at p50 and p99), with a per-stage trace of both paths
// (bench/_remote.ts: remote settle → link push → local settled record → owner push).
// Needs root (useradd, sshd) and /usr/sbin/sshd; without them it says why and exits 0 without figures.
import type { ChildProcess } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { sshdUnavailable, startSshd, type TestSshd } from "../test/helpers/sshd.js";
import { attachOwner, spawnTask, startDaemon } from "./_harness.js";
import {
  GRACE_MS,
  localStages,
  readTrace,
  remoteStages,
  round,
  spawnRemote,
  stageLine,
  startRemoteDaemon,
  stopRemoteDaemon,
  type Played,
  type Settle,
  linkTransports,
} from "./_remote.js";
import { percentile, printFigure, sizes, tempDir } from "./_util.js";

const { N, ROUNDS } = sizes({ N: 20, ROUNDS: 3 }, { N: 3, ROUNDS: 1 });
const TARGET_RATIO = 2;

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
  const localTrace = join(dir, "trace.local.jsonl");
  let remoteTrace = "";
  const local: Settle[] = [];
  const far: Settle[] = [];
  try {
    sshd = await startSshd();
    const remoteCwd = join(sshd.user.home, "work");
    mkdirSync(remoteCwd);
    sshd.giveToUser(remoteCwd);
    remoteTrace = join(sshd.user.home, "trace.remote.jsonl");
    remote = await startRemoteDaemon(sshd, remoteTrace);
    daemon = await startDaemon(
      home,
      { maxParallelAgents: 200, maxQueuedAgents: 200, machines: { builder: sshd.machine } },
      { BENCH_TRACE: localTrace, BENCH_LINKS: join(dir, "links.json") },
    );
    const owner = await attachOwner(home);
    console.log(
      `owner-side signal: ${owner.channel} push; ${N} tasks per round, ${ROUNDS} round(s); remote: ssh to ${sshd.machine.ssh}:${sshd.port}, the second user's own daemon`,
    );
    for (let r = 0; r < ROUNDS; r++) {
      const here: Played[] = [];
      for (let i = 0; i < N; i++) {
        const t = await spawnTask(home, owner, { cwd, keepChild: true });
        here.push({ taskId: t.taskId, sessionPath: t.sessionPath, resultPath: t.resultPath, child: t.child! });
      }
      local.push(...(await round(owner, here)));
      const there: Played[] = [];
      for (let i = 0; i < N; i++) there.push(await spawnRemote(home, owner, sshd, "builder", remoteCwd));
      far.push(...(await round(owner, there)));
    }
    owner.close();
    // The daemons write their traces as they exit.
    await daemon.stop();
    await stopRemoteDaemon(remote);
    const ms = (s: Settle[]) => s.filter((x) => x.pushAt !== undefined).map((x) => x.pushAt! - x.appendAt);
    for (const p of [50, 99]) {
      const value = percentile(ms(far), p);
      const baseline = percentile(ms(local), p);
      printFigure({
        name: `status remote N=${N} p${p} append→owner.delivery`,
        value,
        unit: "ms",
        baselineName: `local N=${N}`,
        baseline,
        better: "lower",
        target: `remote / local ≤ ${TARGET_RATIO}x`,
        met: value <= TARGET_RATIO * baseline,
      });
    }
    const lt = readTrace(localTrace);
    console.log(stageLine(`local N=${N}`, localStages(local, lt)));
    console.log(stageLine(`remote N=${N}`, remoteStages(far, lt, readTrace(remoteTrace))));
    console.log(linkTransports(join(dir, "links.json")));
    for (const [what, s] of [
      ["remote", far],
      ["local", local],
    ] as const) {
      const lost = s.filter((x) => x.pushAt === undefined).length;
      if (lost > 0)
        console.log(`status ${what}: ${lost} settles never reached the owner within ${GRACE_MS} ms (left out above)`);
    }
  } finally {
    await daemon?.stop();
    await stopRemoteDaemon(remote);
    await sshd?.close();
    cleanup();
  }
}

await main();
