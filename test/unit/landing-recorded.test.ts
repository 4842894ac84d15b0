// What task.check and task.land write, as a table: a record and an outcome (a landing found or made, a check run)
// give the record's new fields and the AgentResult that says them (checks, verified, check warnings, landing); the
// same pure function serves a live task (its runner writes) and a closed one (the store writes). Each result validates.
import { test } from "node:test";
import assert from "node:assert/strict";
import { validate, receipt } from "../helpers/agent-result-schema.js";
import { buildAgentResult } from "../../src/core/result/agent-result.js";
import { type CheckRun, type LandingOutcome, landingRecorded } from "../../src/core/result/check-receipts.js";
import type { AgentResult, CheckReceipt, Landing } from "../../src/core/types.js";

/** A completed result, its own warnings left out (a row adds some). */
const { warnings: _none, ...BASE }: AgentResult = buildAgentResult({
  taskId: "tmg3k2a1b2c3",
  role: "worker",
  agent: { name: "worker-flash-b2c3", kind: "pi", model: "m", thinking: "off" },
  timing: { createdAt: 1, settledAt: 2 },
  raw: { external: false, runtime: "idle", sessionError: false, resultStatus: "completed" },
  sessionChangedAfterPrompt: false,
  settled: true,
});

const measured: Landing = { baseBranch: "main", baseHead: "a".repeat(40), clean: true, conflicts: [], checkedAt: 5 };
const landed: Landing = { ...measured, landedAs: "b".repeat(40), strategy: "merge", landedAt: 9 };
const passed: CheckRun = { cycle: 2, at: 7, receipts: [receipt("npm test", 0)] };
const failed: CheckRun = { cycle: 2, at: 8, receipts: [receipt("npm test", 1)] };
const stale: CheckRun = { cycle: 1, at: 3, receipts: [receipt("npm test", 1)] };

interface Row {
  why: string;
  rec: { cycle: number; checkRun?: CheckRun; landing?: Landing };
  base?: Partial<AgentResult>;
  outcome: LandingOutcome;
  /** The record's fields after it. */
  recAfter: { checkRun?: CheckRun; landing?: Landing };
  /** The result's fields after it (undefined: absent). */
  checks?: CheckReceipt[];
  verified?: boolean;
  warnings?: string[];
  landing?: Landing;
}

const TABLE: Row[] = [
  {
    why: "nothing recorded, nothing found: the result is the base",
    rec: { cycle: 2 },
    outcome: {},
    recAfter: {},
  },
  {
    why: "an on-demand check that passes: receipts, verified, no warning",
    rec: { cycle: 2 },
    outcome: { checkRun: passed },
    recAfter: { checkRun: passed },
    checks: passed.receipts,
    verified: true,
  },
  {
    why: "a failing check: verified false and its warning, beside the base's own warnings",
    rec: { cycle: 2 },
    base: { warnings: ["the child said so"] },
    outcome: { checkRun: failed },
    recAfter: { checkRun: failed },
    checks: failed.receipts,
    verified: false,
    warnings: [
      "the child said so",
      "check `npm test` failed (exit 1); its output: /h/tasks/tmg3k2a1b2c3/checks/npmtest.log",
    ],
  },
  {
    why: "a passing run replaces an older run's check warning (and drops warnings when none is left)",
    rec: { cycle: 2, checkRun: failed },
    base: { warnings: ["check `npm test` failed: exit 1; its output: x"] },
    outcome: { checkRun: passed },
    recAfter: { checkRun: passed },
    checks: passed.receipts,
    verified: true,
  },
  {
    why: "a check run of an earlier cycle says nothing of this cycle's work",
    rec: { cycle: 2 },
    outcome: { checkRun: stale },
    recAfter: { checkRun: stale },
  },
  {
    why: "a measured landing (dry run, a refusal that measured it) goes in as it is",
    rec: { cycle: 2 },
    outcome: { landing: measured },
    recAfter: { landing: measured },
    landing: measured,
  },
  {
    why: "a landing keeps the record's check run of this cycle in the result",
    rec: { cycle: 2, checkRun: passed, landing: measured },
    outcome: { landing: landed },
    recAfter: { checkRun: passed, landing: landed },
    checks: passed.receipts,
    verified: true,
    landing: landed,
  },
  {
    why: "a landing with its merged-tree checks: both recorded, both said",
    rec: { cycle: 2, landing: measured },
    outcome: { landing: landed, checkRun: passed },
    recAfter: { checkRun: passed, landing: landed },
    checks: passed.receipts,
    verified: true,
    landing: landed,
  },
];

for (const row of TABLE)
  test(`landingRecorded: ${row.why}`, () => {
    const base: AgentResult = { ...BASE, ...row.base };
    const before = structuredClone(row.rec);
    const { rec, result } = landingRecorded(row.rec, base, row.outcome);
    assert.deepEqual(row.rec, before, "the record passed in is not changed (the writer applies the new one)");
    assert.deepEqual(rec, { cycle: row.rec.cycle, ...row.recAfter });
    assert.deepEqual(result.checks, row.checks);
    assert.equal(result.verified, row.verified);
    assert.deepEqual(result.warnings, row.warnings ?? (row.checks ? undefined : base.warnings));
    assert.deepEqual(result.landing, row.landing);
    const { checks: _c, verified: _v, warnings: _w, landing: _l, ...rest } = result;
    const { checks: _bc, verified: _bv, warnings: _bw, landing: _bl, ...baseRest } = base;
    assert.deepEqual(rest, baseRest, "nothing else of the result changes");
    assert.ok(validate(result), JSON.stringify(validate.errors));
  });
