// docs/errors.md lists every error code, and nothing else; asDshError keeps what it wrapped; the wire form of an error.
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

test("an error on the wire is {code, message, data}: its details as data, never a key named like a secret", () => {
  const e = new DshError("BAD_PARAMS", "m", { field: "timeoutMs", secret: "s3", ownerToken: "t0", problem: "p" });
  assert.deepEqual(e.toWire(), {
    code: "BAD_PARAMS",
    message: "m",
    data: { field: "timeoutMs", problem: "p" },
  });
  // No details, or only secret-named ones: no data at all, as before.
  assert.deepEqual(new DshError("TIMEOUT", "t").toWire(), { code: "TIMEOUT", message: "t" });
  assert.deepEqual(new DshError("TIMEOUT", "t", { token: "x" }).toWire(), { code: "TIMEOUT", message: "t" });
});
