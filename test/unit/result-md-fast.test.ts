// The frontmatter fast path (plainFrontmatter in src/core/result/result-md.ts) against the YAML library it stands in for:
// whatever it takes, it must read exactly as `yaml` reads it; what crew_report writes must take it; the rest falls
// back. Inputs are generated from values and keys chosen to sit on YAML's edges (indicators, comments, core-schema
// words, quotes, escapes, odd line breaks), with a fixed seed so a failure replays.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parse as parseYaml } from "yaml";
import { parseResultMd, plainFrontmatter, YAML_OPTIONS } from "../../src/core/result/result-md.js";
import { resultMdFor } from "../../src/extensions/child-report.js";

const VALUES = [
  "completed",
  "blocked",
  "Fixed the retry loop, added jitter (and a test)",
  "src/a.ts, test/a.test.ts",
  "a = b + c - d; e/f",
  "_private",
  "(parenthesised)",
  "two  spaces",
  "trailing   ",
  "true",
  "False",
  "NULL",
  "null",
  "~",
  "yes",
  "No",
  "on",
  "1.5",
  "42",
  "0x1F",
  ".inf",
  "-x",
  "- item",
  "a: b",
  "a:b",
  "a #comment",
  "a#b",
  "#x",
  "[a, b]",
  "{a: b}",
  "&anchor",
  "*alias",
  "!tag x",
  "|",
  ">",
  "'single'",
  "'it''s'",
  '"double"',
  '"with # and: colon"',
  '"esc \\n aped"',
  '"tab\\tinside"',
  '"unterminated',
  '"a" trailing',
  '""',
  '"é ✓"',
  "é",
  "a\u2028b",
  '"a\u2028b"',
  '"a\u0085b"',
  "x\ty",
  "",
  "%percent",
  "@at",
  "`tick`",
  "?q",
  "It's done",
  'say "hi" twice',
  "12 tests passed",
  "3.5 hours",
  "1e3",
  "0o17",
  "1 ",
  "+1",
];
const COMMON = [
  "completed",
  "Fixed the retry loop, added jitter (and a test)",
  "src/a.ts, test/a.test.ts",
  "It's done",
  "12 tests passed",
  '"with # and: colon"',
];
const KEYS = ["status", "summary", "files", "tests", "Status", "a_b", "x1", "_k", "1k", "a-b", "null", "true"];

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

test("every frontmatter the fast path takes reads exactly as the YAML library reads it; the rest falls back", () => {
  const rand = rng(15);
  const pick = <T>(xs: T[]): T => xs[Math.floor(rand() * xs.length)]!;
  let taken = 0;
  let fellBack = 0;
  for (let i = 0; i < 20_000; i++) {
    const lines: string[] = [];
    for (let n = 1 + Math.floor(rand() * 4); n > 0; n--) {
      const r = rand();
      if (r < 0.03) lines.push("");
      else if (r < 0.05) lines.push("# comment");
      else if (r < 0.07) lines.push(`  ${pick(VALUES)}`);
      // Half the values from the ones crew_report writes, so whole documents take the fast path often enough.
      else
        lines.push(
          `${pick(KEYS)}:${pick([" ", " ", " ", "  ", "\t", ""])}${rand() < 0.5 ? pick(COMMON) : pick(VALUES)}`,
        );
    }
    const eol = rand() < 0.1 ? "\r\n" : "\n";
    const text = lines.join(eol) + (rand() < 0.9 ? eol : "");
    const fast = plainFrontmatter(text);
    if (fast === undefined) {
      fellBack++;
      continue;
    }
    taken++;
    let lib: unknown;
    assert.doesNotThrow(
      () => {
        lib = parseYaml(text, YAML_OPTIONS);
      },
      `the library refuses what the fast path took: ${JSON.stringify(text)}`,
    );
    assert.deepEqual(fast, lib, `fast path and library disagree on ${JSON.stringify(text)}`);
  }
  // Both sides ran a real share of the inputs (a fast path that never fires, or fires on everything, tests nothing).
  assert.ok(taken > 1_000, `fast path took ${taken}`);
  assert.ok(fellBack > 2_000, `fell back ${fellBack}`);
});

test("what crew_report writes takes the fast path and parses as before", () => {
  for (const report of [
    "Bench report for t1\n\nAll good.",
    "Fixed: the retry loop (added jitter) #3",
    "It's done",
    "Tests: 12 passed",
    "done",
  ]) {
    const md = resultMdFor({ outcome: "completed", report });
    const yamlText = md.split("\n---\n")[0]!.replace(/^---\n/, "") + "\n";
    assert.deepEqual(plainFrontmatter(yamlText), parseYaml(yamlText, YAML_OPTIONS), JSON.stringify(md));
    assert.notEqual(plainFrontmatter(yamlText), undefined, `crew_report's ${JSON.stringify(yamlText)} falls back`);
    const parsed = parseResultMd(md);
    assert.equal(parsed.meta.status, "completed");
    assert.deepEqual(parsed.warnings, []);
  }
});
