import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dirname, "..", "..", "..");
const bin = join(root, "bin", "dsh-herdr");

test("bin/dsh-herdr --version prints the package version", () => {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };
  const out = execFileSync(process.execPath, [bin, "--version"], { encoding: "utf8" });
  assert.equal(out.trim(), pkg.version);
});

test("bin/dsh-herdr --help names the program", () => {
  const out = execFileSync(process.execPath, [bin, "--help"], { encoding: "utf8" });
  assert.match(out, /Usage: dsh-herdr/);
});
