// `machine add|list|check|remove` and `daemon connect` through the real bin/dsh-herdr, against a real sshd and a
// second Unix user (test/helpers/sshd.ts).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { FrameReader } from "../../src/client/frames.js";
import { freePort, sshdUnavailable, startSshd, uidOf, type TestSshd } from "../helpers/sshd.js";
import { killUnder } from "../helpers/procs.js";
import { waitFor } from "../helpers/tmux.js";

const root = join(import.meta.dirname, "..", "..", "..");
const bin = join(root, "bin", "dsh-herdr");
const version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version;

interface Run {
  code: number;
  out: string;
  err: string;
}

function cliIn(dir: string) {
  const env = { ...process.env, HOME: join(dir, "home"), DSH_HERDR_HOME: join(dir, "dsh") };
  return async (args: string[]): Promise<Run> => {
    const r = await execa(process.execPath, [bin, ...args], { env, reject: false, stdin: "ignore", timeout: 120_000 });
    return { code: r.exitCode ?? -1, out: String(r.stdout), err: String(r.stderr) };
  };
}

test("daemon connect: bridges stdio to the home's daemon, starting it; exits when stdin closes", {
  timeout: 60_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-connect-"));
  const home = join(dir, "dsh");
  try {
    const p = spawn(process.execPath, [bin, "daemon", "connect"], {
      env: { ...process.env, DSH_HERDR_HOME: home },
      stdio: ["pipe", "pipe", "pipe"],
    });
    const reader = new FrameReader();
    const frames: { id?: number; result?: Record<string, unknown> }[] = [];
    p.stdout.on("data", (c: Buffer) => {
      for (const ev of reader.push(c)) if (ev.kind === "frame") frames.push(JSON.parse(ev.text));
    });
    let stderr = "";
    p.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((r) => p.once("exit", r));
    p.stdin.write(JSON.stringify({ id: 1, method: "hello", params: { kind: "cli" } }) + "\n");
    p.stdin.write(JSON.stringify({ id: 2, method: "daemon.status", params: {} }) + "\n");
    await waitFor("both replies", async () => frames.length >= 2, 30_000);
    assert.equal(frames[0]!.id, 1);
    assert.equal(frames[0]!.result!["daemonVersion"], version);
    assert.equal(frames[1]!.result!["home"], home, "the daemon of this home was started");
    assert.equal(stderr, "");
    p.stdin.end();
    assert.equal(await exited, 0);
    // The daemon outlives the bridge: a second bridge finds the same one.
    const r = await execa(process.execPath, [bin, "daemon", "status", "--json"], {
      env: { ...process.env, DSH_HERDR_HOME: home },
      reject: false,
    });
    assert.equal(r.exitCode, 0);
    assert.equal((JSON.parse(String(r.stdout)) as { pid: number }).pid, frames[1]!.result!["pid"]);
  } finally {
    await execa(process.execPath, [bin, "daemon", "stop"], {
      env: { ...process.env, DSH_HERDR_HOME: home },
      reject: false,
    });
    killUnder(dir);
    rmSync(dir, { recursive: true, force: true });
  }
});

describe("machine commands over real ssh", { skip: sshdUnavailable(), timeout: 300_000 }, () => {
  let sshd: TestSshd;
  let dir: string;
  let cli: (args: string[]) => Promise<Run>;

  before(async () => {
    sshd = await startSshd();
    dir = mkdtempSync(join(tmpdir(), "dsh-machine-cli-"));
    cli = cliIn(dir);
  });
  after(async () => {
    await sshd?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("machine add, list, check and remove via the real binary", async () => {
    const m = sshd.machine;
    const add = await cli([
      "machine",
      "add",
      "builder",
      "--ssh",
      m.ssh,
      "--port",
      String(m.port),
      "--identity",
      m.identity!,
      "--known-hosts",
      m.knownHosts!,
      "--command",
      m.command!,
    ]);
    assert.equal(add.code, 0, add.err);
    assert.match(add.out, /added machine builder/);
    const cfg = JSON.parse(readFileSync(join(dir, "dsh", "config.json"), "utf8")) as {
      machines: Record<string, unknown>;
    };
    assert.deepEqual(cfg.machines["builder"], {
      ssh: m.ssh,
      port: m.port,
      identity: m.identity,
      knownHosts: m.knownHosts,
      command: m.command,
    });

    const again = await cli(["machine", "add", "builder", "--ssh", m.ssh]);
    assert.equal(again.code, 2);
    assert.match(again.err, /already exists/);

    // A second machine on a closed port: listed as unreachable with ssh's line.
    const closed = await freePort();
    assert.equal(
      (
        await cli([
          "machine",
          "add",
          "gone",
          "--ssh",
          m.ssh,
          "--port",
          String(closed),
          "--identity",
          m.identity!,
          "--known-hosts",
          m.knownHosts!,
        ])
      ).code,
      0,
    );

    // A third whose --command does not exist there: ssh got in, the remote shell's line is the error.
    assert.equal(
      (
        await cli([
          "machine",
          "add",
          "nocmd",
          "--ssh",
          m.ssh,
          "--port",
          String(m.port),
          "--identity",
          m.identity!,
          "--known-hosts",
          m.knownHosts!,
          "--command",
          "no-such-dsh-herdr",
        ])
      ).code,
      0,
    );

    const list = await cli(["machine", "list", "--json"]);
    assert.equal(list.code, 0, list.err);
    const rows = (JSON.parse(list.out) as { machines: Record<string, unknown>[] }).machines;
    assert.deepEqual(
      rows.find((r) => r["label"] === "builder"),
      { label: "builder", target: `${m.ssh}:${m.port}`, reachable: true, version, openTasks: 0 },
    );
    const gone = rows.find((r) => r["label"] === "gone")!;
    assert.equal(gone["reachable"], false);
    assert.match(String(gone["error"]), new RegExp(`port ${closed}: Connection refused`));
    const nocmd = rows.find((r) => r["label"] === "nocmd")!;
    assert.equal(nocmd["reachable"], false);
    assert.match(String(nocmd["error"]), /no-such-dsh-herdr: not found/);
    // The listing started the remote daemon as the second user (daemon connect).
    const daemonPids = sshd.userPids();
    assert.ok(daemonPids.length > 0 && daemonPids.every((p) => uidOf(p) === sshd.user.uid));

    const text = await cli(["machine", "list"]);
    assert.equal(text.code, 0);
    assert.match(text.out, /^LABEL\s+TARGET\s+REACHABLE\s+VERSION\s+OPEN TASKS$/m);
    assert.match(
      text.out,
      new RegExp(
        `^builder\\s+${m.ssh.replace(/\./g, "\\.")}:${m.port}\\s+yes\\s+${version.replace(/\./g, "\\.")}\\s+0$`,
        "m",
      ),
    );
    assert.match(text.out, /^gone: .*Connection refused/m);

    const check = await cli(["machine", "check", "builder", "--json"]);
    const report = JSON.parse(check.out) as {
      ok: boolean;
      version: string;
      checks: { name: string; level: string; detail: string }[];
    };
    assert.equal(report.version, version);
    assert.equal(report.checks[0]!.name, "link");
    assert.match(report.checks[0]!.detail, new RegExp(`home ${sshd.user.dshHome}`));
    // The rest is the remote's own doctor: its home check names the second user's home, not ours.
    assert.ok(report.checks.length > 3, JSON.stringify(report.checks));
    assert.ok(
      report.checks.some((c) => c.detail.includes(sshd.user.dshHome) && c.name !== "link"),
      JSON.stringify(report.checks),
    );
    assert.equal(check.code, report.ok ? 0 : 1);

    const checkGone = await cli(["machine", "check", "gone"]);
    assert.equal(checkGone.code, 1);
    assert.match(checkGone.err, /MACHINE_UNREACHABLE: machine gone .*Connection refused/);

    const unknown = await cli(["machine", "check", "nope", "--json"]);
    assert.equal(unknown.code, 1);
    assert.equal((JSON.parse(unknown.err) as { error: { code: string } }).error.code, "MACHINE_UNKNOWN");
    assert.match(unknown.err, /known: builder, gone, nocmd/);

    assert.equal((await cli(["machine", "remove", "gone"])).code, 0);
    assert.equal((await cli(["machine", "remove", "nocmd"])).code, 0);
    const removed = await cli(["machine", "remove", "builder", "--json"]);
    assert.equal(removed.code, 0, removed.err);
    assert.deepEqual(JSON.parse(removed.out), { label: "builder", removed: true });
    const twice = await cli(["machine", "remove", "builder"]);
    assert.equal(twice.code, 1);
    assert.match(twice.err, /MACHINE_UNKNOWN/);
    const empty = await cli(["machine", "list"]);
    assert.match(empty.out, /no machines/);
  });

  test("machine add refuses bad input and leaves config.json as it was", async () => {
    const before = (() => {
      try {
        return readFileSync(join(dir, "dsh", "config.json"), "utf8");
      } catch {
        return undefined;
      }
    })();
    const bad: [string[], RegExp][] = [
      [["machine", "add", "-x", "--ssh", "a@b"], /unknown option|label/],
      [["machine", "add", "bad label", "--ssh", "a@b"], /machine label/],
      [["machine", "add", "ok", "--ssh", "-oProxyCommand=touch /tmp/x"], /not USER@HOST/],
      [["machine", "add", "ok", "--ssh", "a@b", "--port", "99999"], /not a TCP port/],
      [["machine", "add", "ok", "--ssh", "a@b", "--identity", join(dir, "no-such-key")], /is not a file/],
      [["machine", "add", "ok"], /--ssh/],
    ];
    for (const [args, msg] of bad) {
      const r = await cli(args);
      assert.equal(r.code, 2, `${args.join(" ")}: ${r.err}`);
      assert.match(r.err, msg);
    }
    const now = (() => {
      try {
        return readFileSync(join(dir, "dsh", "config.json"), "utf8");
      } catch {
        return undefined;
      }
    })();
    assert.equal(now, before);
  });

  test("open and logs of a task on another machine go there over ssh (open prints the ssh -t command without a terminal)", async () => {
    const d = mkdtempSync(join(tmpdir(), "dsh-remote-open-"));
    try {
      const c = cliIn(d);
      const localId = "tmx4aaaaaaaa";
      const remoteId = "tmx4zzzzzzzz";
      mkdirSync(join(d, "dsh", "tasks", localId), { recursive: true, mode: 0o700 });
      writeFileSync(join(d, "dsh", "config.json"), JSON.stringify({ machines: { builder: sshd.machine } }));
      writeFileSync(
        join(d, "dsh", "tasks", localId, "task.json"),
        JSON.stringify({
          taskId: localId,
          name: "worker-x",
          runtime: "tmux",
          machine: "builder",
          remote: { label: "builder", taskId: remoteId },
        }),
      );
      const m = sshd.machine;
      const printed = await c(["open", "aaaa"]);
      assert.equal(printed.code, 0, printed.err);
      assert.match(
        printed.out,
        new RegExp(`^ssh -t .*-p ${m.port} .*${m.ssh.replace(/\./g, "\\.")} '.* open ${remoteId}'$`),
      );
      const j = JSON.parse((await c(["open", localId, "--json"])).out) as { command: string[]; remoteTaskId: string };
      assert.equal(j.remoteTaskId, remoteId);
      assert.deepEqual(j.command.slice(0, 2), ["ssh", "-t"]);
      assert.equal(j.command.at(-1), `${m.command} open ${remoteId}`);
      // The command reaches that machine's own dsh-herdr (here without a tty), which has no such task.
      const there = await execa(
        j.command[0]!,
        j.command.slice(1).map((a) => (a === "-t" ? "-T" : a)),
        { reject: false, stdin: "ignore" },
      );
      assert.equal(there.exitCode, 1, String(there.stderr));
      assert.match(String(there.stderr), new RegExp(`dsh-herdr: TASK_NOT_FOUND: .*${remoteId}`));
      // logs relays the remote CLI's own error as ours, saying where.
      const logs = await c(["logs", localId, "--json"]);
      assert.equal(logs.code, 1);
      const err = (JSON.parse(logs.err) as { error: { code: string; message: string } }).error;
      assert.equal(err.code, "TASK_NOT_FOUND");
      assert.match(err.message, /^on machine builder: /);
      // A machine no longer in config.json: named.
      writeFileSync(join(d, "dsh", "config.json"), JSON.stringify({ machines: {} }));
      const gone = await c(["logs", localId]);
      assert.equal(gone.code, 1);
      assert.match(gone.err, /MACHINE_UNKNOWN: .*machine builder .*machine add builder/);
    } finally {
      rmSync(d, { recursive: true, force: true });
    }
  });

  test("a hand-edited bad machines entry is CONFIG_INVALID naming the key", async () => {
    const d = mkdtempSync(join(tmpdir(), "dsh-machine-cfg-"));
    try {
      const c = cliIn(d);
      await c(["config", "path"]);
      mkdirSync(join(d, "dsh"), { recursive: true, mode: 0o700 });
      writeFileSync(join(d, "dsh", "config.json"), JSON.stringify({ machines: { builder: { ssh: "a@b", prot: 22 } } }));
      const r = await c(["machine", "list"]);
      assert.equal(r.code, 1);
      assert.match(r.err, /CONFIG_INVALID: unknown key "machines\.builder\.prot"/);
    } finally {
      rmSync(d, { recursive: true, force: true });
    }
  });
});
