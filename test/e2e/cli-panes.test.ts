// logs (human, --json, -f), open (tmux, Herdr) and the wait spinner through the real bin/dsh-herdr against a real
// daemon: a tmux-runtime daemon for logs/open, a private tmux server as the terminal for the spinner, and a daemon
// on fixtures/fake-herdr for Herdr's open (every message checked against Herdr's schema).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execa, type ResultPromise } from "execa";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeHerdr, type FakeHerdr } from "../../fixtures/fake-herdr/server.js";
import type { RuntimeHandle } from "../../src/runtime/types.js";
import { herdrSchemaErrors, schemaFor } from "../helpers/herdr-schema.js";
import { piBin } from "../helpers/pi.js";
import { privateTmux, tmuxInstalled, waitFor, type PrivateTmux } from "../helpers/tmux.js";
import { bin, startCliHarness, type CliHarness } from "./cli-harness.js";

const SPINNER = /[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]/;

const script = {
  conversations: [
    {
      name: "pane",
      match: "[t-pane]",
      steps: [
        {
          text: "STEP-ONE-MARK working on it",
          toolCalls: [{ name: "write", arguments: { path: "a.txt", content: "a\n" } }],
          delayMs: 300,
        },
        // Long enough for `logs -f` to start and print the screen before this step lands.
        {
          text: "STEP-TWO-MARK almost there",
          toolCalls: [{ name: "write", arguments: { path: "b.txt", content: "b\n" } }],
          delayMs: 6000,
        },
        {
          toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "two files (PANE-DONE)" } }],
          delayMs: 1500,
        },
      ],
    },
    {
      name: "spin",
      match: "[t-spin]",
      steps: [
        {
          toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "spun (SPIN-DONE)" } }],
          delayMs: 5000,
        },
      ],
    },
    { name: "slow", match: "[t-slow]", steps: [{ text: "thinking slowly", delayMs: 60_000 }] },
  ],
};

function handleOf(h: CliHarness, id: string): RuntimeHandle | undefined {
  const file = join(h.home, "tasks", id, "task.json");
  return existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as { handle?: RuntimeHandle }).handle : undefined;
}

function count(text: string, needle: string): number {
  return text.split(needle).length - 1;
}

/** A shell in the tmux pane runs wait and then shows its exit code; its Ctrl+C trap lets it outlive a Ctrl+C to node. */
function waitCommand(id: string): string {
  return `trap : INT; '${process.execPath}' '${bin}' wait ${id}; echo "EXIT=$?"; sleep 600`;
}

async function spawn(h: CliHarness, prompt: string): Promise<string> {
  const s = await h.cli(["spawn", "--prompt", prompt]);
  assert.equal(s.code, 0, s.err);
  return s.out.trim();
}

describe("tmux runtime", () => {
  let h: CliHarness;
  let tmux: PrivateTmux;
  let pane = "";

  before(async () => {
    assert.ok(await tmuxInstalled(), "tmux is required (the CI installs it)");
    h = await startCliHarness(script, "tmux");
    const s = await h.cli(["daemon", "start"]);
    assert.equal(s.code, 0, s.err);
    tmux = privateTmux("dsh-panes");
  });

  after(async () => {
    await tmux?.kill();
    await h?.close();
  });

  test("logs: the child's screen, unpadded; -f prints the next step once and stops on Ctrl+C with 0; --json", async () => {
    pane = await spawn(h, "[t-pane] write two files");
    await waitFor("the child's launch", async () => handleOf(h, pane), 60_000, 200);
    const first = await waitFor(
      "the first step on the child's screen",
      async () => {
        const l = await h.cli(["logs", pane]);
        assert.equal(l.code, 0, l.err);
        return l.out.includes("STEP-ONE-MARK") ? l : undefined;
      },
      90_000,
      300,
    );
    assert.equal(first.err, "");
    assert.match(first.out, /^ \[t-pane\] write two files$/m, "pi's own screen, with the task");
    assert.match(first.out, new RegExp(`^ Task ${pane}$`, "m"));
    assert.ok(first.out.endsWith("\n"));
    assert.ok(
      first.out.split("\n").every((l) => !l.endsWith(" ")),
      "pi pads lines to the pane width; logs does not",
    );

    const follow: ResultPromise = execa(process.execPath, [bin, "logs", pane, "-f"], {
      env: h.env,
      cwd: h.repo,
      reject: false,
      stdin: "ignore",
      timeout: 120_000,
    });
    let out = "";
    follow.stdout?.on("data", (d: Buffer) => (out += d.toString()));
    await waitFor("logs -f to print the screen", async () => out.includes("STEP-ONE-MARK"), 20_000);
    assert.ok(!out.includes("STEP-TWO-MARK"), "the second step had not landed when -f started");
    await waitFor("logs -f to print the second step", async () => out.includes("STEP-TWO-MARK"), 60_000);
    const w = await h.cli(["wait", pane, "--timeout", "60s", "--json"]);
    assert.equal(w.code, 0, w.err);
    await waitFor("logs -f to print the report call", async () => out.includes("crew_report"), 20_000);
    // pi stays alive (interactive) and keeps redrawing its footer; a few more polls must not reprint the screen.
    await new Promise((r) => setTimeout(r, 2000));
    assert.equal(count(out, "STEP-ONE-MARK"), 1, out);
    assert.equal(count(out, "STEP-TWO-MARK"), 1, out);
    assert.equal(count(out, `Task ${pane}`), 1, out);
    assert.ok(count(out, "Working...") <= 3, `pi's spinner line is not printed on every poll:\n${out}`);

    follow.kill("SIGINT");
    const done = await Promise.race([follow, new Promise<undefined>((r) => setTimeout(r, 10_000, undefined))]);
    assert.ok(done, "logs -f exits promptly on Ctrl+C although the child is still alive");
    assert.equal(done.exitCode, 0, String(done.stderr));
    assert.equal(String(done.stderr), "");

    const j = await h.cli(["logs", pane, "--json"]);
    assert.equal(j.code, 0, j.err);
    const body = JSON.parse(j.out) as { taskId: string; runtime: string; output: string };
    assert.equal(body.taskId, pane);
    assert.equal(body.runtime, "tmux");
    assert.match(body.output, /STEP-TWO-MARK/);
    const human = await h.cli(["logs", pane, "-n", "5"]);
    assert.equal(human.out.trimEnd().split("\n").length, 5, "-n bounds the lines");
    const bad = await h.cli(["logs", pane, "-n", "0"]);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /BAD_PARAMS: --lines 0: give a positive number/);
  });

  test("open without a terminal prints the attach command; its target is the child's window on that server", async () => {
    assert.ok(pane, "needs the task of the logs test");
    const handle = handleOf(h, pane);
    assert.ok(handle?.tmuxPaneId && handle.tmuxSocket, JSON.stringify(handle));
    const o = await h.cli(["open", pane]);
    assert.equal(o.code, 0, o.err);
    assert.equal(o.err, "");
    const m = /^tmux -L (\S+) attach-session -t (\S+)\n$/.exec(o.out);
    assert.ok(m, o.out);
    const [, sock, target] = m as unknown as [string, string, string];
    assert.equal(sock, handle.tmuxSocket);
    const j = await h.cli(["open", pane.slice(0, 6), "--json"]);
    assert.equal(j.code, 0, j.err);
    assert.deepEqual(JSON.parse(j.out), {
      taskId: pane,
      runtime: "tmux",
      command: ["tmux", "-L", sock, "attach-session", "-t", target],
    });

    const panes = await execa("tmux", ["-L", sock, "list-panes", "-t", target, "-F", "#{pane_id}"], {
      env: { TMUX: undefined },
    });
    assert.deepEqual(
      String(panes.stdout).split("\n"),
      [handle.tmuxPaneId],
      "the target window holds exactly the child's pane",
    );
    const screen = await execa("tmux", ["-L", sock, "capture-pane", "-p", "-t", target], { env: { TMUX: undefined } });
    assert.match(String(screen.stdout), new RegExp(`Task ${pane}`));
  });

  test("logs of a task whose pane is gone says so and exits 1 (not an empty screen and 0)", async () => {
    assert.ok(pane, "needs the task of the logs test");
    const handle = handleOf(h, pane);
    assert.ok(handle?.tmuxPaneId && handle.tmuxSocket, JSON.stringify(handle));
    await execa("tmux", ["-L", handle.tmuxSocket, "kill-pane", "-t", handle.tmuxPaneId], { env: { TMUX: undefined } });
    const l = await h.cli(["logs", pane]);
    assert.equal(l.code, 1, l.out);
    assert.equal(l.out, "");
    assert.match(l.err, new RegExp(`^dsh-herdr: BAD_STATE: task ${pane}'s tmux pane is gone.*dsh-herdr show ${pane}`));
  });

  test("wait on a terminal: a spinner while the child works, then the card and no spinner left", async () => {
    const id = await spawn(h, "[t-spin] spin a while");
    const envArgs = Object.entries(h.env).flatMap(([k, v]) => ["-e", `${k}=${v}`]);
    const cmd = waitCommand(id);
    await tmux.run([
      "new-session",
      "-d",
      "-s",
      "wait",
      "-x",
      "150",
      "-y",
      "40",
      "-c",
      h.repo,
      ...envArgs,
      "sh",
      "-c",
      cmd,
    ]);
    const spinning = await waitFor(
      "a spinner frame",
      async () => {
        const s = await screen("wait");
        return /^[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] waiting for 1 task\(s\) \d+(ms|s)\b/m.test(s) ? s : undefined;
      },
      30_000,
    );
    assert.doesNotMatch(spinning, /SPIN-DONE/, "seen while the child still works");
    const end = await waitFor(
      "wait to exit",
      async () => {
        const s = await screen("wait");
        return s.includes("EXIT=") ? s : undefined;
      },
      90_000,
    );
    assert.match(end, /^EXIT=0$/m);
    assert.match(end, /→ completed$/m);
    assert.match(end, /SPIN-DONE/);
    assert.doesNotMatch(end, SPINNER, "the spinner line was erased");
  });

  test("wait on a terminal stops on the first Ctrl+C (exit 130), erases the spinner, and the task keeps running", async () => {
    const id = await spawn(h, "[t-slow] take your time");
    const envArgs = Object.entries(h.env).flatMap(([k, v]) => ["-e", `${k}=${v}`]);
    const cmd = waitCommand(id);
    await tmux.run([
      "new-session",
      "-d",
      "-s",
      "stop",
      "-x",
      "150",
      "-y",
      "20",
      "-c",
      h.repo,
      ...envArgs,
      "sh",
      "-c",
      cmd,
    ]);
    await waitFor("a spinner frame", async () => SPINNER.test(await screen("stop")), 30_000);
    await tmux.run(["send-keys", "-t", "stop", "C-c"]);
    const end = await waitFor(
      "wait to exit",
      async () => {
        const s = await screen("stop");
        return s.includes("EXIT=") ? s : undefined;
      },
      15_000,
    ).catch(async (e: Error) => assert.fail(`${e.message}; screen:\n${await screen("stop").catch(() => "(gone)")}`));
    assert.match(end, /^EXIT=130$/m);
    assert.match(end, new RegExp(`stopped waiting; the tasks keep running \\(dsh-herdr wait ${id}\\)`));
    assert.doesNotMatch(end, SPINNER);
    const show = await h.cli(["list", "--json"]);
    const row = (JSON.parse(show.out) as { tasks: { taskId: string; status: string }[] }).tasks.find(
      (t) => t.taskId === id,
    );
    assert.ok(row && ["starting", "working", "running"].includes(row.status), JSON.stringify(row));
    assert.equal((await h.cli(["abort", id])).code, 0);
  });

  test("wait on a terminal with stderr to a file: the card on the screen, no spinner frame in the file", async () => {
    const id = await spawn(h, "[t-spin] spin into a log");
    const envArgs = Object.entries(h.env).flatMap(([k, v]) => ["-e", `${k}=${v}`]);
    const log = join(h.dir, "wait-stderr.log");
    const cmd = waitCommand(id).replace(` wait ${id};`, ` wait ${id} 2>'${log}';`);
    await tmux.run([
      "new-session",
      "-d",
      "-s",
      "errlog",
      "-x",
      "150",
      "-y",
      "40",
      "-c",
      h.repo,
      ...envArgs,
      "sh",
      "-c",
      cmd,
    ]);
    const end = await waitFor(
      "wait to exit",
      async () => {
        const s = await screen("errlog");
        return s.includes("EXIT=") ? s : undefined;
      },
      90_000,
    );
    assert.match(end, /^EXIT=0$/m);
    assert.match(end, /SPIN-DONE/);
    const err = readFileSync(log, "utf8");
    assert.doesNotMatch(err, SPINNER);
    assert.ok(!err.includes("\r") && !err.includes("\x1b"), JSON.stringify(err));
  });

  test("wait piped (not a terminal): the card on stdout, no spinner frame, carriage return or escape anywhere", async () => {
    const id = await spawn(h, "[t-spin] spin again");
    const r = await h.cli(["wait", id, "--timeout", "90s"]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /→ completed$/m);
    assert.match(r.out, /SPIN-DONE/);
    for (const [name, text] of [
      ["stdout", r.out],
      ["stderr", r.err],
    ] as const) {
      assert.doesNotMatch(text, SPINNER, name);
      assert.ok(!text.includes("\r"), `${name} has a carriage return`);
      assert.ok(!text.includes("\x1b"), `${name} has an escape`);
    }
    assert.equal(r.err, "");
  });

  async function screen(session: string): Promise<string> {
    return tmux.run(["capture-pane", "-p", "-t", session]);
  }
});

describe("Herdr runtime (fake Herdr)", () => {
  let fake: FakeHerdr;
  let h: CliHarness;
  let sockDir = "";

  before(async () => {
    sockDir = mkdtempSync(join(tmpdir(), "dsh-panes-herdr-"));
    const socketPath = join(sockDir, "herdr.sock");
    h = await startCliHarness(script, "herdr", { herdrSocketPath: socketPath });
    // Herdr's panes inherit the Herdr server's environment (the user's pi setup), not the daemon's: the fake's
    // server is started with the test's pi env, and pi by its path (no node_modules/.bin on PATH outside npm).
    const piEnv = Object.entries(h.env).filter(([k]) => k === "HOME" || k.startsWith("PI_"));
    const saved = piEnv.map(([k]) => [k, process.env[k]] as const);
    Object.assign(process.env, Object.fromEntries(piEnv));
    try {
      fake = await startFakeHerdr({ socketPath, quietMs: 1000, kinds: { pi: piBin } });
    } finally {
      for (const [k, v] of saved) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
    const s = await h.cli(["daemon", "start"]);
    assert.equal(s.code, 0, s.err);
  });

  after(async () => {
    await h?.close();
    await fake?.close();
    if (sockDir) rmSync(sockDir, { recursive: true, force: true });
  });

  test("open focuses the task's pane through Herdr (config's herdrSocketPath), human and --json; logs reads the pane", async () => {
    const id = await spawn(h, "[t-spin] in a Herdr pane");
    const handle = await waitFor("the Herdr pane", async () => handleOf(h, id), 60_000, 200);
    assert.equal(handle.runtime, "herdr");
    assert.ok(handle.paneId);

    const o = await h.cli(["open", id]);
    assert.equal(o.code, 0, o.err);
    assert.equal(o.out, `focused Herdr pane ${handle.paneId}\n`);
    const j = await h.cli(["open", id, "--json"]);
    assert.equal(j.code, 0, j.err);
    assert.deepEqual(JSON.parse(j.out), { taskId: id, runtime: "herdr", paneId: handle.paneId, focused: true });

    const focus = fake.log.filter(
      (e) => e.kind === "request" && (e.message as { method?: string }).method === "pane.focus",
    );
    assert.equal(focus.length, 2, JSON.stringify(focus));
    for (const { message } of focus)
      assert.deepEqual((message as { params: unknown }).params, { pane_id: handle.paneId });
    for (const { kind, message } of fake.log) {
      assert.equal(
        herdrSchemaErrors(schemaFor(kind, message as Record<string, unknown>), message),
        "",
        JSON.stringify(message),
      );
    }

    let last = "";
    const l = await waitFor(
      "the pane's screen",
      async () => {
        const r = await h.cli(["logs", id]);
        last = r.out + r.err;
        return r.code === 0 && r.out.includes(`Task ${id}`) ? r : undefined;
      },
      30_000,
      300,
    ).catch((e: Error) => assert.fail(`${e.message}; last logs:\n${last}`));
    assert.equal(l.err, "");
    const lj = JSON.parse((await h.cli(["logs", id, "--json"])).out) as { runtime: string; output: string };
    assert.equal(lj.runtime, "herdr");
    assert.match(lj.output, new RegExp(`Task ${id}`));
  });
});
