// docs/errors.md lists every error code, and nothing else; asDshError keeps what it wrapped.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { asDshError, DshError, ERROR_CODES } from "../../src/core/errors.js";
import { repoRoot } from "../helpers/pi.js";

test("docs/errors.md and ERROR_CODES agree both ways", () => {
  const doc = readFileSync(join(repoRoot, "docs", "errors.md"), "utf8");
  const documented = [...doc.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]!);
  assert.deepEqual([...documented].sort(), [...ERROR_CODES].sort());
  assert.equal(new Set(documented).size, documented.length, "a code is listed twice");
});

test("asDshError keeps a DshError as it is and wraps anything else with its cause", () => {
  const own = new DshError("TIMEOUT", "x");
  assert.equal(asDshError(own), own);
  const raw = new Error("EACCES: permission denied");
  const wrapped = asDshError(raw, "HOME_UNWRITABLE");
  assert.equal(wrapped.code, "HOME_UNWRITABLE");
  assert.equal(wrapped.message, raw.message);
  assert.equal(wrapped.cause, raw);
});
