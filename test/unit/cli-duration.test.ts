// `--timeout 5` is refused, not read as 5 ms: a bare number below 1000 names the units to write instead.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseDuration } from "../../src/cli/common/duration.js";
import { exitCodeForError } from "../../src/cli/common/exit-codes.js";
import type { DshError } from "../../src/core/errors.js";

test("a bare number below 1000 is a usage error naming s, m and ms", () => {
  for (const bare of ["5", "30", "999", "0"])
    assert.throws(
      () => parseDuration(bare, "--timeout"),
      (e: DshError) => {
        assert.equal(e.code, "BAD_PARAMS");
        assert.equal(exitCodeForError(e), 2);
        assert.match(e.message, new RegExp(`--timeout: "${bare}" has no unit.*write ${bare}s, ${bare}m or ${bare}ms`));
        return true;
      },
    );
});

test("a bare number from 1000 up stays milliseconds, and units work as before", () => {
  assert.equal(parseDuration("1000"), 1000);
  assert.equal(parseDuration("90000"), 90_000);
  assert.equal(parseDuration("5s"), 5000);
  assert.equal(parseDuration("5ms"), 5);
});
