// Steering and cleaning up from the CLI (issue 25 item 8), through the real bin/dsh-herdr against a real daemon
// (headless runtime, real pi): `respond` to a running task steers it; `close` and `abort` take several ids and
// `--failed` / `--settled` (every open task in that state); a picked selection of several tasks is confirmed on a
// terminal (tmux: answered n, then y) and needs --yes without one; --json says what was done per task.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
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
      name: "steer",
      match: "[t-steer]",
      steps: [
        { match: "/CLI-STEER/", matchIn: "sinceAssistant", ...report("steered from the CLI (STEER-SEEN)") },
        { toolCalls: [{ name: "write", arguments: { path: "s.txt", content: "s\n" } }], delayMs: 3500 },
        report("never steered"),
      ],
    },
    { name: "quick", match: "[t-quick]", steps: [report("quick (QUICK-DONE)")] },
    { name: "slow", match: "[t-slow]", steps: [{ text: "thinking slowly", delayMs: 60_000 }] },
    // 400 is not retried by pi: the cycle fails at once.
    { name: "fail", match: "[t-fail]", steps: [{ httpError: { status: 400, message: "scripted refusal" } }] },
  ],
};

let h: CliHarness;
let tmux: PrivateTmux;

before(async () => {
  assert.ok(await tmuxInstalled(), "tmux is required (the CI installs it)");
  h = await startCliHarness(script);
  const s = await h.cli(["daemon", "start"]);
  assert.equal(s.code, 0, s.err);
  tmux = privateTmux("dsh-cleanup");
});

after(async () => {
  await tmux?.kill();
  await h?.close();
});

async function spawn(prompt: string): Promise<string> {
  const s = await h.cli(["spawn", "--json", "--prompt", prompt]);
  assert.equal(s.code, 0, s.err);
  return (JSON.parse(s.out) as { taskId: string }).taskId;
}
async function settled(id: string): Promise<AgentResult> {
  const w = await h.cli(["wait", id, "--json", "--timeout", "90s"]);
  return (JSON.parse(w.out) as { results: AgentResult[] }).results[0]!;
}
async function statusOf(id: string): Promise<string> {
  const r = await h.cli(["result", id]);
  return (JSON.parse(r.out) as AgentResult).status;
}

/** Until the task's cycle runs (its status `running`), as a bulk command's "running work is left alone" needs. */
async function runningNow(id: string): Promise<void> {
  await waitFor(`task ${id} running`, async () => ((await statusOf(id)) === "running" ? true : undefined), 60_000, 200);
}

test("respond to a running task steers it: `steered cycle 1`, and the child's model answers the steer", async () => {
  const id = await spawn("[t-steer] write s.txt");
  await waitFor("the task running", async () => ((await statusOf(id)) === "running" ? true : undefined), 60_000, 200);
  const r = await h.cli(["respond", id, "CLI-STEER", "keep", "it", "short"]);
  assert.equal(r.code, 0, r.err);
  assert.equal(r.out, `${id}: steered cycle 1: the message joins its running turn\n`);
  const done = await settled(id);
  assert.equal(done.status, "completed");
  assert.match(done.summary, /STEER-SEEN/);
  // A failed task is neither steered nor followed up.
  const f = await spawn("[t-fail] refuse");
  assert.equal((await settled(f)).status, "failed");
  const no = await h.cli(["respond", f, "again"]);
  assert.equal(no.code, 1);
  assert.match(no.err, /BAD_STATE/);
  assert.equal((await h.cli(["close", id, f])).code, 0);
});

test("close --failed picks every failed task (not the others): refused without --yes off a terminal, then closed with --yes; --json per task", async () => {
  const fails = [await spawn("[t-fail] one"), await spawn("[t-fail] two"), await spawn("[t-fail] three")];
  const ok = await spawn("[t-quick] fine");
  const slow = await spawn("[t-slow] running");
  for (const id of fails) assert.equal((await settled(id)).status, "failed");
  assert.equal((await settled(ok)).status, "completed");
  // Running, not still starting (pi took the prompt but its model has not begun) on a loaded machine.
  await runningNow(slow);

  const refused = await h.cli(["close", "--failed"]);
  assert.equal(refused.code, 2, refused.err);
  assert.match(
    refused.err,
    /close --failed picks 3 tasks; pass --yes to close them all \(there is no terminal to ask on\)/,
  );
  for (const id of fails) assert.equal(await statusOf(id), "failed", "nothing was closed");

  const r = await h.cli(["close", "--failed", "--yes", "--json"]);
  assert.equal(r.code, 0, r.err);
  const out = JSON.parse(r.out) as { results: { taskId: string; was?: string; status?: string }[] };
  assert.deepEqual(
    out.results.map((x) => [x.taskId, x.was, x.status]),
    fails.map((id) => [id, "failed", "closed"]),
  );
  for (const id of fails) assert.equal(await statusOf(id), "closed");
  assert.equal(await statusOf(ok), "completed", "a completed task is not failed");
  assert.equal(await statusOf(slow), "running", "running work is never picked");
  const none = await h.cli(["close", "--failed"]);
  assert.equal(none.code, 0);
  assert.equal(none.out, "no failed tasks to close\n");

  // Several ids: each closed, one line each; an unknown one is an error of its own and exit 1.
  const two = await h.cli(["close", ok, slow]);
  assert.equal(two.code, 0, two.err);
  assert.match(two.out, new RegExp(`^closed  ${ok}  \\S+$`, "m"));
  assert.match(two.out, new RegExp(`^closed  ${slow}  \\S+$`, "m"));
  assert.equal((await h.cli(["close", "--failed", "--settled"])).code, 2, "one way of naming tasks");
  assert.equal((await h.cli(["close"])).code, 2);
});

test("abort --settled ends settled tasks' children and closes them (a completed verdict kept), a failed one closed with its pane", async () => {
  const done = await spawn("[t-quick] a");
  const failed = await spawn("[t-fail] b");
  const slow = await spawn("[t-slow] still running");
  assert.equal((await settled(done)).status, "completed");
  assert.equal((await settled(failed)).status, "failed");
  await runningNow(slow);
  const r = await h.cli(["abort", "--settled", "--yes", "--json"]);
  assert.equal(r.code, 0, r.err);
  const out = JSON.parse(r.out) as Record<string, string[]>;
  assert.deepEqual(out, { aborted_ids: [done], closed_ids: [failed], missing_ids: [], foreign_ids: [] });
  assert.equal(await statusOf(done), "closed");
  assert.equal(await statusOf(failed), "closed");
  assert.equal(await statusOf(slow), "running");
  // Several ids, as before: the running one is aborted (interrupted).
  const a = await h.cli(["abort", slow, "--json"]);
  assert.deepEqual((JSON.parse(a.out) as { aborted_ids: string[] }).aborted_ids, [slow]);
  await h.cli(["close", slow]);
});

test("on a terminal, close --settled lists the tasks and asks: n leaves them, y closes them", async () => {
  const ids = [await spawn("[t-quick] x"), await spawn("[t-quick] y")];
  for (const id of ids) assert.equal((await settled(id)).status, "completed");
  const envArgs = Object.entries(h.env).flatMap(([k, v]) => ["-e", `${k}=${v}`]);
  const run = async (name: string) => {
    await tmux.run([
      "new-session",
      "-d",
      "-s",
      name,
      "-x",
      "150",
      "-y",
      "20",
      ...envArgs,
      "sh",
      "-c",
      `'${process.execPath}' '${bin}' close --settled; echo EXIT=$?; sleep 30`,
    ]);
    return () => tmux.run(["capture-pane", "-p", "-t", name]);
  };
  const screen1 = await run("ask-n");
  await waitFor(
    "the question",
    async () => (/close 2 tasks\? \[y\/N\]/.test(await screen1()) ? true : undefined),
    30_000,
  );
  const shown = await screen1();
  for (const id of ids) assert.match(shown, new RegExp(`^\\s+${id}\\s+\\S+\\s+completed`, "m"));
  await tmux.run(["send-keys", "-t", "ask-n", "n", "Enter"]);
  await waitFor("nothing done", async () => (/nothing done[\s\S]*EXIT=0/.test(await screen1()) ? true : undefined));
  for (const id of ids) assert.equal(await statusOf(id), "completed");

  const screen2 = await run("ask-y");
  await waitFor("the question", async () => (/\[y\/N\]/.test(await screen2()) ? true : undefined), 30_000);
  await tmux.run(["send-keys", "-t", "ask-y", "y", "Enter"]);
  await waitFor("closed", async () => (/EXIT=0/.test(await screen2()) ? true : undefined), 30_000);
  for (const id of ids) assert.match(await screen2(), new RegExp(`^closed  ${id}  \\S+  \\(was completed\\)`, "m"));
  for (const id of ids) assert.equal(await statusOf(id), "closed");
});
