// Everyday use through the real bin/dsh-herdr (headless runtime, real pi, the scripted model): ids by suffix and
// agent name, the CLI's own words for usage errors, colour and width, completion scripts run by real shells, the
// readable daemon log, the systemd unit (and `daemon run` under its environment), and `list` without a daemon.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execa } from "execa";
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import stringWidth from "string-width";
import type { AgentResult } from "../../src/core/types.js";
import { waitFor } from "../helpers/tmux.js";
import { bin, startCliHarness, type CliHarness } from "./cli-harness.js";

const script = {
  conversations: [
    {
      name: "a",
      match: "[t-a]",
      steps: [{ toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "A-DONE" } }] }],
    },
    {
      name: "b",
      match: "[t-b]",
      steps: [{ toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "B-DONE" } }] }],
    },
  ],
};

const BRIEF_A = "重试与抖动 retry";
const BRIEF_B = "emoji 🚀 brief";

let h: CliHarness;
let a: AgentResult;
let b: AgentResult;
/** The shortest suffix that tells a from b (4 characters unless the two ids share their last 4). */
let suffixA = "";

const ansi = /\x1b\[[0-9;]*m/;

async function which(cmd: string): Promise<boolean> {
  return (await execa("sh", ["-c", `command -v ${cmd}`], { reject: false })).exitCode === 0;
}

before(async () => {
  h = await startCliHarness(script);
  const ids: string[] = [];
  for (const [brief, tag] of [
    [BRIEF_A, "[t-a]"],
    [BRIEF_B, "[t-b]"],
  ] as const) {
    const s = await h.cli(["spawn", "--brief", brief, "--prompt", `${tag} report`]);
    assert.equal(s.code, 0, s.err);
    ids.push(s.out.trim());
  }
  const w = await h.cli(["wait", ...ids, "--timeout", "90s", "--json"]);
  assert.equal(w.code, 0, w.err);
  [a, b] = (JSON.parse(w.out) as { results: AgentResult[] }).results as [AgentResult, AgentResult];
  let n = 4;
  while (a.taskId.slice(-n) === b.taskId.slice(-n)) n++;
  suffixA = a.taskId.slice(-n);
});

after(async () => {
  await h?.close();
});

test("ids: a unique suffix and the agent name work wherever an id does; an ambiguous one lists candidates with briefs", async () => {
  const bySuffix = await h.cli(["show", suffixA]);
  assert.equal(bySuffix.code, 0, bySuffix.err);
  assert.match(bySuffix.out, new RegExp(`task ${a.taskId}`));
  const byName = await h.cli(["result", a.agent.name]);
  assert.equal(byName.code, 0, byName.err);
  assert.equal((JSON.parse(byName.out) as AgentResult).taskId, a.taskId);
  assert.ok(a.agent.name.endsWith(a.taskId.slice(-4)), a.agent.name);
  const waited = await h.cli(["wait", suffixA, "--json", "--timeout", "30s"]);
  assert.equal(waited.code, 0, waited.err);
  // Both ids start with the same time prefix: typing only that is ambiguous, and the message shows both briefs.
  let common = 1;
  while (a.taskId[common] === b.taskId[common]) common++;
  const amb = await h.cli(["show", a.taskId.slice(0, common)]);
  assert.equal(amb.code, 2, "an ambiguous id is a usage error");
  assert.match(amb.err, /BAD_TASK_ID: .* matches 2 tasks/);
  assert.match(amb.err, new RegExp(`${a.taskId}\\s+${a.agent.name}\\s+${BRIEF_A}`));
  assert.match(amb.err, new RegExp(`${b.taskId}\\s+${b.agent.name}\\s+emoji 🚀 brief`));
  const none = await h.cli(["show", "zzzz"]);
  assert.equal(none.code, 1);
  assert.match(none.err, /TASK_NOT_FOUND/);
});

test("usage errors: JSON on stderr with --json, exit 2 for bad flag values, messages name the CLI's flags", async () => {
  const unknown = await h.cli(["bogus", "--json"]);
  assert.equal(unknown.code, 2);
  assert.equal(unknown.out, "");
  assert.match(
    (JSON.parse(unknown.err) as { error: { code: string; message: string } }).error.message,
    /unknown command 'bogus'/,
  );
  const badFlag = await h.cli(["list", "--nope", "--json"]);
  assert.equal(badFlag.code, 2);
  assert.match((JSON.parse(badFlag.err) as { error: { message: string } }).error.message, /unknown option '--nope'/);

  const cwd = await h.cli(["spawn", "--cwd", "/nowhere", "--prompt", "x", "--json"]);
  assert.equal(cwd.code, 2, cwd.err);
  assert.match(
    (JSON.parse(cwd.err) as { error: { message: string } }).error.message,
    /^--cwd \/nowhere: no such directory/,
  );
  const timeout = await h.cli(["spawn", "--timeout", "10ms", "--prompt", "x"]);
  assert.equal(timeout.code, 2);
  assert.match(timeout.err, /--timeout 10ms/);
  assert.doesNotMatch(timeout.err, /timeoutMs|task\.spawn/);
  const cfg = await h.cli(["config", "set", "maxParallelAgents", "lots"]);
  assert.equal(cfg.code, 2);
  assert.match(cfg.err, /CONFIG_INVALID: .*maxParallelAgents/);

  // A home whose path runs through a file: HOME_UNWRITABLE naming the path, never INTERNAL.
  writeFileSync(join(h.dir, "a-file"), "");
  const bad = await execa(process.execPath, [bin, "config", "set", "maxParallelAgents", "2", "--json"], {
    env: { ...h.env, DSH_HERDR_HOME: join(h.dir, "a-file", "home") },
    reject: false,
    stdin: "ignore",
  });
  assert.equal(bad.exitCode, 1);
  const err = (JSON.parse(String(bad.stderr)) as { error: { code: string; message: string } }).error;
  assert.equal(err.code, "HOME_UNWRITABLE");
  assert.ok(err.message.includes(join(h.dir, "a-file", "home")), err.message);
});

test("list: statuses coloured only with FORCE_COLOR (not on a pipe, never with NO_COLOR); wide briefs line up", async () => {
  const plain = await h.cli(["list"]);
  assert.equal(plain.code, 0, plain.err);
  assert.doesNotMatch(plain.out, ansi);
  const lines = plain.out.trimEnd().split("\n");
  const cwdAt = (l: string) => stringWidth(l.slice(0, l.indexOf(h.repo.replace(process.env.HOME ?? "\0", "~"))));
  const rows = lines.filter((l) => l.includes(a.taskId) || l.includes(b.taskId));
  assert.equal(rows.length, 2, plain.out);
  assert.ok(rows[0]!.includes("重试与抖动") || rows[1]!.includes("重试与抖动"), plain.out);
  assert.equal(cwdAt(rows[0]!), cwdAt(rows[1]!), `the CWD column lines up after CJK and emoji briefs:\n${plain.out}`);

  const forced = await execa(process.execPath, [bin, "list"], {
    env: { ...h.env, FORCE_COLOR: "1" },
    cwd: h.repo,
    stdin: "ignore",
  });
  assert.match(String(forced.stdout), /\x1b\[32mcompleted\x1b\[39m/);
  const no = await execa(process.execPath, [bin, "list"], {
    env: { ...h.env, FORCE_COLOR: "1", NO_COLOR: "1" },
    cwd: h.repo,
    stdin: "ignore",
  });
  assert.doesNotMatch(String(no.stdout), ansi);
  const card = await execa(process.execPath, [bin, "show", a.taskId], {
    env: { ...h.env, FORCE_COLOR: "1" },
    cwd: h.repo,
    stdin: "ignore",
  });
  assert.match(String(card.stdout), /→ \x1b\[32mcompleted/);
});

test("completion: bash, zsh and fish scripts complete commands, flags, choices and open task id suffixes", async () => {
  const pathDir = join(h.dir, "bin");
  mkdirSync(pathDir, { recursive: true });
  if (!existsSync(join(pathDir, "dsh-herdr"))) symlinkSync(bin, join(pathDir, "dsh-herdr"));
  const env = { ...h.env, PATH: `${pathDir}:${process.env.PATH ?? ""}` };
  const ids = await execa(process.execPath, [bin, "__complete", "ids"], { env, stdin: "ignore" });
  assert.ok(
    String(ids.stdout).split("\n").includes(a.taskId.slice(-4)) || a.taskId.slice(-4) === b.taskId.slice(-4),
    String(ids.stdout),
  );

  const bashScript = join(h.dir, "c.bash");
  writeFileSync(
    bashScript,
    String((await execa(process.execPath, [bin, "completion", "bash"], { env, stdin: "ignore" })).stdout),
  );
  const complete = async (line: string): Promise<string[]> => {
    const r = await execa(
      "bash",
      [
        "-c",
        `source ${bashScript}; read -ra COMP_WORDS <<< "$1"; [[ "$1" == *" " ]] && COMP_WORDS+=(""); COMP_CWORD=$((\${#COMP_WORDS[@]}-1)); _dsh_herdr; printf '%s\\n' "\${COMPREPLY[@]}"`,
        "_",
        line,
      ],
      { env, stdin: "ignore" },
    );
    return String(r.stdout).split("\n").filter(Boolean);
  };
  assert.deepEqual(await complete("dsh-herdr sp"), ["spawn"]);
  assert.deepEqual(await complete("dsh-herdr daemon ins"), ["install-unit"]);
  assert.deepEqual(await complete("dsh-herdr spawn --runtime h"), ["herdr", "headless"]);
  assert.ok((await complete("dsh-herdr list --")).includes("--status"));
  const showIds = await complete("dsh-herdr show ");
  assert.ok(showIds.includes(a.taskId) && showIds.includes(b.taskId), showIds.join(" "));

  if (await which("zsh")) {
    const z = await execa(
      "zsh",
      [
        "-c",
        `compadd() { shift; print -rl -- "$@"; }; source <(dsh-herdr completion zsh); words=(dsh-herdr daemon ""); CURRENT=3; _dsh_herdr; words=(dsh-herdr show ""); CURRENT=3; _dsh_herdr`,
      ],
      { env, stdin: "ignore" },
    );
    const out = String(z.stdout).split("\n");
    assert.ok(out.includes("install-unit") && out.includes("log") && out.includes(a.taskId), String(z.stdout));
  }
  if (await which("fish")) {
    const f = await execa(
      "fish",
      ["-c", "dsh-herdr completion fish | source; complete -C 'dsh-herdr daemon '; complete -C 'dsh-herdr close '"],
      { env, stdin: "ignore" },
    );
    assert.match(String(f.stdout), /^install-unit\t/m);
    assert.match(String(f.stdout), new RegExp(`^${b.taskId}$`, "m"));
  }
});

test("daemon log: readable lines, --level filters, --task narrows to one task, -f follows new lines", async () => {
  const all = await h.cli(["daemon", "log"]);
  assert.equal(all.code, 0, all.err);
  assert.match(all.out, /^\d\d:\d\d:\d\d\.\d{3} INFO {2}daemon started home=\S+/m);
  assert.doesNotMatch(all.out, /^\{"level"/m, "pino JSON is formatted, not printed raw");
  const warn = await h.cli(["daemon", "log", "--level", "warn"]);
  assert.equal(warn.code, 0, warn.err);
  assert.doesNotMatch(warn.out, /daemon started/);
  const json = await h.cli(["daemon", "log", "--json", "-n", "1"]);
  assert.equal(typeof (JSON.parse(json.out) as { level: number }).level, "number");
  const bad = await h.cli(["daemon", "log", "--level", "loud"]);
  assert.equal(bad.code, 2);
  assert.match(bad.err, /--level loud/);
  // A task that cannot start (no Herdr server here) gets a warning line naming it.
  const c = (await h.cli(["spawn", "--runtime", "herdr", "--brief", "no herdr", "--prompt", "[t-a] x"])).out.trim();
  await h.cli(["wait", c, "--timeout", "60s"]);
  const task = await waitFor(
    "a log line about the failed task",
    async () => {
      const t = await h.cli(["daemon", "log", "--task", c.slice(-5)]);
      return t.code === 0 && t.out.trim() !== "" ? t : undefined;
    },
    20_000,
    200,
  );
  const taskLines = task.out.trimEnd().split("\n");
  for (const l of taskLines) assert.ok(l.includes(c), l);
  assert.ok(!task.out.includes(a.taskId) && !task.out.includes(b.taskId));
  const warnNow = await h.cli(["daemon", "log", "--level", "warn"]);
  assert.match(warnNow.out, new RegExp(`^\\S+ (WARN|ERROR) .*${c}`, "m"));

  const follow = execa(process.execPath, [bin, "daemon", "log", "-f", "-n", "0"], {
    env: h.env,
    reject: false,
    stdin: "ignore",
  });
  let seen = "";
  follow.stdout?.on("data", (d: Buffer) => (seen += d.toString()));
  try {
    // A new line after -f started: the daemon logs its stop.
    await new Promise((r) => setTimeout(r, 500));
    assert.equal((await h.cli(["daemon", "stop"])).code, 0);
    await waitFor("-f printed the stop", async () => /INFO {2}daemon stop/.test(seen), 20_000, 100);
  } finally {
    follow.kill("SIGINT");
  }
  assert.equal((await follow).exitCode, 0);
});

test("list without a daemon reads the task index", async () => {
  await h.cli(["daemon", "stop"]);
  const r = await h.cli(["list", "--json"]);
  assert.equal(r.code, 0, r.err);
  const j = JSON.parse(r.out) as { tasks: AgentResult[]; offline?: boolean };
  assert.equal(j.offline, true);
  const byId = new Map(j.tasks.map((t) => [t.taskId, t]));
  assert.equal(byId.get(a.taskId)?.status, "completed");
  assert.equal(byId.get(b.taskId)?.status, "completed");
  assert.equal(byId.get(a.taskId)?.brief, BRIEF_A);
  const human = await h.cli(["list"]);
  assert.equal(human.code, 0, human.err);
  assert.match(human.err, /daemon not running: listed from the task index/);
  assert.match(human.out, new RegExp(b.taskId));
  const status = await h.cli(["daemon", "status"]);
  assert.equal(status.code, 1, "the list did not start a daemon");
});

test("daemon install-unit: a valid systemd user unit whose daemon run serves and stops on SIGTERM; the log is size-capped", async () => {
  const cfg = join(h.dir, "xdg");
  const unitHome = join(h.dir, "unit-home");
  const env = { ...h.env, XDG_CONFIG_HOME: cfg, DSH_HERDR_HOME: unitHome };
  const r = await execa(process.execPath, [bin, "daemon", "install-unit"], { env, reject: false, stdin: "ignore" });
  assert.equal(r.exitCode, 0, String(r.stderr));
  assert.match(String(r.stdout), /systemctl --user daemon-reload && systemctl --user enable --now dsh-herdr\.service/);
  const file = join(cfg, "systemd", "user", "dsh-herdr.service");
  const unit = readFileSync(file, "utf8");
  assert.match(unit, /^WantedBy=default\.target$/m);
  assert.match(unit, /^KillMode=process$/m);
  // The daemon's environment: a UTF-8 LANG, the pi dir of this shell, then <home>/env (optional: "-").
  assert.match(unit, new RegExp(`^EnvironmentFile=-${join(unitHome, "env")}$`, "m"));
  assert.match(unit, /^Environment=LANG=\S+\.UTF-8$/m);
  assert.match(unit, new RegExp(`^Environment=PI_CODING_AGENT_DIR=${h.env["PI_CODING_AGENT_DIR"]}$`, "m"));
  if (await which("systemd-analyze")) {
    const v = await execa("systemd-analyze", ["verify", file], { reject: false, stdin: "ignore" });
    assert.equal(v.exitCode, 0, `systemd-analyze verify: ${String(v.stderr)}`);
  }
  const again = await execa(process.execPath, [bin, "daemon", "install-unit"], { env, reject: false, stdin: "ignore" });
  assert.equal(again.exitCode, 0, "the same unit again is fine");

  // Run ExecStart with exactly the unit's environment (as systemd would, plus HOME and the test's pi settings).
  const exec = /^ExecStart=(.*)$/m.exec(unit)![1]!.split(" ");
  const unitEnv = Object.fromEntries([...unit.matchAll(/^Environment=(\w+)=(.*)$/gm)].map((m) => [m[1]!, m[2]!]));
  assert.equal(unitEnv["DSH_HERDR_HOME"], unitHome);
  // A log past the cap: the first line the daemon writes moves it to daemon.log.1.
  mkdirSync(unitHome, { recursive: true, mode: 0o700 });
  writeFileSync(join(unitHome, "daemon.log"), "OLD-LOG-LINE\n".repeat(500), { mode: 0o600 });
  const runEnv = {
    ...unitEnv,
    HOME: h.env["HOME"] ?? "",
    PI_CODING_AGENT_DIR: h.env["PI_CODING_AGENT_DIR"] ?? "",
    DSH_HERDR_LOG_MAX_BYTES: "4096",
    // The test run's marker (scripts/leftovers.mjs), so the run's sweep still counts what this daemon starts.
    ...(process.env["DSH_HERDR_TEST_RUN"] ? { DSH_HERDR_TEST_RUN: process.env["DSH_HERDR_TEST_RUN"] } : {}),
  };
  // A variable only <home>/env has: `daemon run` reads it at start (as systemd's EnvironmentFile= would give it).
  const set = await execa(process.execPath, [bin, "daemon", "env", "set", "DSH_UNIT_PROBE=from the env file"], {
    env,
    reject: false,
    stdin: "ignore",
  });
  assert.equal(set.exitCode, 0, String(set.stderr));
  const daemon = execa(exec[0]!, exec.slice(1), { env: runEnv, extendEnv: false, reject: false, stdin: "ignore" });
  let served: { stdout: unknown };
  try {
    served = await waitFor(
      "the unit's daemon serves",
      async () => {
        const s = await execa(process.execPath, [bin, "daemon", "status", "--json"], {
          env: { ...h.env, DSH_HERDR_HOME: unitHome },
          reject: false,
          stdin: "ignore",
        });
        return s.exitCode === 0 ? s : undefined;
      },
      30_000,
      200,
    );
  } catch (e) {
    daemon.kill("SIGKILL");
    throw e;
  }
  const facts = (JSON.parse(String(served.stdout)) as { env: { names: string[]; envFile: { keys: string[] } } }).env;
  assert.ok(facts.names.includes("DSH_UNIT_PROBE"), "the daemon read <home>/env");
  assert.deepEqual(facts.envFile.keys, ["DSH_UNIT_PROBE"]);
  daemon.kill("SIGTERM");
  const done = await daemon;
  assert.equal(done.exitCode, 0, String(done.stderr));
  const after = await execa(process.execPath, [bin, "daemon", "status"], {
    env: { ...h.env, DSH_HERDR_HOME: unitHome },
    reject: false,
    stdin: "ignore",
  });
  assert.equal(after.exitCode, 1, "stopped on SIGTERM");
  assert.match(readFileSync(join(unitHome, "daemon.log.1"), "utf8"), /OLD-LOG-LINE/);
  const log = readFileSync(join(unitHome, "daemon.log"), "utf8");
  assert.doesNotMatch(log, /OLD-LOG-LINE/);
  assert.match(log, /"msg":"daemon stopped"/);
});
