// One authority for a task's state (issue 23), end to end with real pi children against the scripted model: a
// settled cycle's verdict, summary and diff stand through a late result.md, a close and an abort; no status is
// pushed for a prompt pi never took.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, lstatSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { verifyTaskDir } from "../../src/cli/commands/verify.js";
import type { Script } from "../../fixtures/scripted-model/script.js";
import type { AgentResult } from "../../src/core/types.js";
import { readOutbox } from "../../src/store/outbox.js";
import { runCli } from "../helpers/cli.js";
import { modulesLoadedBy } from "../helpers/module-log.js";
import { until } from "../helpers/wait.js";
import { readJournal, startHarness, type Harness } from "./daemon-harness.js";

const SCRIPT: Script = {
  conversations: [
    {
      name: "work",
      match: "MARK-WORK",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "work.txt", content: "done\n" } }] },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "Wrote work.txt" } }] },
      ],
    },
    {
      name: "quoted",
      match: "MARK-QUOTED",
      steps: [
        // A first line with quotes and ": " gives a summary yaml writes single-quoted: frontmatter only yaml reads.
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: 'Ran "npm test": ok' } }] },
      ],
    },
  ],
};
const OWNER = "sess-authority-owner";

let h: Harness;
before(async () => {
  h = await startHarness(SCRIPT, { runtime: "headless" });
});
after(async () => {
  await h?.close();
});

const stored = (taskId: string) =>
  JSON.parse(readFileSync(join(h.home, "tasks", taskId, "result.json"), "utf8")) as AgentResult;

test("close after a late result.md: the closed result keeps the settled cycle's summary and verdict, not the late file", async () => {
  const { taskId } = await h.spawn({ prompt: "MARK-WORK then a late result.md", isolated: true });
  const r = await h.wait(taskId);
  assert.equal(r.status, "completed");
  writeFileSync(r.result!.path, "---\nstatus: failed\nsummary: LATE\n---\nLATE text written after the settle.\n");
  await until("the late evidence record", () => readJournal(h, taskId).some((e) => e.type === "late_evidence"));
  const closed = await h.cli.request("task.close", { taskId });
  for (const x of [closed, stored(taskId)]) {
    assert.equal(x.status, "closed");
    assert.equal(x.summary, r.summary, "the settled summary stands");
    assert.doesNotMatch(JSON.stringify(x.result ?? {}), /LATE/, "no late text in the closed result");
    assert.equal(x.result?.meta?.status, r.result?.meta?.status, "the late frontmatter is not read");
    assert.deepEqual(x.diff?.files, r.diff?.files);
  }
});

test("abort of a completed cycle closes the task: completed work is not relabelled interrupted, its diff stands", async () => {
  const { taskId } = await h.spawn({ prompt: "MARK-WORK then abort it", isolated: true, owner: OWNER });
  const r = await h.wait(taskId);
  assert.equal(r.status, "completed");
  assert.deepEqual(r.diff?.files, ["work.txt"]);
  const out = await h.cli.request("task.abort", { taskIds: [taskId] });
  assert.deepEqual(out.aborted_ids, [taskId]);
  const after = await h.cli.request("task.get", { taskId });
  for (const x of [after, stored(taskId)]) {
    assert.ok(x.status === "closed" || x.status === "completed", x.status);
    assert.notEqual(x.status, "interrupted");
    assert.equal(x.nextAction, "none");
    assert.equal(x.summary, r.summary);
    assert.deepEqual(x.diff?.files, ["work.txt"], "the harvested diff stands");
  }
  // The owner had its completed result; the abort adds no error and no second outcome.
  const ds = (await readOutbox(h.home, OWNER)).filter((d) => d.taskId === taskId && d.state === "queued");
  assert.deepEqual(
    ds.map((d) => d.deliveryId),
    [`${taskId}-c1-completed`],
  );
  // Waiting on it returns at once with a status that exits 0 (nextAction none).
  const w = await h.cli.request("task.wait", {
    taskIds: [taskId],
    timeoutMs: 5000,
  });
  assert.equal(w.timedOut, false);
  assert.equal(w.results[0]!.nextAction, "none");
});

test("no running status is pushed for a prompt pi never took (no API key): starting, then failed", async () => {
  const seen: string[] = [];
  let taskId = "";
  const off = h.daemon.supervisor.onStatus((live, result) => {
    if (live.rec.taskId === taskId || taskId === "") seen.push(`${live.rec.taskId}:${result.status}`);
  });
  try {
    taskId = (await h.spawn({ prompt: "MARK-WORK with no key", model: "anthropic/claude-haiku-4-5" })).taskId;
    const r = await h.wait(taskId, 60_000);
    assert.equal(r.status, "failed");
    assert.equal(r.error?.code, "PROMPT_FAILED");
    const mine = seen.filter((s) => s.startsWith(`${taskId}:`)).map((s) => s.split(":")[1]);
    assert.equal(mine.at(-1), "failed");
    assert.ok(!mine.includes("running"), `statuses pushed: ${mine.join(" → ")}`);
  } finally {
    off();
  }
});

test("dsh-herdr verify: agrees with every task dir this suite made, and names a hand-edited field (exit 1)", async () => {
  const env = { ...process.env, DSH_HERDR_HOME: h.home };
  const all = await runCli(["verify", "--all", "--json"], { env });
  const rows = JSON.parse(all.out) as { taskId: string; ok: boolean; differences: unknown[] }[];
  assert.ok(rows.length >= 3, all.out);
  assert.deepEqual(
    rows.filter((r) => !r.ok),
    [],
  );
  assert.equal(all.code, 0, all.err);
  // A completed task whose result.json is edited by hand: verify names the field, the stored value and the evidence.
  const { taskId } = await h.spawn({ prompt: "MARK-WORK for verify" });
  const r = await h.wait(taskId);
  assert.equal(r.status, "completed");
  const file = join(h.home, "tasks", taskId, "result.json");
  writeFileSync(file, JSON.stringify({ ...r, status: "failed", usage: { ...r.usage!, outputTokens: 999_999 } }));
  const one = await runCli(["verify", taskId.slice(-4)], { env });
  assert.equal(one.code, 1, one.out + one.err);
  assert.match(one.out, new RegExp(`${taskId}  status: result\\.json says failed, the journal says completed`));
  assert.match(one.out, /usage\.outputTokens: result\.json says 999999, the session says \d+/);
  assert.match(one.out, /nextAction: result\.json says none, the status says inspect/);
  const json = JSON.parse((await runCli(["verify", taskId, "--json"], { env })).out) as {
    ok: boolean;
    differences: { field: string }[];
  }[];
  assert.equal(json[0]!.ok, false);
  assert.deepEqual(json[0]!.differences.map((d) => d.field).sort(), ["nextAction", "status", "usage.outputTokens"]);
  // Put back, it agrees again (the teardown's verify --all checks every task dir).
  writeFileSync(file, JSON.stringify(r));
  assert.equal((await runCli(["verify", taskId], { env })).code, 0);
});

test("checks run when a cycle settles completed: receipts, verified and the landing in the settled result and the owner's delivery", async () => {
  const { taskId } = await h.spawn({
    prompt: "MARK-WORK with checks",
    isolated: true,
    owner: OWNER,
    checks: ["test -f work.txt", "echo broken >&2; exit 3"],
  });
  const r = await h.wait(taskId);
  assert.equal(r.status, "completed");
  assert.deepEqual(
    r.checks?.map((c) => [c.command, c.exitCode]),
    [
      ["test -f work.txt", 0],
      ["echo broken >&2; exit 3", 3],
    ],
  );
  assert.equal(r.verified, false);
  assert.ok(
    (r.warnings ?? []).some((w) => w.includes("echo broken >&2; exit 3") && /3/.test(w)),
    JSON.stringify(r.warnings),
  );
  assert.equal(r.landing?.clean, true, JSON.stringify(r.landing));
  // The check ran after the diff was taken: only the child's file is in it.
  assert.deepEqual(r.diff?.untracked.length ? r.diff.untracked : r.diff?.files, ["work.txt"]);
  const d = await until("the completed delivery", async () =>
    (await readOutbox(h.home, OWNER)).find((x) => x.deliveryId === `${taskId}-c1-completed` && x.state === "queued"),
  );
  assert.match(JSON.stringify(d.payload), /exit 3/);
  assert.match(JSON.stringify(d.payload), /"verified":false/);
});

test("dsh-herdr verify rebuilds the result: a hand-edited summary and a hand-edited diff.patch are named; an unpinned dir is checked as far as it can be", async () => {
  const env = { ...process.env, DSH_HERDR_HOME: h.home };
  const { taskId } = await h.spawn({ prompt: "MARK-WORK for the rebuild", isolated: true });
  const r = await h.wait(taskId);
  assert.equal(r.status, "completed");
  assert.deepEqual(r.diff?.untracked.length ? r.diff.untracked : r.diff?.files, ["work.txt"]);
  const dir = join(h.home, "tasks", taskId);
  // The settle pinned what it judged: result.md's copy (none here: the child reported), the diff's digest.
  const pinned = readJournal(h, taskId).find((e) => e.type === "status" && e.settled === true) as {
    pin?: { diffSha256?: string; report?: { report: string }; settled: boolean };
  };
  assert.ok(pinned?.pin, "the settled status record carries the harvest's pin");
  assert.match(pinned.pin.diffSha256 ?? "", /^[0-9a-f]{64}$/);
  assert.equal(pinned.pin.report?.report, "Wrote work.txt");
  const clean = verifyTaskDir(dir, taskId);
  assert.deepEqual(clean, { taskId, ok: true, differences: [] }, "rebuilt in full: nothing unchecked");

  const file = join(dir, "result.json");
  const original = readFileSync(file, "utf8");
  writeFileSync(file, JSON.stringify({ ...r, summary: "HAND-EDITED summary" }));
  const one = await runCli(["verify", taskId], { env });
  assert.equal(one.code, 1, one.out + one.err);
  assert.match(one.out, /summary: result\.json says HAND-EDITED summary, the task dir says Wrote work\.txt/);
  writeFileSync(file, original);

  const patchFile = join(dir, "diff.patch");
  const patch = readFileSync(patchFile, "utf8");
  writeFileSync(patchFile, patch.replace("+done", "+DONE by hand"));
  const two = await runCli(["verify", taskId, "--json"], { env });
  assert.equal(two.code, 1, two.out + two.err);
  const rows = JSON.parse(two.out) as { ok: boolean; differences: { field: string; why?: string }[] }[];
  assert.equal(rows[0]!.ok, false);
  assert.deepEqual(
    rows[0]!.differences.map((d) => d.field),
    ["diff.patch", "diff.patchBytes"],
  );
  const text = await runCli(["verify", taskId], { env });
  assert.match(
    text.out,
    /diff\.patch: the file has sha256 [0-9a-f]{12} \(\d+ bytes\), the journal pinned sha256 [0-9a-f]{12}/,
  );
  writeFileSync(patchFile, patch);
  assert.equal((await runCli(["verify", taskId], { env })).code, 0);

  // A task dir as the previous version wrote it (no pins): verified as far as it can be, not failed spuriously.
  const old = mkdtempSync(join(tmpdir(), "dsh-verify-old-"));
  try {
    cpSync(dir, old, { recursive: true, filter: (src) => !lstatSync(src).isFIFO() }); // the headless child's stdin
    const events = readFileSync(join(old, "events.jsonl"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => {
        const e = JSON.parse(l) as Record<string, unknown>;
        delete e.pin;
        return JSON.stringify(e);
      });
    writeFileSync(join(old, "events.jsonl"), events.join("\n") + "\n");
    const v = verifyTaskDir(old, taskId);
    assert.equal(v.ok, true, JSON.stringify(v.differences));
    assert.match((v.unchecked ?? []).join(" "), /summary.*written before harvests were pinned/);
    // ...and still names what it can check: a hand-edited status.
    writeFileSync(join(old, "result.json"), JSON.stringify({ ...r, status: "failed" }));
    assert.deepEqual(
      verifyTaskDir(old, taskId)
        .differences.map((d) => d.field)
        .sort(),
      ["nextAction", "status"],
    );
  } finally {
    rmSync(old, { recursive: true, force: true });
  }
});

test("a result.json rewritten after the task closed (a failed check turned verified) is served and shown as tampered, never as verified", async () => {
  const env = { ...process.env, DSH_HERDR_HOME: h.home, NO_COLOR: "1" };
  const { taskId } = await h.spawn({ prompt: "MARK-WORK then a failing check", isolated: true, checks: ["exit 3"] });
  const r = await h.wait(taskId);
  assert.equal(r.verified, false);
  await h.cli.request("task.close", { taskId });
  const file = join(h.home, "tasks", taskId, "result.json");
  const original = readFileSync(file, "utf8");
  const closed = JSON.parse(original) as AgentResult;
  // What a process the child left running wrote once the task was closed: the check passed, no warning.
  const forged = { ...closed, verified: true, checks: closed.checks!.map((c) => ({ ...c, exitCode: 0 })) };
  delete (forged as { warnings?: string[] }).warnings;
  writeFileSync(file, JSON.stringify(forged, null, 2) + "\n");
  try {
    // The daemon's answers (task.get, task.wait, and so `dsh-herdr wait` and the owner's card) name it.
    const got = await h.cli.request("task.get", { taskId });
    assert.equal(got.verified, undefined, "the forged verified is not served");
    assert.ok(
      got.warnings?.some((w) => /^tampered: result\.json disagrees with its task dir \(.*verified/.test(w)),
      JSON.stringify(got.warnings),
    );
    const waited = await runCli(["wait", taskId], { env });
    assert.match(waited.out, /warning: tampered: result\.json disagrees with its task dir/);
    const shown = await runCli(["show", taskId, "--json"], { env });
    assert.equal(shown.code, 1, shown.err);
    assert.equal((JSON.parse(shown.out) as AgentResult).verified, undefined);
    assert.match(shown.err, /tampered/);
  } finally {
    writeFileSync(file, original); // teardown verifies every task dir
  }
  const back = await h.cli.request("task.get", { taskId });
  assert.equal(back.verified, false);
  assert.ok(!(back.warnings ?? []).some((w) => w.startsWith("tampered")));
});

test("show of a closed task checks its result against the task dir without loading yaml (crew_report writes plain lines)", async () => {
  const { taskId } = await h.spawn({ prompt: "MARK-WORK for show", isolated: true });
  await h.wait(taskId);
  await h.cli.request("task.close", { taskId });
  const file = join(h.home, "tasks", taskId, "result.json");
  const original = readFileSync(file, "utf8");
  const env = { ...process.env, DSH_HERDR_HOME: h.home, NO_COLOR: "1" };
  const heavy = (loaded: string[]) =>
    loaded.filter((u) => /\/node_modules\/(yaml|string-width|execa|ajv|pino)\//.test(u));
  const shown = modulesLoadedBy(["show", taskId], env);
  assert.equal(shown.status, 0, shown.stderr);
  assert.match(shown.stdout, /Wrote work\.txt/);
  assert.ok(
    shown.loaded.some((u) => u.includes("/store/task-verify.js")),
    "show checked the result against its dir",
  );
  assert.deepEqual(heavy(shown.loaded), []);
  // The check still runs: a rewritten summary is named tampered.
  writeFileSync(file, JSON.stringify({ ...JSON.parse(original), summary: "forged" }, null, 2) + "\n");
  try {
    const forged = modulesLoadedBy(["show", taskId], env);
    assert.equal(forged.status, 1, forged.stderr);
    assert.match(forged.stderr, /tampered: result\.json disagrees with its task dir \(summary/);
  } finally {
    writeFileSync(file, original); // teardown verifies every task dir
  }
});

test("show of a task whose result.md only yaml reads loads yaml then, and finds the result untampered", async () => {
  const { taskId } = await h.spawn({ prompt: "MARK-QUOTED", isolated: true });
  const r = await h.wait(taskId);
  assert.equal(r.summary, 'Ran "npm test": ok');
  const pinned = readFileSync(join(h.home, "tasks", taskId, "result.c1.md"), "utf8");
  assert.match(pinned, /^summary: '/m, "the frontmatter is not plain lines");
  const shown = modulesLoadedBy(["show", taskId], { ...process.env, DSH_HERDR_HOME: h.home, NO_COLOR: "1" });
  assert.equal(shown.status, 0, shown.stderr);
  assert.doesNotMatch(shown.stderr, /tampered/);
  assert.ok(
    shown.loaded.some((u) => u.includes("/node_modules/yaml/")),
    "yaml was loaded for this one",
  );
});
