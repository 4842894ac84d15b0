// `machine add|list|check|remove|set|trust` and `daemon connect` through the real bin/dsh-herdr, against a real sshd
// and a second Unix user (test/helpers/sshd.ts); onboarding a machine with real pi there.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { FrameReader } from "../../src/protocol/frames.js";
import { pidAlive } from "../../src/client/liveness.js";
import { readPid } from "../../src/daemon/lock.js";
import type { AgentResult } from "../../src/core/types.js";
import { preparePiAgentDir } from "../../fixtures/scripted-model/agent-dir.js";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { startScriptedModel, type ScriptedModel } from "../../fixtures/scripted-model/server.js";
import { initRepo } from "../helpers/git.js";
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
    // The listing started the remote daemon as the second user (daemon connect): its home's daemon.pid names a live
    // process of that user. Not every process of the user's: the listing's sshd sessions exit while they are read.
    const remoteDaemon = readPid(sshd.user.dshHome);
    assert.ok(remoteDaemon !== undefined, `no daemon.pid in ${sshd.user.dshHome} after machine list`);
    assert.ok(pidAlive(remoteDaemon), `the daemon there (pid ${remoteDaemon}) is alive, not a zombie`);
    assert.equal(
      uidOf(remoteDaemon),
      sshd.user.uid,
      `the daemon there (pid ${remoteDaemon}) runs as ${sshd.user.name}`,
    );

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
    assert.equal(report.checks[0]!.name, "dsh-herdr");
    assert.equal(report.checks[1]!.name, "link");
    assert.match(report.checks[1]!.detail, new RegExp(`home ${sshd.user.dshHome}`));
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

// Onboarding another machine as a new user would (issue 25): its host key, what is missing there, changing its entry
// under a running daemon, a remote spawn without --cwd, a repository git refuses, remote ids, readable logs.
describe("onboarding a machine over real ssh (real pi there)", { skip: sshdUnavailable(), timeout: 600_000 }, () => {
  const ONBOARD_SCRIPT: Script = {
    conversations: [
      {
        name: "feature",
        match: "MARK-ONBOARD",
        steps: [
          {
            text: "Writing the feature file now.",
            toolCalls: [{ name: "write", arguments: { path: "feature.txt", content: "feature done\n" } }],
          },
          { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "Added feature.txt" } }] },
        ],
      },
    ],
  };
  let sshd: TestSshd;
  let model: ScriptedModel;
  let dir: string;
  let cli: (args: string[]) => Promise<Run>;
  let remoteRepo: string;
  let localRepo: string;
  let rootRepo: string;
  let remoteTask: AgentResult;
  const add = (label: string, extra: string[] = []) =>
    cli([
      "machine",
      "add",
      label,
      "--ssh",
      sshd.machine.ssh,
      "--port",
      String(sshd.port),
      "--identity",
      sshd.clientKey,
      ...extra,
    ]);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "dsh-onboard-"));
    model = await startScriptedModel({ script: ONBOARD_SCRIPT, logPath: join(dir, "requests.jsonl") });
    sshd = await startSshd();
    const agent = preparePiAgentDir(join(dir, "pi"), model.url);
    cpSync(join(dir, "pi", "agent"), sshd.user.piDir, { recursive: true });
    sshd.giveToUser(sshd.user.piDir);
    remoteRepo = initRepo(sshd.user.home, "repo");
    sshd.giveToUser(remoteRepo);
    localRepo = initRepo(dir, "local-repo");
    // A repository root owns, readable by the machine's user: git there refuses it ("dubious ownership").
    rootRepo = initRepo(dir, "root-repo");
    chmodSync(dir, 0o755);
    execFileSync("chmod", ["-R", "a+rX", rootRepo]);
    const env = {
      ...process.env,
      HOME: join(dir, "home"),
      DSH_HERDR_HOME: join(dir, "dsh"),
      PI_CODING_AGENT_DIR: agent.env.PI_CODING_AGENT_DIR!,
      PI_OFFLINE: "1",
      PI_SKIP_VERSION_CHECK: "1",
    };
    cli = async (args) => {
      const r = await execa(process.execPath, [bin, ...args], {
        env,
        reject: false,
        stdin: "ignore",
        timeout: 180_000,
      });
      return { code: r.exitCode ?? -1, out: String(r.stdout), err: String(r.stderr) };
    };
  });
  after(async () => {
    await cli?.(["daemon", "stop"]);
    await sshd?.close();
    await model?.close();
    if (dir) {
      killUnder(dir);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("an unknown host key: machine check names `machine trust`; trust shows the fingerprint, --yes adds it; a changed key is refused", async () => {
    const kh = join(dir, "known_hosts_trusty");
    writeFileSync(kh, "", { mode: 0o600 });
    assert.equal((await add("trusty", ["--known-hosts", kh, "--command", sshd.command])).code, 0);
    const refused = await cli(["machine", "check", "trusty"]);
    assert.equal(refused.code, 1);
    assert.match(
      refused.err,
      /MACHINE_UNREACHABLE: .*Host key verification failed\..*dsh-herdr machine trust trusty\b/,
    );

    const fingerprint = execFileSync("ssh-keygen", ["-lf", join(sshd.dir, "host_ed25519.pub")], {
      encoding: "utf8",
    }).split(" ")[1]!;
    const shown = await cli(["machine", "trust", "trusty"]);
    assert.equal(shown.code, 0, shown.err);
    assert.ok(shown.out.includes(fingerprint), shown.out);
    assert.match(shown.out, new RegExp(`\\[127\\.0\\.0\\.1\\]:${sshd.port} \\(ED25519\\)`));
    assert.match(shown.out, /dsh-herdr machine trust trusty --yes/);
    assert.equal(readFileSync(kh, "utf8"), "", "nothing added without --yes");

    const yes = await cli(["machine", "trust", "trusty", "--yes"]);
    assert.equal(yes.code, 0, yes.err);
    assert.match(yes.out, new RegExp(`added \\d key\\(s\\) for \\[127\\.0\\.0\\.1\\]:${sshd.port} to ${kh}`));
    const hostPub = readFileSync(join(sshd.dir, "host_ed25519.pub"), "utf8").split(" ").slice(0, 2).join(" ");
    assert.ok(readFileSync(kh, "utf8").includes(`[127.0.0.1]:${sshd.port} ${hostPub}`));
    const text = readFileSync(kh, "utf8");
    const again = await cli(["machine", "trust", "trusty", "--yes"]);
    assert.match(again.out, /already in .*nothing to add/);
    assert.equal(readFileSync(kh, "utf8"), text, "no duplicate lines");
    const check = await cli(["machine", "check", "trusty", "--json"]);
    const link = (JSON.parse(check.out) as { checks: { name: string; level: string }[] }).checks.find(
      (c) => c.name === "link",
    );
    assert.equal(link?.level, "ok", check.out + check.err);

    // Another key on record for that host: refused, the file left as it is, the fix names ssh-keygen -R.
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", join(dir, "other_host_key")]);
    const other = readFileSync(join(dir, "other_host_key.pub"), "utf8").split(" ").slice(0, 2).join(" ");
    writeFileSync(kh, `[127.0.0.1]:${sshd.port} ${other}\n`);
    const changed = await cli(["machine", "trust", "trusty", "--yes"]);
    assert.equal(changed.code, 1);
    assert.match(
      changed.err,
      /BAD_STATE: the host key .* is not the one .* holds for it.*ssh-keygen -R '\[127\.0\.0\.1\]:\d+' -f /s,
    );
    assert.equal(readFileSync(kh, "utf8"), `[127.0.0.1]:${sshd.port} ${other}\n`);
    assert.equal((await cli(["machine", "remove", "trusty"])).code, 0);
  });

  test("machine check names what is missing there, each with its fix: dsh-herdr, pi, the default model", async () => {
    const kh = ["--known-hosts", sshd.knownHosts];
    assert.equal((await add("nocmd", [...kh, "--command", "no-such-dsh-herdr"])).code, 0);
    const missing = await cli(["machine", "check", "nocmd", "--json"]);
    assert.equal(missing.code, 1, missing.err);
    const m = JSON.parse(missing.out) as {
      ok: boolean;
      checks: { name: string; level: string; detail: string; fix?: string }[];
    };
    assert.equal(m.ok, false);
    assert.equal(m.checks[0]!.name, "dsh-herdr");
    assert.equal(m.checks[0]!.level, "fail");
    assert.match(m.checks[0]!.detail, /`no-such-dsh-herdr` is not found on nocmd .*not found/);
    assert.match(
      m.checks[0]!.fix!,
      /install dsh-herdr there .*docs\/remote\.md.*dsh-herdr machine set nocmd --command/,
    );

    // pi missing there (here: the machine's dsh-herdr told to use a pi that is not there).
    assert.equal(
      (await add("nopi", [...kh, "--command", `env DSH_HERDR_PI_BIN=/nonexistent/pi ${sshd.command}`])).code,
      0,
    );
    const nopi = await cli(["machine", "check", "nopi"]);
    assert.equal(nopi.code, 1);
    assert.match(nopi.out, /^OK\s+dsh-herdr\s+dsh-herdr \S+ \(`env DSH_HERDR_PI_BIN/m);
    assert.match(
      nopi.out,
      /^FAIL\s+pi\s+DSH_HERDR_PI_BIN=\/nonexistent\/pi .*fix: on nopi \(ssh [^)]+\): point DSH_HERDR_PI_BIN/m,
    );

    // A default model pi there has no credentials for.
    assert.equal((await add("builder", [...kh, "--command", sshd.command])).code, 0);
    sshd.runAs([...sshd.command.split(" "), "config", "set", "defaultModel", "anthropic/claude-sonnet-4-5"]);
    const nomodel = await cli(["machine", "check", "builder"]);
    assert.equal(nomodel.code, 1);
    assert.match(nomodel.out, /^OK\s+pi\s+pi \d+\.\d+\.\d+/m);
    assert.match(
      nomodel.out,
      /^FAIL\s+model\s+default model anthropic\/claude-sonnet-4-5 is not among the models pi has credentials for.*fix: on builder \(ssh /m,
    );
    sshd.runAs([...sshd.command.split(" "), "config", "unset", "defaultModel"]);
    const good = await cli(["machine", "check", "builder", "--json"]);
    const g = JSON.parse(good.out) as { checks: { name: string; level: string }[] };
    for (const name of ["dsh-herdr", "link", "pi", "model"])
      assert.equal(g.checks.find((c) => c.name === name)?.level, "ok", `${name}: ${good.out}`);
    assert.equal((await cli(["machine", "remove", "nopi"])).code, 0);
  });

  test("a remote spawn without --cwd is refused by name (the local path means nothing there)", async () => {
    const r = await cli(["spawn", "--machine", "builder", "--prompt", "MARK-ONBOARD x"]);
    assert.equal(r.code, 2, r.err);
    assert.match(
      r.err,
      /BAD_PARAMS: --machine builder runs the task on that machine: give --cwd, the path of the repository there/,
    );
    assert.equal((await cli(["list", "--all", "--json"])).out.includes("MARK-ONBOARD"), false);
  });

  test("machine set: the running daemon takes a new command without a restart", async () => {
    // The daemon runs, and its link to nocmd fails: the command is not there.
    const first = await cli([
      "spawn",
      "--machine",
      "nocmd",
      "--cwd",
      remoteRepo,
      "--runtime",
      "headless",
      "--prompt",
      "MARK-ONBOARD x",
    ]);
    assert.equal(first.code, 1);
    assert.match(first.err, /MACHINE_UNREACHABLE: .*no-such-dsh-herdr.*not found/);
    const pid = (JSON.parse((await cli(["daemon", "status", "--json"])).out) as { pid: number }).pid;
    const set = await cli(["machine", "set", "nocmd", "--command", sshd.command]);
    assert.equal(set.code, 0, set.err);
    assert.match(set.out, /^changed machine nocmd /);
    assert.match(set.err, /the running daemon took it: its link to nocmd is made again/);
    const cfg = JSON.parse(readFileSync(join(dir, "dsh", "config.json"), "utf8")) as {
      machines: Record<string, { command?: string }>;
    };
    assert.equal(cfg.machines["nocmd"]?.command, sshd.command);
    const spawned = await cli([
      "spawn",
      "--machine",
      "nocmd",
      "--cwd",
      remoteRepo,
      "--model",
      "scripted/scripted-model",
      "--runtime",
      "headless",
      "--brief",
      "onboard",
      "--prompt",
      "MARK-ONBOARD add the feature",
      "--wait",
      "--json",
    ]);
    assert.equal(spawned.code, 0, spawned.err);
    remoteTask = (JSON.parse(spawned.out) as { results: AgentResult[] }).results[0]!;
    assert.equal(remoteTask.status, "completed", spawned.out);
    assert.equal(remoteTask.agent.machine, "nocmd");
    assert.equal(
      (JSON.parse((await cli(["daemon", "status", "--json"])).out) as { pid: number }).pid,
      pid,
      "no restart",
    );
    const bad = await cli(["machine", "set", "nocmd", "--port", "99999"]);
    assert.equal(bad.code, 2);
    assert.equal((await cli(["machine", "set", "nocmd"])).code, 2, "nothing to change is a usage error");
  });

  test("a remote task is found by its agent name and the suffix in it; logs prints readable text, --raw the rpc events", async () => {
    const name = remoteTask.agent.name;
    const tail = name.slice(-4);
    assert.ok(!remoteTask.taskId.endsWith(tail), "the name ends with the id there, not the local id");
    for (const typed of [tail, name]) {
      const r = await cli(["show", typed, "--json"]);
      assert.equal(r.code, 0, `${typed}: ${r.err}`);
      assert.equal((JSON.parse(r.out) as AgentResult).taskId, remoteTask.taskId);
    }
    const logs = await cli(["logs", tail]);
    assert.equal(logs.code, 0, logs.err);
    assert.match(logs.out, /^› # Task /m);
    assert.match(logs.out, /^Writing the feature file now\.$/m);
    assert.match(logs.out, /^→ write feature\.txt$/m);
    assert.match(logs.out, /^ {2}✓ write$/m);
    assert.match(logs.out, /^→ crew_report \{"outcome":"completed","report":"Added feature\.txt"\}$/m);
    assert.doesNotMatch(logs.out, /"type":/, "no raw events");
    const raw = await cli(["logs", tail, "--raw", "-n", "500"]);
    assert.equal(raw.code, 0, raw.err);
    const events = raw.out
      .trim()
      .split("\n")
      .map((l) => (JSON.parse(l) as { type: string }).type);
    assert.ok(events.includes("message_update") && events.includes("tool_execution_end"), events.join(" "));

    // A local headless task reads the same way.
    const local = await cli([
      "spawn",
      "--cwd",
      localRepo,
      "--model",
      "scripted/scripted-model",
      "--runtime",
      "headless",
      "--prompt",
      "MARK-ONBOARD here",
      "--wait",
      "--json",
    ]);
    assert.equal(local.code, 0, local.err);
    const id = (JSON.parse(local.out) as { results: AgentResult[] }).results[0]!.taskId;
    const ll = await cli(["logs", id]);
    assert.match(ll.out, /^→ write feature\.txt$/m);
    assert.doesNotMatch(ll.out, /"type":/);
    const lj = JSON.parse((await cli(["logs", id, "--json"])).out) as { runtime: string; output: string };
    assert.equal(lj.runtime, "headless");
    assert.match(lj.output, /^Writing the feature file now\.$/m);
  });

  test("git refusing a repository another user owns is named: dubious ownership, with the safe.directory fix", async () => {
    // Several times: the task fails at once there, and `spawn --wait` must find its result here right away (the
    // relay used to answer before it had recorded a result settled there, and the wait said TASK_NOT_FOUND).
    for (let i = 0; i < 4; i++) {
      const r = await cli([
        "spawn",
        "--machine",
        "nocmd",
        "--cwd",
        rootRepo,
        "--isolated",
        "--model",
        "scripted/scripted-model",
        "--runtime",
        "headless",
        "--prompt",
        "MARK-ONBOARD x",
        "--wait",
        "--json",
      ]);
      assert.notEqual(r.out.trim(), "", `spawn printed nothing (exit ${r.code}): ${r.err}`);
      const res = (JSON.parse(r.out) as { results: AgentResult[] }).results[0]!;
      assert.equal(res.status, "failed", r.out);
      assert.equal(res.error?.code, "GIT_FAILED");
      assert.match(
        res.error!.message,
        new RegExp(`git refuses the repository ${rootRepo}: "detected dubious ownership"`),
      );
      assert.match(res.error!.message, new RegExp(`git config --global --add safe\\.directory ${rootRepo}`));
      assert.doesNotMatch(res.error!.message, /no commits yet/);
    }
  });
});
