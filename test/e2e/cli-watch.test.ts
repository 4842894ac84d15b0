// watch on a real terminal (a private tmux server) redraws rows in place; piped, it prints one line per change. With a
// keyboard (issue 25 item 8) the rows are acted on: the keys are sent with tmux send-keys and the screen read back
// with capture-pane, against a real daemon with real pi tasks (headless and tmux runtimes).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execa } from "execa";
import { execFileSync } from "node:child_process";
import type { Script } from "../../fixtures/scripted-model/script.js";
import type { AgentResult } from "../../src/core/types.js";
import { privateTmux, tmuxInstalled, waitFor, type PrivateTmux } from "../helpers/tmux.js";
import { bin, startCliHarness, type CliHarness } from "./cli-harness.js";

const report = (text: string) => ({
  toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: text } }],
});
const script: Script = {
  conversations: [
    {
      name: "watch",
      match: "[t-watch]",
      steps: [
        {
          toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "watched (WATCH-DONE)" } }],
          delayMs: 4000,
        },
      ],
    },
    // Work with a diff, and a report that tries to clear the screen and retitle the terminal.
    {
      name: "wdiff",
      match: "[t-wdiff]",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "wdiff.txt", content: "from the watch test\n" } }] },
        report("ESC-TEST \u001b[2J\u001b]0;pwned\u0007 done"),
      ],
    },
    // Slow first answer: a steer typed in the watch arrives while pi waits for it.
    {
      name: "wslow",
      match: "[t-wslow]",
      steps: [
        { match: "/WATCH-STEER/", matchIn: "sinceAssistant", ...report("steered from the watch (KEYS-STEERED)") },
        { toolCalls: [{ name: "write", arguments: { path: "slow.txt", content: "s\n" } }], delayMs: 15_000 },
        report("never steered"),
      ],
    },
    // Its own file: the keys test lands wdiff.txt on main, so another wdiff task there would change nothing.
    {
      name: "wpager",
      match: "[t-wpager]",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "pager.txt", content: "through less\n" } }] },
        report("paged"),
      ],
    },
    { name: "wlong", match: "[t-wlong]", steps: [{ text: "thinking for a long while", delayMs: 120_000 }] },
  ],
};

let h: CliHarness;
let tmux: PrivateTmux;

before(async () => {
  assert.ok(await tmuxInstalled(), "tmux is required (the CI installs it)");
  h = await startCliHarness(script);
  const s = await h.cli(["daemon", "start"]);
  assert.equal(s.code, 0, s.err);
  tmux = privateTmux("dsh-watch");
});

after(async () => {
  await tmux?.kill();
  await h?.close();
});

test("watch under tmux: a row changes from running to completed in place, no line appended", async () => {
  const envArgs = Object.entries(h.env).flatMap(([k, v]) => ["-e", `${k}=${v}`]);
  await tmux.run([
    "new-session",
    "-d",
    "-s",
    "watch",
    "-x",
    "150",
    "-y",
    "20",
    ...envArgs,
    process.execPath,
    bin,
    "watch",
  ]);
  await waitFor("the empty table", async () => (await screen()).includes("watching 0 task(s)"));

  const s = await h.cli(["spawn", "--prompt", "[t-watch] report after a while"]);
  assert.equal(s.code, 0, s.err);
  const id = s.out.trim();
  const rowOf = (lines: string[]) => lines.findIndex((l) => l.startsWith(id));

  const before = await waitFor(
    "the row while the child works",
    async () => {
      const lines = (await screen()).split("\n");
      const i = rowOf(lines);
      return i >= 0 && /\s(starting|working|running)\s/.test(lines[i] ?? "") ? lines : undefined;
    },
    60_000,
  );
  const after = await waitFor(
    "the row completed",
    async () => {
      const lines = (await screen()).split("\n");
      const i = rowOf(lines);
      return i >= 0 && /\scompleted\s/.test(lines[i] ?? "") ? lines : undefined;
    },
    90_000,
  );

  assert.equal(rowOf(after), rowOf(before), "the row stays where it was");
  // (The footer names the selected task too: rows are the lines that start with an id.)
  assert.equal(after.filter((l) => l.startsWith(id)).length, 1, "one row for the task: nothing appended");
  assert.equal(
    after.filter((l) => /^ID\s+AGENT/.test(l)).length,
    1,
    "one header: the table was redrawn, not reprinted",
  );
  assert.equal(after.filter((l) => l.trim() !== "").length, before.filter((l) => l.trim() !== "").length);

  await tmux.run(["send-keys", "-t", "watch", "C-c"]);
  await waitFor(
    "watch to exit on Ctrl+C",
    async () =>
      !(await tmux.run(["list-panes", "-t", "watch", "-F", "#{pane_current_command}"]).catch(() => "")).includes(
        "node",
      ),
    10_000,
  );
});

test("watch piped (not a TTY): one line per status change, --until-settled exits", async () => {
  const s = await h.cli(["spawn", "--json", "--prompt", "[t-watch] again"]);
  const id = (JSON.parse(s.out) as { taskId: string }).taskId;
  const r = await execa(process.execPath, [bin, "watch", id, "--until-settled"], {
    env: h.env,
    reject: false,
    timeout: 90_000,
    stdin: "ignore",
  });
  assert.equal(r.exitCode, 0, String(r.stderr));
  const lines = String(r.stdout).trim().split("\n");
  assert.ok(
    lines.every((l) => l.includes(id)),
    String(r.stdout),
  );
  assert.match(lines.at(-1) ?? "", /→ completed {2}watched \(WATCH-DONE\)$/);
  assert.doesNotMatch(String(r.stdout), /\x1b\[/, "no ANSI escapes when not a terminal");
});

async function screen(): Promise<string> {
  return tmux.run(["capture-pane", "-p", "-t", "watch"]);
}

async function spawnId(args: string[]): Promise<string> {
  const s = await h.cli(["spawn", "--json", ...args]);
  assert.equal(s.code, 0, s.err);
  return (JSON.parse(s.out) as { taskId: string }).taskId;
}
async function statusOf(id: string): Promise<string> {
  return (JSON.parse((await h.cli(["result", id])).out) as AgentResult).status;
}

test("watch keys under tmux: select, enter (card, pane), d diff, r respond (steer), a abort, c close, l land, q quit", async () => {
  // The earlier tests' tasks go first: this table shows only this test's tasks.
  assert.equal((await h.cli(["close", "--settled", "--yes"])).code, 0);
  const a = await spawnId(["--isolated", "--brief", "esc \u001b[31mred", "--prompt", "[t-wdiff] write wdiff.txt"]);
  const b = await spawnId(["--runtime", "tmux", "--prompt", "[t-wslow] take a while"]);
  const c = await spawnId(["--prompt", "[t-wlong] never ends"]);
  assert.equal(JSON.parse((await h.cli(["wait", a, "--json", "--timeout", "90s"])).out).results[0].status, "completed");

  const envArgs = Object.entries(h.env).flatMap(([k, v]) => ["-e", `${k}=${v}`]);
  await tmux.run([
    "new-session",
    "-d",
    "-s",
    "keys",
    "-x",
    "160",
    "-y",
    "40",
    ...envArgs,
    process.execPath,
    bin,
    "watch",
  ]);
  const scr = () => tmux.run(["capture-pane", "-p", "-t", "keys"]);
  const send = (...keys: string[]) => tmux.run(["send-keys", "-t", "keys", ...keys]);
  const type = (text: string) => tmux.run(["send-keys", "-t", "keys", "-l", text]);
  // Waits for the screen to match; a timeout names what the screen showed last.
  const shows = async (what: string, re: RegExp, ms = 30_000) => {
    let last = "";
    try {
      return await waitFor(
        what,
        async () => {
          last = await scr();
          return re.test(last) ? last : undefined;
        },
        ms,
      );
    } catch (e) {
      throw new Error(`${(e as Error).message}; the screen:\n${last}`);
    }
  };
  const selected = async () => /watching \d+ task\(s\) · \S+ · › (t[0-9a-z]{11})/.exec(await scr())?.[1];

  // The rows (a's brief neutralised: ESC shown as \x1b, no colour change), a selected first, in reverse video.
  await shows("the three rows", new RegExp(`${a}[\\s\\S]*${b}[\\s\\S]*${c}`), 60_000);
  assert.match(await scr(), /esc \\x1b\[31mred/);
  assert.equal(await selected(), a);
  const colored = await tmux.run(["capture-pane", "-p", "-e", "-t", "keys"]);
  // tmux re-renders the attributes: reverse video (7) on, possibly among others, before the id.
  assert.match(colored, new RegExp(`\\x1b\\[[0-9;]*7m(\\x1b\\[[0-9;]*m)*${a}`), "the selected row in reverse video");
  assert.doesNotMatch(colored, new RegExp(`\\x1b\\[[0-9;]*7m(\\x1b\\[[0-9;]*m)*${b}`), "only the selected one");
  assert.match(await scr(), /↑↓\/jk select · enter open · d diff · r respond · a abort · c close · l land · q quit/);

  // ↑/↓ and j/k move the selection.
  await send("j");
  await waitFor("b selected", async () => ((await selected()) === b ? true : undefined));
  await send("Down");
  await waitFor("c selected", async () => ((await selected()) === c ? true : undefined));
  await send("k");
  await waitFor("b again", async () => ((await selected()) === b ? true : undefined));
  await send("Up");
  await waitFor("a again", async () => ((await selected()) === a ? true : undefined));

  // d: the diff in a panel (the pager is `cat` here), q back to the table.
  await send("d");
  const diff = await shows("the diff panel", /diff t[0-9a-z]{11} · lines 1–/);
  assert.match(diff, /\+\+\+ b\/wdiff\.txt/);
  assert.match(diff, /\+from the watch test/);
  await send("q");
  await shows("the table again", /^ID\s+AGENT/m);

  // enter on a headless task: its card, the child's escape sequences shown, not run.
  await send("Enter");
  const card = await shows("the card panel", /ESC-TEST/);
  assert.match(card, /ESC-TEST \\x1b\[2J\\x1b\]0;pwned\\x07 done/);
  await send("Escape");
  await shows("the table again", /^ID\s+AGENT/m);

  // r on the running task: a line of text; it is steered into its running turn.
  await send("j");
  await waitFor("b selected", async () => ((await selected()) === b ? true : undefined));
  await send("r");
  await shows("the prompt", new RegExp(`respond to ${b}: █`));
  await type("WATCH-STEER from the keys");
  await shows("the typed text", /respond to t[0-9a-z]{11}: WATCH-STEER from the keys█/);
  await send("Enter");
  await shows("the steer's outcome", new RegExp(`${b}: steered cycle 1: the message joins its running turn`), 40_000);

  // enter on a tmux task: its window takes the terminal (tmux attach); detached, the watch is back.
  await send("Enter");
  const pane = await waitFor(
    "the child's pane",
    async () => {
      const t = await scr();
      return /watching \d+ task/.test(t) || t.trim() === "" ? undefined : t;
    },
    30_000,
  );
  // pi's own TUI in the task's tmux window, showing the steer it was given (queued, or in the conversation).
  await waitFor("pi's TUI with the steer", async () =>
    /WATCH-STEER from the keys/.test(await scr()) ? true : undefined,
  );
  assert.match(pane, new RegExp(b.slice(-4)), "the task's own window (its agent name)");
  await send("C-b", "d");
  await shows("back from the pane", new RegExp(`back from ${b}'s pane`), 30_000);

  // a: asked first; n leaves it running, y aborts it.
  await send("j");
  await waitFor("c selected", async () => ((await selected()) === c ? true : undefined));
  await send("a");
  await shows("the question", new RegExp(`abort ${c} \\((starting|running)\\)\\? \\[y/N\\]`));
  await send("n");
  await shows("nothing done", /· nothing done/);
  assert.notEqual(await statusOf(c), "interrupted");
  await send("a");
  await shows("the question", /\[y\/N\]/);
  await send("y");
  await shows("aborted", new RegExp(`aborted ${c}`), 30_000);
  await shows("the row interrupted", new RegExp(`${c}.*interrupted`), 30_000);

  // c: closed, and the row leaves the table.
  await send("c");
  await shows("the question", new RegExp(`close ${c} \\(interrupted\\)\\? \\[y/N\\]`));
  await send("y");
  await shows("closed", new RegExp(`closed ${c}`), 30_000);
  await waitFor("c's row gone", async () => (new RegExp(`^${c}`, "m").test(await scr()) ? undefined : true));
  assert.equal(await statusOf(c), "closed");

  // l on the finished isolated task: its work lands on main in the checkout.
  await send("k", "k");
  await waitFor("a selected", async () => ((await selected()) === a ? true : undefined));
  await send("l");
  await shows("the question", new RegExp(`land ${a}'s work onto its base branch\\? \\[y/N\\]`));
  await send("y");
  await shows("landed", new RegExp(`${a}: landed on main as [0-9a-f]{12}`), 60_000);
  // Its row says so: `landed`, not plain `completed`.
  await shows("a's row landed", new RegExp(`^${a}\\s.*\\slanded\\s`, "m"), 30_000);
  assert.match(
    execFileSync("git", ["-C", h.repo, "show", "HEAD:wdiff.txt"], { encoding: "utf8" }),
    /from the watch test/,
  );

  // The steered task finished with the steer's answer.
  await shows("b completed", new RegExp(`${b}.*completed`), 60_000);
  assert.match(JSON.parse((await h.cli(["result", b])).out).summary, /KEYS-STEERED/);

  // q quits.
  await send("q");
  await waitFor(
    "watch to exit on q",
    async () =>
      !(await tmux.run(["list-panes", "-t", "keys", "-F", "#{pane_current_command}"]).catch(() => "")).includes("node"),
    10_000,
  );
  for (const id of [a, b]) await h.cli(["close", id]);
});

test("watch keys: d through a real pager (less): q in less comes back to the table", async () => {
  const a = await spawnId(["--isolated", "--prompt", "[t-wpager] write pager.txt"]);
  assert.equal(JSON.parse((await h.cli(["wait", a, "--json", "--timeout", "90s"])).out).results[0].status, "completed");
  const env = { ...h.env, DSH_HERDR_PAGER: "less" };
  const envArgs = Object.entries(env).flatMap(([k, v]) => ["-e", `${k}=${v}`]);
  await tmux.run([
    "new-session",
    "-d",
    "-s",
    "pager",
    "-x",
    "160",
    "-y",
    "30",
    ...envArgs,
    process.execPath,
    bin,
    "watch",
    a,
  ]);
  const scr = () => tmux.run(["capture-pane", "-p", "-t", "pager"]);
  await waitFor("the row", async () => (new RegExp(`^${a}`, "m").test(await scr()) ? true : undefined), 30_000);
  await tmux.run(["send-keys", "-t", "pager", "d"]);
  let last = "";
  const paged = await waitFor("less showing the diff", async () => {
    last = await scr();
    return /\+\+\+ b\/pager\.txt/.test(last) && !/watching \d+ task/.test(last) ? last : undefined;
  }).catch((e: Error) => assert.fail(`${e.message}; the screen:\n${last}`));
  assert.match(paged, /\+through less/);
  await tmux.run(["send-keys", "-t", "pager", "q"]);
  await waitFor("the table again", async () => (/watching 1 task\(s\)/.test(await scr()) ? true : undefined));
  await tmux.run(["send-keys", "-t", "pager", "q"]);
  await h.cli(["close", a]);
});
