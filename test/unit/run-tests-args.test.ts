// `npm test -- test/unit/core-ids.test.ts`: scripts/run-tests.mjs takes a test file as people type it (the source
// path), as well as the short form `unit/core-ids`; a name that is no test still fails naming it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join } from "node:path";

const root = join(import.meta.dirname, "..", "..", "..");
const runTests = (arg: string) =>
  spawnSync(process.execPath, [join(root, "scripts", "run-tests.mjs"), arg], {
    cwd: root,
    encoding: "utf8",
    // Without the outer runner's context, so the inner node --test reports as on a terminal.
    env: { ...process.env, DSH_TEST_CONCURRENCY: "1", NODE_TEST_CONTEXT: undefined },
    timeout: 120_000,
  });

for (const arg of ["test/unit/core-ids.test.ts", "./test/unit/core-ids.test.ts", "dist/test/unit/core-ids.test.js"])
  test(`run-tests.mjs ${arg} runs that one file`, () => {
    const r = runTests(arg);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /ℹ pass [1-9]/);
    assert.match(r.stdout, /ℹ fail 0/);
  });

test("run-tests.mjs with a name that is no test fails naming it", () => {
  const r = runTests("test/unit/no-such.test.ts");
  assert.equal(r.status, 2);
  assert.match(r.stderr, /unit\/no-such is neither a folder nor a test file/);
});
