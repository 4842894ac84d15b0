#!/usr/bin/env node
// Runs the compiled tests with node's own test runner. Optional args pick folders under test/
// (unit, integration, e2e, reliability) or single files (integration/pi-retry); with none, every folder runs.
// A file may be named as people type it, too: test/unit/core-ids.test.ts (or .js, or dist/test/...), so
// `npm test -- test/unit/core-ids.test.ts` runs that one file after the build.
// An arg starting with "!" leaves that file out of the folders picked (`reliability !reliability/abuse`).
import { readdirSync, statSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { reportLeftovers, newRunId, RUN_MARKER } from "./leftovers.mjs";

const root = join(import.meta.dirname, "..", "dist", "test");
if (!existsSync(root)) {
  console.error("run-tests: dist/test is missing; run `npm run build` first");
  process.exit(2);
}
/** `test/unit/x.test.ts`, `./dist/test/unit/x.test.js`, `unit/x` all name the same test: `unit/x`. */
const asTestName = (a) =>
  a
    .replace(/^\.\//, "")
    .replace(/^dist\//, "")
    .replace(/^test\//, "")
    .replace(/\.test\.[cm]?[jt]s$/, "")
    .replace(/\/$/, "");
const args = process.argv.slice(2).map((a) => (a.startsWith("!") ? `!${asTestName(a.slice(1))}` : asTestName(a)));
const folders = args.filter((a) => !a.startsWith("!"));
const left = new Set(args.filter((a) => a.startsWith("!")).map((a) => join(root, `${a.slice(1)}.test.js`)));
for (const f of left)
  if (!existsSync(f)) {
    console.error(`run-tests: ${f} (to leave out) is not a test file under dist/test`);
    process.exit(2);
  }
let files = [];
const walk = (dir) => {
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p);
    else if (name.endsWith(".test.js")) files.push(p);
  }
};
for (const f of folders.length ? folders : ["unit", "integration", "e2e", "reliability"]) {
  const dir = join(root, f);
  if (existsSync(dir)) walk(dir);
  else if (existsSync(`${dir}.test.js`)) files.push(`${dir}.test.js`);
  else {
    console.error(`run-tests: ${f} is neither a folder nor a test file under dist/test`);
    process.exit(2);
  }
}
files = files.filter((f) => !left.has(f));
if (files.length === 0) {
  console.error("run-tests: no test files found");
  process.exit(1);
}
const concurrency = process.env.DSH_TEST_CONCURRENCY ?? "2";
// Everything the tests start inherits this run's marker, so the sweep below ends only this run's processes.
const runId = newRunId();
// The user's git config (~/.gitconfig, /etc/gitconfig) is never read: signing, hooks, aliases or a default branch
// of theirs would change what the tests see. Git gets a global config of this run's own: an identity for the
// commits tests make, main as the default branch, no signing. (A test may still point GIT_CONFIG_GLOBAL elsewhere.)
const gitDir = mkdtempSync(join(tmpdir(), "dsh-test-gitconfig-"));
const gitConfig = join(gitDir, "gitconfig");
writeFileSync(
  gitConfig,
  "[user]\n\tname = dsh-herdr test\n\temail = test@dsh-herdr.invalid\n[init]\n\tdefaultBranch = main\n" +
    "[commit]\n\tgpgsign = false\n[tag]\n\tgpgsign = false\n",
);
const r = spawnSync(
  process.execPath,
  ["--test", `--test-concurrency=${concurrency}`, "--test-reporter=spec", ...files],
  {
    stdio: "inherit",
    env: { ...process.env, [RUN_MARKER]: runId, GIT_CONFIG_GLOBAL: gitConfig, GIT_CONFIG_NOSYSTEM: "1" },
  },
);
rmSync(gitDir, { recursive: true, force: true });
// Every test ends what it started: a pi child or wrapper of this run still running now is a leak, and fails the run.
const leaked = reportLeftovers(join(import.meta.dirname, ".."), "run-tests", runId);
process.exit(leaked > 0 ? 1 : (r.status ?? 1));
