// Check receipts in the AgentResult: verified from every receipt, a warning per failing or cut-off check (naming
// the command and how it ended), a newer run's warnings replacing an older run's; the result validates.
import { test } from "node:test";
import assert from "node:assert/strict";
import { validate, receipt } from "../helpers/agent-result-schema.js";
import { buildAgentResult, type HarvestInput } from "../../src/core/result/agent-result.js";
import { checkWarning, verifiedOf, withCheckWarnings } from "../../src/core/result/check-receipts.js";

const INPUT: HarvestInput = {
  taskId: "tmg3k2a1b2c3",
  role: "worker",
  agent: { name: "worker-flash-b2c3", kind: "pi", model: "m", thinking: "off" },
  timing: { createdAt: 1, settledAt: 2 },
  raw: { external: false, runtime: "idle", sessionError: false, resultStatus: "completed" },
  sessionChangedAfterPrompt: false,
  settled: true,
};

test("verified is true only when every check exited 0; a failing check's warning names command and exit code", () => {
  assert.equal(verifiedOf(undefined), undefined);
  assert.equal(verifiedOf([]), undefined);
  assert.equal(verifiedOf([receipt("npm test", 0)]), true);
  assert.equal(verifiedOf([receipt("npm test", 0), receipt("npm run lint", 2)]), false);
  assert.equal(verifiedOf([receipt("sleep 99", null, { cutOff: "timeout" })]), false);
  assert.equal(checkWarning(receipt("npm test", 0)), undefined);
  assert.match(checkWarning(receipt("npm run lint", 2))!, /^check `npm run lint` failed \(exit 2\); its output: \/h\//);
  assert.match(
    checkWarning(receipt("sleep 99", null, { cutOff: "timeout", signal: "SIGKILL" }), { timeoutMs: 3000 })!,
    /`sleep 99` was cut off: still running after 3 s/,
  );
  assert.match(
    checkWarning(receipt("yes", null, { cutOff: "output" }), { outputCapBytes: 1024 })!,
    /more than 1024 bytes/,
  );
  assert.deepEqual(withCheckWarnings(["other", "check `old` failed (exit 1); x"], [receipt("npm test", 0)]), ["other"]);
});

test("buildAgentResult carries the receipts, verified and landing, and warns on the failing check", () => {
  const checks = [receipt("npm test", 0), receipt("npm run lint", 1)];
  const landing = { baseBranch: "main", baseHead: "a".repeat(40), clean: false, conflicts: ["src/x.ts"] };
  const r = buildAgentResult({ ...INPUT, checks, landing });
  assert.ok(validate(r), JSON.stringify(validate.errors));
  assert.deepEqual(r.checks, checks);
  assert.equal(r.verified, false);
  assert.deepEqual(r.landing, landing);
  assert.ok(
    r.warnings?.some((w) => w.startsWith("check `npm run lint` failed (exit 1)")),
    String(r.warnings),
  );
  const none = buildAgentResult(INPUT);
  assert.equal(none.checks, undefined);
  assert.equal(none.verified, undefined);
  assert.ok(validate(none));
});
