// A machine link over a forwarded socket, with real OpenSSH: `daemon connect` starts the second user's daemon and its
// hello names the daemon's socket, then `ssh -L` forwards a private socket here to it and the link talks over that,
// with no bridge process left on the machine. A server that refuses forwarding keeps the link on the bridge.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MachineLink } from "../../src/link/link.js";
import { sshdUnavailable, startSshd, uidOf, type TestSshd } from "../helpers/sshd.js";
import { linkEvents } from "../helpers/link-events.js";
import { waitFor } from "../helpers/tmux.js";
import { packageVersion } from "../../src/cli/common/version.js";

const skip = sshdUnavailable();
const version = packageVersion();

/** The command lines of the user's processes that match (`daemon connect` bridges, the forward's waiting `cat`). */
function processesOf(sshd: TestSshd, re: RegExp): string[] {
  const out: string[] = [];
  for (const pid of sshd.userPids()) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").trim();
      if (re.test(cmd)) out.push(`${pid}: ${cmd}`);
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
const bridgesOf = (sshd: TestSshd) => processesOf(sshd, /daemon connect/);
const waitingCats = (sshd: TestSshd) => processesOf(sshd, /^cat$/);

function socketsIn(dir: string): string[] {
  try {
    return readdirSync(dir).filter((f) => f.endsWith(".sock"));
  } catch {
    return [];
  }
}

function harness(sshdOpts: Parameters<typeof startSshd>[0]) {
  const h = {
    sshd: undefined as unknown as TestSshd,
    dir: "",
    links: [] as MachineLink[],
    newLink(): MachineLink {
      const l = new MachineLink({
        label: "builder",
        machine: h.sshd.machine,
        version,
        backoff: { baseMs: 100, maxMs: 1000, factor: 2 },
        forwardDir: join(h.dir, "links"),
      });
      h.links.push(l);
      return l;
    },
  };
  before(async () => {
    h.dir = mkdtempSync(join(tmpdir(), "dsh-fwd-"));
    h.sshd = await startSshd(sshdOpts);
  });
  after(async () => {
    for (const l of h.links) await l.close();
    await h.sshd?.close();
    rmSync(h.dir, { recursive: true, force: true });
  });
  return h;
}

describe("machine link over a forwarded socket (ssh -L)", { skip, timeout: 240_000 }, () => {
  const h = harness({ userSuffix: "f" });

  test("talks to the remote daemon through a private forwarded socket, with no bridge process left there", async () => {
    // A socket left by an earlier daemon of this home (another pid), killed before it could remove it.
    mkdirSync(join(h.dir, "links"), { recursive: true, mode: 0o700 });
    writeFileSync(join(h.dir, "links", "builder-999999999-1.sock"), "");
    const link = h.newLink().start();
    const up = await link.ready();
    assert.equal(up.transport, "forward", `the link stayed on the bridge: ${up.forwardError?.message}`);
    assert.equal(up.forwardError, undefined);
    assert.equal(link.transport, "forward");
    const s = await link.request("daemon.status");
    assert.equal(up.hello.socketPath, s.socketPath, "the hello named the socket the daemon serves");
    assert.equal(s.home, h.sshd.user.dshHome);
    assert.equal(uidOf(s.pid), h.sshd.user.uid, "the remote daemon runs as the second user");
    // The bridge that started the daemon went with its ssh session; frames no longer pass a node process there.
    await waitFor("the bridge gone", async () => bridgesOf(h.sshd).length === 0, 20_000);
    assert.equal((await link.request("daemon.status")).pid, s.pid, "still served, without a bridge");
    // The forward's socket is ours alone: a 0700 directory, a 0600 socket.
    const dir = join(h.dir, "links");
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    const socks = socketsIn(dir);
    assert.equal(socks.length, 1, `one forward socket, the stale one swept: ${socks.join(", ")}`);
    assert.match(socks[0]!, new RegExp(`-${process.pid}-\\d+\\.sock$`));
    assert.equal(statSync(join(dir, socks[0]!)).mode & 0o077, 0, "no access for group or others");
    assert.equal(waitingCats(h.sshd).length, 1, "the forward's session waits there (it makes sshd set TCP_NODELAY)");
    await link.close();
    await waitFor("the forward socket removed", async () => socketsIn(dir).length === 0, 20_000);
    await waitFor("the forward's session ended with it", async () => waitingCats(h.sshd).length === 0, 20_000);
  });

  test("the remote daemon SIGKILLed: the drop is reported, the reconnect restarts it and forwards again", async () => {
    const link = h.newLink().start();
    const ev = linkEvents(link);
    await link.ready();
    const before = await link.request("daemon.status");
    const forwardSsh = link.sshPid!;
    process.kill(before.pid, "SIGKILL");
    // The forward's ssh (its session only waits) outlives a closed forwarded connection; the link must end it.
    await waitFor("the drop", async () => ev.downs.length > 0, 30_000);
    assert.equal(ev.downs[0]!.error.code, "MACHINE_UNREACHABLE");
    await waitFor("the reconnect", async () => ev.ups.length >= 2, 60_000);
    assert.equal(ev.ups[1]!.transport, "forward");
    assert.notEqual(ev.ups[1]!.sshPid, forwardSsh, "a new forward");
    assert.equal(uidOf(forwardSsh), undefined, "the old forward's ssh exited");
    const after = await link.request("daemon.status");
    assert.notEqual(after.pid, before.pid, "a new daemon");
    assert.equal(uidOf(after.pid), h.sshd.user.uid);
    await link.close();
  });

  test("killing the forward's ssh drops the link; it reconnects to the same daemon", async () => {
    const link = h.newLink().start();
    const ev = linkEvents(link);
    const first = await link.ready();
    const before = await link.request("daemon.status");
    process.kill(first.sshPid!, "SIGKILL");
    await waitFor("the drop", async () => ev.downs.length > 0, 30_000);
    await waitFor("the reconnect", async () => ev.ups.length >= 2, 30_000);
    assert.equal(ev.ups[1]!.transport, "forward");
    assert.equal((await link.request("daemon.status")).pid, before.pid, "the daemon outlived the link");
    await link.close();
  });
});

describe("machine link to a server that refuses forwarding", { skip, timeout: 240_000 }, () => {
  const h = harness({ userSuffix: "n", streamLocalForwarding: false });
  const denied = () =>
    h.sshd
      .log()
      .split("\n")
      .filter((l) => /refused streamlocal|request was denied/.test(l)).length;

  test("stays on the bridge, says why with ssh's line, and does not ask again when it reconnects", async () => {
    const link = h.newLink().start();
    const ev = linkEvents(link);
    const up = await link.ready();
    assert.equal(up.transport, "bridge");
    assert.equal(up.forwardError?.code, "FORWARD_FAILED");
    assert.equal(up.forwardError?.details?.["refused"], true);
    assert.match(up.forwardError!.message, /open failed/, "ssh's own line");
    assert.match(up.forwardError!.message, /daemon connect/, "says what the link does instead");
    assert.equal((await link.request("daemon.status")).home, h.sshd.user.dshHome, "served over the bridge");
    assert.equal(denied(), 1, "sshd refused one forward");
    assert.deepEqual(socketsIn(join(h.dir, "links")), [], "no forward socket left");

    process.kill(up.sshPid!, "SIGKILL");
    await waitFor("the reconnect", async () => ev.ups.length >= 2, 30_000);
    assert.equal(ev.ups[1]!.transport, "bridge");
    assert.equal(ev.ups[1]!.forwardError?.code, "FORWARD_FAILED", "the reason stays on every up");
    assert.equal(denied(), 1, "no second forward asked of a server that refused one");
    await link.close();
  });
});
