// docs/result-contract.md says what diff.files and diff.untracked hold as the harvest fills them
// (test/integration/git-diff.test.ts pins the behaviour): files are every path the patch changes, new untracked files
// included; untracked are the working tree's untracked files, those already there at spawn included (dirtyAtStart
// lists them as `?? path`).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "../helpers/pi.js";

const doc = readFileSync(join(repoRoot, "docs", "result-contract.md"), "utf8");
const row = (field: string) => doc.split("\n").find((l) => l.startsWith(`| \`${field}\` |`)) ?? "";

test("the contract doc's diff.files and diff.untracked rows say what the harvest puts in them", () => {
  const files = row("diff.files");
  assert.doesNotMatch(files, /Changed tracked files\.\s*\|?$/, files);
  assert.match(files, /untracked/i, files);
  const untracked = row("diff.untracked");
  assert.match(untracked, /dirtyAtStart/, untracked);
});
