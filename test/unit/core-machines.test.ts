import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { isDshError } from "../../src/core/errors.js";
import {
  assertMachineLabel,
  assertPort,
  assertSshTarget,
  backoffDelay,
  machineTarget,
  sshArgv,
  sshErrorLine,
  sshForwardArgv,
} from "../../src/core/machines.js";
import { validateConfig } from "../../src/store/config.js";

const badParams = (e: unknown) => isDshError(e) && e.code === "BAD_PARAMS";

test("sshArgv: batch mode, strict host keys, the options, then -- and the target, then the remote command line", () => {
  const argv = sshArgv(
    { ssh: "dev@builder", port: 2222, identity: "/k/id", knownHosts: "/k/kh", command: "node /opt/dsh/bin/dsh-herdr" },
    ["daemon", "connect"],
  );
  const opts = argv.slice(0, argv.indexOf("--"));
  for (const o of ["BatchMode=yes", "StrictHostKeyChecking=yes", "UserKnownHostsFile=/k/kh", "IdentitiesOnly=yes"])
    assert.ok(opts.includes(o), o);
  assert.deepEqual(opts.slice(opts.indexOf("-p"), opts.indexOf("-p") + 2), ["-p", "2222"]);
  assert.deepEqual(opts.slice(opts.indexOf("-i"), opts.indexOf("-i") + 2), ["-i", "/k/id"]);
  assert.deepEqual(argv.slice(argv.indexOf("--")), ["--", "dev@builder", "node /opt/dsh/bin/dsh-herdr daemon connect"]);
  // Defaults: ssh's own port, keys and known_hosts; the command is dsh-herdr.
  const plain = sshArgv({ ssh: "dev@builder" }, ["doctor", "--json"]);
  assert.ok(!plain.includes("-p") && !plain.includes("-i") && !plain.some((a) => a.startsWith("UserKnownHostsFile")));
  assert.equal(plain.at(-1), "dsh-herdr doctor --json");
  assert.ok(!plain.some((a) => /StrictHostKeyChecking=(no|accept-new)/.test(a)));
  assert.throws(() => sshArgv({ ssh: "a@b" }, ["daemon; rm -rf /"]), /needs quoting/);
});

test("sshForwardArgv: the same options, a socket forward that must come up, then -- and the target and a waiting session", () => {
  const m = { ssh: "dev@builder", port: 2222, identity: "/k/id", knownHosts: "/k/kh", command: "dsh" };
  const argv = sshForwardArgv(m, "/h/links/b.sock", "/home/dev/.dsh/herdr/daemon.sock");
  const opts = argv.slice(0, argv.indexOf("--"));
  for (const o of [
    "BatchMode=yes",
    "StrictHostKeyChecking=yes",
    "UserKnownHostsFile=/k/kh",
    "ExitOnForwardFailure=yes",
  ])
    assert.ok(opts.includes(o), o);
  assert.deepEqual(opts.slice(opts.indexOf("-L"), opts.indexOf("-L") + 2), [
    "-L",
    "/h/links/b.sock:/home/dev/.dsh/herdr/daemon.sock",
  ]);
  // A session that only waits (`cat`), so sshd sets TCP_NODELAY on the connection; never the machine's command.
  assert.deepEqual(argv.slice(argv.indexOf("--")), ["--", "dev@builder", "cat"]);
  assert.ok(!opts.includes("-N"));
  // ssh splits -L at colons and paths must be absolute: anything else is refused, never passed on.
  for (const bad of ["rel/x.sock", "/a:b.sock", "/a b.sock", ""])
    assert.throws(() => sshForwardArgv(m, bad, "/r.sock"), /must be absolute/);
});

test("ssh targets and labels: option-looking and shell-looking input is refused", () => {
  for (const ok of ["dev@builder", "builder", "a.b-c_d@10.0.0.7", "me@[::1]", "root@host.example.com"])
    assert.equal(assertSshTarget(ok), ok);
  for (const bad of ["-oProxyCommand=x", "dev@-oProxyCommand=x", "a b@c", "a@b;c", "", "a@", "@b", "a@b c", "a@$(id)"])
    assert.throws(() => assertSshTarget(bad), badParams, bad);
  for (const ok of ["builder", "builder-01", "gpu.a_b", "B2"]) assert.equal(assertMachineLabel(ok), ok);
  for (const bad of ["", "-x", ".x", "a b", "a/b", "x".repeat(65), 3])
    assert.throws(() => assertMachineLabel(bad), badParams, String(bad));
  assert.equal(assertPort("2222"), 2222);
  for (const bad of ["0", "65536", "-1", "22x", 1.5]) assert.throws(() => assertPort(bad), badParams, String(bad));
  assert.equal(machineTarget({ ssh: "a@b", port: 2222 }), "a@b:2222");
  assert.equal(machineTarget({ ssh: "a@b", port: 22 }), "a@b");
});

test("sshErrorLine: the last non-empty stderr line", () => {
  assert.equal(
    sshErrorLine("ssh: connect to host 127.0.0.1 port 1: Connection refused\r\n"),
    "ssh: connect to host 127.0.0.1 port 1: Connection refused",
  );
  assert.equal(
    sshErrorLine(
      "No ED25519 host key is known for [127.0.0.1]:2 and you have requested strict checking.\nHost key verification failed.\n\n",
    ),
    "Host key verification failed.",
  );
  assert.equal(sshErrorLine("  \n"), undefined);
});

test("backoffDelay: grows by the factor, is capped, and its jitter stays within [full/2, full]", () => {
  const p = { baseMs: 100, maxMs: 5000, factor: 2 };
  assert.deepEqual(
    [0, 1, 2, 3, 10].map((a) => backoffDelay(a, 1, p)),
    [100, 200, 400, 800, 5000],
  );
  assert.equal(backoffDelay(0, 0, p), 50);
  fc.assert(
    fc.property(fc.nat(200), fc.double({ min: 0, max: 1, noNaN: true }), (a, r) => {
      const full = Math.min(p.maxMs, p.baseMs * 2 ** Math.min(a, 64));
      const d = backoffDelay(a, r, p);
      return d >= Math.floor(full / 2) && d <= full;
    }),
  );
  // Garbage in: still a sane delay.
  for (const [a, r] of [
    [Number.NaN, 0.5],
    [-3, 0.5],
    [2, Number.NaN],
    [2, 7],
  ] as const) {
    const d = backoffDelay(a, r, p);
    assert.ok(Number.isFinite(d) && d >= 50 && d <= 5000, `${a},${r} -> ${d}`);
  }
});

test("config.json machines: a good entry passes; wrong shapes are CONFIG_INVALID", () => {
  validateConfig({
    machines: {
      builder: { ssh: "dev@builder", port: 2222, identity: "~/.ssh/id", command: "dsh-herdr", knownHosts: "/k" },
    },
  });
  validateConfig({ machines: {} });
  for (const bad of [
    { machines: ["builder"] },
    { machines: { builder: {} } },
    { machines: { builder: { ssh: "-oProxyCommand=x" } } },
    { machines: { builder: { ssh: "a@b", port: 0 } } },
    { machines: { builder: { ssh: "a@b", extra: 1 } } },
    { machines: { "bad label": { ssh: "a@b" } } },
  ]) {
    assert.throws(
      () => validateConfig(bad),
      (e) => isDshError(e) && e.code === "CONFIG_INVALID",
      JSON.stringify(bad),
    );
  }
});
