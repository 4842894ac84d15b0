// The machine link over real OpenSSH: a real sshd on 127.0.0.1 lets a second Unix user in; `daemon connect` (this
// repo's bin, run as that user) starts that user's daemon; the link speaks the protocol through ssh's stdio.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isDshError, type DshError } from "../../src/core/errors.js";
import { connectMachine, MachineLink } from "../../src/link/link.js";
import { freePort, sshdUnavailable, startSshd, uidOf, type TestSshd } from "../helpers/sshd.js";
import { linkEvents } from "../helpers/link-events.js";
import { waitFor } from "../helpers/tmux.js";
import { packageVersion } from "../../src/cli/common/version.js";

const skip = sshdUnavailable();
const version = packageVersion();

const alive = (pid: number) => uidOf(pid) !== undefined;

describe("machine link over real ssh", { skip, timeout: 240_000 }, () => {
  let sshd: TestSshd;
  const links: MachineLink[] = [];
  const newLink = (o: Partial<ConstructorParameters<typeof MachineLink>[0]> = {}) => {
    const l = new MachineLink({
      label: "builder",
      machine: sshd.machine,
      version,
      backoff: { baseMs: 100, maxMs: 1000, factor: 2 },
      ...o,
    });
    links.push(l);
    return l;
  };

  before(async () => {
    sshd = await startSshd();
  });
  after(async () => {
    for (const l of links) await l.close();
    await sshd?.close();
  });

  test("connects to the second user's daemon, which daemon connect started, and gets daemon.status", async (t) => {
    if (sshd.copied)
      t.diagnostic(`the checkout is not readable by ${sshd.user.name}: it runs a copy in ${sshd.appRoot}`);
    assert.equal(sshd.userPids().length, 0, "no process of the user before the link");
    const link = newLink().start();
    const up = await link.ready();
    assert.equal(up.hello.daemonVersion, version);
    const s = await link.request("daemon.status");
    assert.equal(s.home, sshd.user.dshHome, "the remote daemon serves the user's own home");
    assert.equal(uidOf(s.pid), sshd.user.uid, "the remote daemon runs as the second user");
    assert.equal(s.pid, up.hello.pid);
    assert.equal(s.openTasks, 0);
    // The same connection as a plain protocol client (what a relay will use).
    assert.equal((await link.client!.request("daemon.status")).pid, s.pid);
    await link.close();
    assert.equal(link.client, undefined);
    // The bridge ends with its ssh session (stdin closed); only the daemon stays, as it would locally.
    await waitFor(
      "only the remote daemon left",
      async () => {
        const left = sshd.userPids();
        return left.length === 1 && left[0] === s.pid;
      },
      20_000,
    );
    assert.equal(link.state, "closed");
    await assert.rejects(link.request("daemon.status"), (e: DshError) => e.code === "MACHINE_UNREACHABLE");
  });

  test("killing the ssh process drops the link; it reconnects to the same daemon", async () => {
    const link = newLink().start();
    const ev = linkEvents(link);
    const first = await link.ready();
    const before = await link.request("daemon.status");
    assert.ok(first.sshPid !== undefined);
    process.kill(first.sshPid, "SIGKILL");
    await waitFor("the drop", async () => ev.downs.length > 0, 30_000);
    assert.equal(ev.downs[0]!.error.code, "MACHINE_UNREACHABLE");
    assert.ok(ev.downs[0]!.retryInMs !== undefined);
    await waitFor("the reconnect", async () => ev.ups.length >= 2, 30_000);
    assert.notEqual(ev.ups[1]!.sshPid, first.sshPid, "a new ssh process");
    const after = await link.request("daemon.status");
    assert.equal(after.pid, before.pid, "the remote daemon outlived the ssh connection");
    await link.close();
  });

  test("the remote daemon SIGKILLed: the link's reconnect restarts it through daemon connect", async () => {
    const link = newLink().start();
    const ev = linkEvents(link);
    await link.ready();
    const before = await link.request("daemon.status");
    process.kill(before.pid, "SIGKILL");
    await waitFor("the old daemon gone", async () => !alive(before.pid), 20_000);
    await waitFor("the drop", async () => ev.downs.length > 0, 30_000);
    await waitFor("the reconnect", async () => ev.ups.length >= 2, 60_000);
    const after = await link.request("daemon.status");
    assert.notEqual(after.pid, before.pid, "a new daemon");
    assert.equal(uidOf(after.pid), sshd.user.uid);
    assert.equal(after.home, sshd.user.dshHome);
    await link.close();
  });

  test("a closed port is MACHINE_UNREACHABLE with ssh's own error line; the link keeps trying with backoff", async () => {
    const port = await freePort();
    const machine = { ...sshd.machine, port };
    await assert.rejects(connectMachine({ label: "nowhere", machine, version }), (e: DshError) => {
      assert.equal(e.code, "MACHINE_UNREACHABLE");
      assert.match(
        String(e.details?.["sshError"]),
        new RegExp(`connect to host 127\\.0\\.0\\.1 port ${port}: Connection refused`),
      );
      assert.match(e.message, /Connection refused/);
      assert.match(e.message, /machine nowhere/);
      return true;
    });
    const link = newLink({
      label: "nowhere",
      machine,
      backoff: { baseMs: 50, maxMs: 400, factor: 2 },
      random: () => 0.999,
    });
    const ev = linkEvents(link);
    link.start();
    await assert.rejects(link.ready(), (e: DshError) => e.code === "MACHINE_UNREACHABLE");
    await waitFor("three failed attempts", async () => ev.downs.length >= 3, 30_000);
    const delays = ev.downs.slice(0, 3).map((d) => d.retryInMs!);
    assert.ok(delays[0]! < delays[1]! && delays[1]! < delays[2]!, `growing delays: ${delays.join(", ")}`);
    assert.equal(new Set(ev.downs.map((d) => d.since)).size, 1, "one outage: since stays the first failure's time");
    await assert.rejects(link.request("daemon.status"), (e: DshError) => {
      assert.equal(e.code, "MACHINE_UNREACHABLE");
      assert.match(e.message, /Connection refused.* since \d{4}-\d\d-\d\dT/);
      return true;
    });
    await link.close();
  });

  test("an unknown or changed host key is refused, and known_hosts is left as it was", async () => {
    const empty = join(sshd.dir, "known_hosts.empty");
    writeFileSync(empty, "");
    await assert.rejects(
      connectMachine({ label: "builder", machine: { ...sshd.machine, knownHosts: empty }, version }),
      (e: DshError) => {
        assert.ok(isDshError(e));
        assert.equal(e.code, "MACHINE_UNREACHABLE");
        assert.equal(e.details?.["sshError"], "Host key verification failed.");
        return true;
      },
    );
    assert.equal(readFileSync(empty, "utf8"), "", "the key was not learned");

    // Another key recorded for this host and port: a changed host key.
    const other = join(sshd.dir, "known_hosts.other");
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", join(sshd.dir, "foreign")]);
    const foreign = readFileSync(join(sshd.dir, "foreign.pub"), "utf8").split(" ")[1]!;
    writeFileSync(other, `[127.0.0.1]:${sshd.port} ssh-ed25519 ${foreign}\n`);
    await assert.rejects(
      connectMachine({ label: "builder", machine: { ...sshd.machine, knownHosts: other }, version }),
      (e: DshError) => {
        assert.equal(e.code, "MACHINE_UNREACHABLE");
        assert.equal(e.details?.["sshError"], "Host key verification failed.");
        assert.match(String(e.details?.["stderr"]), /REMOTE HOST IDENTIFICATION HAS CHANGED/);
        return true;
      },
    );
    assert.equal(readFileSync(other, "utf8"), `[127.0.0.1]:${sshd.port} ssh-ed25519 ${foreign}\n`);
  });
});
