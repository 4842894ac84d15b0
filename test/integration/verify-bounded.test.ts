// verify and show against task dirs built by hand as the daemon writes them (a pinned harvest, result.json from
// resultFromPin): `verify --all` gives every task its verdict when one task's journal is too large to read (a sparse
// 700 MB file: no disk used) or a task dir is a symlink out of the home; `show` names a result.json rewritten after
// its settle as tampered instead of printing its forged `verified`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, symlinkSync, truncateSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resultFromPin, type HarvestPin } from "../../src/core/lifecycle/harvest-pin.js";
import { landFieldsOf } from "../../src/core/result/check-receipts.js";
import type { VerifyRecord } from "../../src/core/lifecycle/verify.js";
import type { AgentResult, CheckReceipt } from "../../src/core/types.js";
import { runCliSync } from "../helpers/cli.js";

const RESULT_MD = "---\nstatus: completed\nsummary: Did the thing\n---\nThe body.\n";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

/** A settled task dir as the daemon leaves it; `receipts`: a check run recorded in task.json after the settle. */
function writeTask(dir: string, taskId: string, receipts?: CheckReceipt[]): AgentResult {
  mkdirSync(dir, { recursive: true });
  const record: VerifyRecord = {
    taskId,
    role: "worker",
    brief: "b",
    cwd: "/repo",
    owner: "cli",
    sessionPath: join(dir, "session.jsonl"),
    resultPath: join(dir, "result.md"),
    cycle: 1,
    ...(receipts ? { checkRun: { cycle: 1, receipts } } : {}),
  };
  const pin: HarvestPin = {
    agent: { name: "worker-x", kind: "pi", model: "m/x", thinking: "off", runtime: "headless" },
    timing: { createdAt: 1000, promptedAt: 1100, settledAt: 1500 },
    runtime: "idle",
    settled: true,
    fresh: false,
    resultMd: { file: "result.c1.md", sha256: sha(RESULT_MD) },
  };
  const reason = { kind: "agent_end", stopReason: "stop" } as const;
  const events = [
    { type: "prompt_sent", cycle: 1 },
    { type: "settle", cycle: 1, why: "agent_end", reason },
    { type: "status", status: "completed", cycle: 1, settled: true, sessionOffset: 0, pin },
  ];
  const result = resultFromPin(record, pin, {
    resultMd: { meta: { status: "completed", summary: "Did the thing" }, body: "The body.", warnings: [] },
    reason,
    ...landFieldsOf(record),
  });
  writeFileSync(join(dir, "task.json"), JSON.stringify(record));
  writeFileSync(join(dir, "events.jsonl"), events.map((e) => JSON.stringify(e)).join("\n") + "\n");
  writeFileSync(join(dir, "result.c1.md"), RESULT_MD);
  writeFileSync(join(dir, "result.json"), JSON.stringify(result, null, 2) + "\n");
  return result;
}

const ids = { healthy: "t00000000aaa", huge: "t00000000bbb", linked: "t00000000ccc" };

test("verify --all: a 700 MB journal gets a 'too large' verdict, a task dir linking out of the home is not followed, the healthy task still agrees", () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-verify-bounded-"));
  const home = join(dir, "home");
  writeTask(join(home, "tasks", ids.healthy), ids.healthy);
  writeTask(join(home, "tasks", ids.huge), ids.huge);
  // Sparse: 700 MB long, no block written (over the 0x1fffffe8-character string limit once read whole).
  truncateSync(join(home, "tasks", ids.huge, "events.jsonl"), 700 * 1024 * 1024);
  writeTask(join(dir, "elsewhere", ids.linked), ids.linked);
  symlinkSync(join(dir, "elsewhere", ids.linked), join(home, "tasks", ids.linked));
  const env = { ...process.env, DSH_HERDR_HOME: home, NO_COLOR: "1" };

  const r = runCliSync(["verify", "--all", "--json"], { env, timeoutMs: 60_000 });
  assert.equal(r.code, 1, `${r.out}\n${r.err}`);
  const v = JSON.parse(r.out) as { taskId: string; ok: boolean; refused?: string }[];
  const by = new Map(v.map((x) => [x.taskId, x]));
  assert.equal(by.get(ids.healthy)?.ok, true, JSON.stringify(v));
  assert.equal(by.get(ids.huge)?.ok, false);
  assert.match(by.get(ids.huge)?.refused ?? "", /events\.jsonl is too large to verify \(734003200 bytes/);
  assert.equal(by.get(ids.linked)?.ok, false);
  assert.match(by.get(ids.linked)?.refused ?? "", /symlink/);

  const text = runCliSync(["verify", "--all"], { env, timeoutMs: 60_000 });
  assert.equal(text.code, 1, text.err);
  assert.match(text.out, new RegExp(`${ids.healthy}  ok`));
  assert.match(text.out, new RegExp(`${ids.huge}  not verified: events\\.jsonl is too large`));
  assert.match(text.out, /1 agree, 0 differ, 2 not verified \(of 3\)/);

  // A result.json that is a symlink out of the task dir is not read either.
  const forged = join(dir, "forged.json");
  writeFileSync(forged, "{}");
  const h2 = "t00000000ddd";
  writeTask(join(home, "tasks", h2), h2);
  const rj = join(home, "tasks", h2, "result.json");
  unlinkSync(rj);
  symlinkSync(forged, rj);
  const l = runCliSync(["verify", h2, "--json"], { env, timeoutMs: 60_000 });
  const lv = JSON.parse(l.out) as { ok: boolean; refused?: string }[];
  assert.equal(lv[0]?.ok, false, l.out);
  assert.match(lv[0]?.refused ?? "", /result\.json is a symlink/);
});

test("show: a result.json rewritten after its settle (a failed check turned verified) is named tampered, never shown as verified", () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-show-tampered-"));
  const home = join(dir, "home");
  const taskId = "t00000000eee";
  const failed: CheckReceipt = {
    command: "npm test",
    exitCode: 1,
    durationMs: 10,
    startedAt: 1600,
    logPath: join(home, "tasks", taskId, "check-1.log"),
    outputTail: "1 failing",
  };
  const real = writeTask(join(home, "tasks", taskId), taskId, [failed]);
  assert.equal(real.verified, false);
  const env = { ...process.env, DSH_HERDR_HOME: home, NO_COLOR: "1" };
  const honest = runCliSync(["show", taskId, "--json"], { env });
  assert.equal(honest.code, 0, honest.err);
  assert.equal((JSON.parse(honest.out) as AgentResult).verified, false);

  // What a child left running after the settle wrote: its check passed, no warnings.
  const forged = { ...real, verified: true, checks: [{ ...failed, exitCode: 0 }] };
  delete (forged as { warnings?: string[] }).warnings;
  writeFileSync(join(home, "tasks", taskId, "result.json"), JSON.stringify(forged, null, 2));

  const card = runCliSync(["show", taskId], { env });
  assert.equal(card.code, 1, card.err);
  assert.match(
    card.out,
    /warning: tampered: result\.json disagrees with its task dir \(checks, verified, warnings\): it was changed after the daemon wrote it/,
  );
  assert.match(card.out, new RegExp(`dsh-herdr verify ${taskId}`));
  const json = runCliSync(["show", taskId, "--json"], { env });
  assert.equal(json.code, 1, json.err);
  const shown = JSON.parse(json.out) as AgentResult;
  assert.equal(shown.verified, undefined, "a forged verified is not shown");
  assert.ok(shown.warnings?.some((w) => w.startsWith("tampered: ")));
  assert.match(json.err, /tampered/);
  // `result` prints the file as it is on disk, and says what it is.
  const raw = runCliSync(["result", taskId], { env });
  assert.equal(raw.code, 1, raw.err);
  assert.match(raw.out, /"verified": true/);
  assert.match(raw.err, /tampered/);
});
