import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { normalizeBody, parseResultMd, renderResultMd } from "../../src/core/result/result-md.js";

const SPEC_EXAMPLE = `---
status: completed
summary: added retry with jitter
tests: npm test (42 passed)
files: src/http.ts, src/http.test.ts
---

Retries now back off with jitter.

Evidence: npm test.
`;

test("the spec's example: four meta keys, files split, body text", () => {
  const r = parseResultMd(SPEC_EXAMPLE);
  assert.deepEqual(r.meta, {
    status: "completed",
    summary: "added retry with jitter",
    tests: "npm test (42 passed)",
    files: "src/http.ts, src/http.test.ts",
  });
  assert.deepEqual(r.files, ["src/http.ts", "src/http.test.ts"]);
  assert.equal(r.body, "Retries now back off with jitter.\n\nEvidence: npm test.");
  assert.deepEqual(r.warnings, []);
});

test("unknown keys are ignored; scalars become strings; a files list is accepted; other non-scalars warn", () => {
  const r = parseResultMd(
    "---\nstatus: failed\nextra: {a: 1}\ntests: 42\nsummary: true\nfiles: [a.ts, ' b.ts ']\n---\nbody",
  );
  assert.deepEqual(r.meta, { status: "failed", tests: "42", summary: "true", files: "a.ts, b.ts" });
  assert.deepEqual(r.files, ["a.ts", "b.ts"]);
  assert.deepEqual(r.warnings, []);
  const bad = parseResultMd("---\nstatus: completed\nsummary:\n  nested: map\n---\nbody");
  assert.deepEqual(bad.meta, { status: "completed" });
  assert.match(bad.warnings[0] ?? "", /"summary" is not text/);
  assert.equal(bad.body, "body");
});

test("no frontmatter: the whole text is the body, no warning", () => {
  const r = parseResultMd("# Report\n\nAll good.\n");
  assert.deepEqual(r.meta, {});
  assert.equal(r.body, "# Report\n\nAll good.");
  assert.deepEqual(r.warnings, []);
  assert.equal(r.files, undefined);
});

test("malformed frontmatter never throws: warning naming the problem, whole text as body", () => {
  const cases: [string, RegExp][] = [
    ["---\nstatus: completed\nsummary: never closed\n", /not closed/],
    ["---\nstatus: [unclosed\n---\nbody", /not valid YAML/],
    ["---\n- a\n- b\n---\nbody", /not a key: value map \(got a list\)/],
    ["---\njust a string\n---\nbody", /not a key: value map \(got string\)/],
  ];
  for (const [text, why] of cases) {
    const r = parseResultMd(text);
    assert.deepEqual(r.meta, {});
    assert.equal(r.body, normalizeBody(text), text);
    assert.equal(r.warnings.length, 1);
    assert.match(r.warnings[0]!, why);
  }
});

test("empty frontmatter, CRLF line endings and a BOM are read", () => {
  assert.deepEqual(parseResultMd("---\n---\nbody").meta, {});
  assert.equal(parseResultMd("---\n---\nbody").body, "body");
  const crlf = parseResultMd("\uFEFF---\r\nstatus: blocked\r\nsummary: need a key\r\n---\r\nwhich key?\r\n");
  assert.equal(crlf.meta.status, "blocked");
  assert.equal(crlf.meta.summary, "need a key");
  assert.equal(crlf.body, "which key?");
});

test("over the size bound: body truncated on a character boundary, with a warning", () => {
  const text = "---\nstatus: completed\n---\n" + "é".repeat(1000);
  const r = parseResultMd(text, { maxBytes: 1001 });
  assert.equal(r.meta.status, "completed");
  assert.match(r.warnings[0] ?? "", /over 1001 bytes/);
  assert.ok(new TextEncoder().encode(r.body).length <= 1001);
  assert.ok(!r.body.includes("\uFFFD"), "no broken character");
  assert.equal(parseResultMd("a".repeat(100), { maxBytes: 100 }).warnings.length, 0, "exactly at the bound is fine");
});

test("binary content: warning, empty body", () => {
  const r = parseResultMd("---\nstatus: completed\n---\nPK\u0003\u0004\u0000\u0000");
  assert.deepEqual(r, { meta: {}, body: "", warnings: [r.warnings[0]!] });
  assert.match(r.warnings[0]!, /binary/);
});

test("renderResultMd reads back identically (property), including awkward values", () => {
  const text = fc.string({ unit: "grapheme" });
  const arb = fc.record({
    status: fc.constantFrom("completed", "failed", "blocked"),
    summary: fc.option(text, { nil: undefined }),
    tests: fc.option(text, { nil: undefined }),
    files: fc.option(fc.array(fc.stringMatching(/^[a-z0-9/._-]{1,20}$/), { minLength: 1, maxLength: 4 }), {
      nil: undefined,
    }),
  });
  fc.assert(
    fc.property(arb, text, (fields, body) => {
      const back = parseResultMd(renderResultMd(fields, body));
      assert.deepEqual(back.warnings, []);
      assert.equal(back.meta.status, fields.status);
      assert.equal(back.meta.summary, fields.summary?.trim());
      assert.equal(back.meta.tests, fields.tests?.trim());
      assert.deepEqual(back.files, fields.files);
      assert.equal(back.body, normalizeBody(body));
    }),
    { numRuns: 300 },
  );
  const tricky = renderResultMd(
    { status: "completed", summary: "a: b # not a comment\n---\nstill summary", tests: "123", files: "x.ts, y.ts" },
    "---\nbody with a rule\n",
  );
  const back = parseResultMd(tricky);
  assert.equal(back.meta.summary, "a: b # not a comment\n---\nstill summary");
  assert.equal(back.meta.tests, "123");
  assert.equal(back.body, "---\nbody with a rule");
});
