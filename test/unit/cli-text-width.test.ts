// Terminal widths without loading string-width for plain text (its emoji tables cost a CLI call ~50 ms), and the
// same answers as string-width wherever it is skipped.
import { test } from "node:test";
import assert from "node:assert/strict";
import stringWidth from "string-width";
import { columns, roughWidth, textWidth, truncate } from "../../src/cli/format/text.js";

const SAMPLES = [
  "",
  "plain ascii ~!@#$%^&*()_+{}|:<>?",
  "café naïve Ærø ±×÷ ¼",
  "… · › → ↑↓ ✓ ✗ ─ │ • █ – — ‘’“”",
  "soft\u00adhyphen",
  "重试 with 日本語",
  "✅ done 🎉",
  "e\u0301 combining",
  "\x1b[31mred\x1b[0m",
  "flag 🇫🇷 and family 👨‍👩‍👧",
  "✔️ with VS16",
];

test("textWidth answers as string-width does, for plain and wide text alike", () => {
  for (const s of SAMPLES) assert.equal(textWidth(s), stringWidth(s), JSON.stringify(s));
  for (const s of SAMPLES) for (const ch of s) assert.equal(textWidth(ch), stringWidth(ch), JSON.stringify(ch));
});

test("truncate and columns measure wide text in columns, plain text by its length", () => {
  assert.equal(truncate("abcdef", 4), "abc…");
  assert.equal(truncate("重试重试", 5), "重试…");
  assert.deepEqual(
    columns([
      ["ab", "x"],
      ["重", "y"],
    ]),
    ["ab  x", "重  y"],
  );
});

test("roughWidth (an older Node, where string-width cannot be required) agrees on common text", () => {
  for (const s of [
    "plain",
    "café",
    "重试 with 日本語",
    "✅ done",
    "e\u0301",
    "\x1b[31mred\x1b[0m",
    "soft\u00adhyphen",
    "🎉",
  ])
    assert.equal(roughWidth(s), stringWidth(s), JSON.stringify(s));
});
