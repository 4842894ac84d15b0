// Every daemon-backed command through the real bin/dsh-herdr against a real daemon (headless runtime, real pi).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { AgentResult } from "../../src/core/types.js";
import { startCliHarness, type CliHarness } from "./cli-harness.js";

const script = {
  conversations: [
    {
      name: "quick",
      match: "[t-quick]",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "quick.txt", content: "quick\n" } }] },
        {
          toolCalls: [
            { name: "crew_report", arguments: { outcome: "completed", report: "wrote quick.txt (QUICK-DONE)" } },
          ],
        },
        {
          match: "/FOLLOWUP/",
          toolCalls: [
            { name: "crew_report", arguments: { outcome: "completed", report: "follow-up handled (FOLLOW-DONE)" } },
          ],
        },
      ],
    },
    { name: "slow", match: "[t-slow]", steps: [{ text: "thinking slowly", delayMs: 60_000 }] },
    { name: "fail", match: "[t-fail]", steps: [{ httpError: { status: 500, message: "scripted upstream failure" } }] },
  ],
};

let h: CliHarness;
let quick = "";

before(async () => {
  h = await startCliHarness(script);
  const started = await h.cli(["daemon", "start", "--json"]);
  assert.equal(started.code, 0, started.err);
  assert.equal((JSON.parse(started.out) as { alreadyRunning: boolean }).alreadyRunning, false);
});

after(async () => {
  await h?.close();
});

test("daemon status: human and --json", async () => {
  const s = await h.cli(["daemon", "status"]);
  assert.equal(s.code, 0, s.err);
  assert.match(s.out, /^daemon \S+ \(protocol \d+\) pid \d+, up /);
  assert.match(s.out, /^slots: 0\/3 running/m);
  const j = JSON.parse((await h.cli(["daemon", "status", "--json"])).out) as { home: string };
  assert.equal(j.home, h.home);
  const again = await h.cli(["daemon", "start"]);
  assert.match(again.out, /already running/);
});

test("spawn prints the id; wait --json settles it completed; show/result/diff/list read it back", async () => {
  const s = await h.cli(["spawn", "--isolated", "--brief", "quick one", "--prompt", "[t-quick] write quick.txt"]);
  assert.equal(s.code, 0, s.err);
  quick = s.out.trim();
  assert.match(quick, /^t[0-9a-z]{11}$/);

  const w = await h.cli(["wait", quick.slice(0, 6), "--timeout", "90s", "--json"]);
  assert.equal(w.code, 0, w.err);
  const waited = JSON.parse(w.out) as { results: AgentResult[]; timedOut: boolean };
  assert.equal(waited.timedOut, false);
  assert.equal(waited.results[0]?.status, "completed");

  const show = await h.cli(["show", quick.slice(0, 5)]);
  assert.equal(show.code, 0, show.err);
  assert.match(show.out, /^\[headless\] worker pi \(scripted\/scripted-model · \w+\) → completed$/m);
  assert.match(show.out, new RegExp(`^agent: \\S+ · task ${quick} · pid \\d+$`, "m"));
  assert.match(show.out, /^diff: 1 file\(s\)/m);
  assert.match(show.out, /QUICK-DONE/);

  const file = readFileSync(join(h.home, "tasks", quick, "result.json"), "utf8");
  assert.equal((await h.cli(["result", quick, "--json"])).out, file, "result --json is exactly result.json");
  assert.deepEqual(JSON.parse((await h.cli(["show", quick, "--json"])).out), JSON.parse(file));

  const diff = await h.cli(["diff", quick]);
  assert.equal(diff.code, 0, diff.err);
  assert.match(diff.out, /^\+\+\+ b\/quick\.txt$/m);
  assert.equal((JSON.parse((await h.cli(["diff", quick, "--json"])).out) as { patch: string }).patch, diff.out);

  const list = await h.cli(["list"]);
  assert.match(list.out, /^ID\s+AGENT\s+ROLE\s+STATUS\s+AGE\s+RUNTIME\s+BRIEF\s+CWD$/m);
  assert.match(
    list.out,
    new RegExp(
      `^${quick}\\s+\\S+\\s+worker\\s+completed\\s+\\d+[smh]\\s+headless\\s+quick one\\s+\\S*repo-${quick}$`,
      "m",
    ),
  );
  const lj = JSON.parse((await h.cli(["list", "--json", "--status", "completed"])).out) as { tasks: AgentResult[] };
  assert.ok(lj.tasks.some((t) => t.taskId === quick));
  const none = JSON.parse((await h.cli(["list", "--json", "--status", "failed"])).out) as { tasks: AgentResult[] };
  assert.ok(!none.tasks.some((t) => t.taskId === quick));

  const logs = await h.cli(["logs", quick, "--json"]);
  assert.equal(logs.code, 0, logs.err);
  assert.equal((JSON.parse(logs.out) as { runtime: string }).runtime, "headless");
});

test("respond starts cycle 2; wait prints the card; close closes it and list hides it", async () => {
  const r = await h.cli(["respond", quick, "FOLLOWUP", "please"]);
  assert.equal(r.code, 0, r.err);
  assert.equal(r.out, `${quick}: cycle 2 started\n`);
  const w = await h.cli(["wait", quick, "--timeout", "90s"]);
  assert.equal(w.code, 0, w.err);
  assert.match(w.out, /FOLLOW-DONE/);

  const c = await h.cli(["close", quick]);
  assert.equal(c.code, 0, c.err);
  assert.match(c.out, /→ closed$/m);
  assert.doesNotMatch((await h.cli(["list"])).out, new RegExp(quick));
  assert.match((await h.cli(["list", "--all"])).out, new RegExp(`^${quick}\\s.*closed`, "m"));
});

test("wait times out with exit 3; abort interrupts; waiting on it then exits 1", async () => {
  const s = await h.cli(["spawn", "--json", "[t-slow]", "take", "your", "time"]);
  assert.equal(s.code, 0, s.err);
  const slow = (JSON.parse(s.out) as { taskId: string }).taskId;
  const w = await h.cli(["wait", slow, "--timeout", "1s"]);
  assert.equal(w.code, 3, w.err);
  assert.match(w.err, /TIMEOUT: not settled in time/);
  const a = await h.cli(["abort", slow, "--json"]);
  assert.equal(a.code, 0, a.err);
  assert.deepEqual((JSON.parse(a.out) as { aborted_ids: string[] }).aborted_ids, [slow]);
  const after = await h.cli(["wait", slow, "--timeout", "60s"]);
  assert.equal(after.code, 1);
  assert.match(after.out, /→ interrupted$/m);
  const again = await h.cli(["abort", slow]);
  assert.equal(again.code, 1);
  assert.match(again.err, /not open/);
  assert.equal((await h.cli(["close", slow])).code, 0, "closing releases its slot");
});

test("a failing child: spawn --wait prints the failed card and exits 1", async () => {
  const r = await h.cli(["spawn", "--wait", "--prompt-file", "-"], { input: "[t-fail] this will fail\n" });
  assert.equal(r.code, 1, r.err);
  assert.match(r.out, /→ failed$/m);
  assert.match(r.out, /^next: inspect$/m);
});

test("unknown and ambiguous ids: one line naming the closest, exit 1; open on headless names logs", async () => {
  const u = await h.cli(["show", "tzzzzzzzzzzz"]);
  assert.equal(u.code, 1);
  assert.equal(u.err.trim().split("\n").length, 1);
  assert.match(u.err, /^dsh-herdr: TASK_NOT_FOUND: no task matches "tzzzzzzzzzzz"\. Closest: t[0-9a-z]{11}/);
  const amb = await h.cli(["show", "t"]);
  assert.equal(amb.code, 2, "an ambiguous id is a usage error");
  assert.match(amb.err, /BAD_TASK_ID: "t" matches \d+ tasks/);
  const open = await h.cli(["open", quick]);
  assert.equal(open.code, 1);
  assert.match(open.err, /runs headless and has no pane.*dsh-herdr logs/);
});

test("gc: dry run keeps nothing it cannot prove captured, --json reports the plan", async () => {
  const g = await h.cli(["gc", "--json"]);
  assert.equal(g.code, 0, g.err);
  const plan = JSON.parse(g.out) as { dryRun: boolean; plan: { taskId: string; action: string }[] };
  assert.equal(plan.dryRun, true);
  assert.ok(
    plan.plan.some((p) => p.taskId === quick),
    JSON.stringify(plan),
  );
});

test("daemon stop, then commands that need it say so in one line", async () => {
  const s = await h.cli(["daemon", "stop"]);
  assert.equal(s.code, 0, s.err);
  assert.equal(s.out, "daemon stopped\n");
  const l = await h.cli(["respond", quick, "more"]);
  assert.equal(l.code, 1);
  assert.match(l.err, /^dsh-herdr: DAEMON_UNAVAILABLE: .*daemon start`\n$/);
  const list = await h.cli(["list", "--all"]);
  assert.equal(list.code, 0, "list reads the task index without a daemon");
  assert.match(list.out, new RegExp(quick));
  const show = await h.cli(["show", quick]);
  assert.equal(show.code, 0, "show reads result.json without a daemon");
});
