#!/usr/bin/env node
// Runs `tsc -p tsconfig.json` only when dist/ is missing or older than a source: `npm ci` already built it (the
// prepare script), so `npm run demo` right after it starts at once instead of compiling everything a second time.
// tsc rewrites every output on each build, so one output's time is the build's time.
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";

const root = join(import.meta.dirname, "..");
const stamp = join(root, "dist", "src", "cli", "main.js");

/** The newest modification time among the files tsc reads (tsconfig's include folders and the config itself). */
function newestSource() {
  let newest = statSync(join(root, "tsconfig.json")).mtimeMs;
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".ts")) newest = Math.max(newest, statSync(p).mtimeMs);
    }
  };
  for (const d of ["src", "test", "fixtures", "bench"]) if (existsSync(join(root, d))) walk(join(root, d));
  return newest;
}

if (existsSync(stamp) && statSync(stamp).mtimeMs >= newestSource()) process.exit(0);
console.error("build: dist/ is missing or older than the sources; running tsc -p tsconfig.json");
const r = spawnSync(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"], {
  cwd: root,
  stdio: "inherit",
});
if (r.error) {
  console.error(`build: could not run tsc (${r.error.message}); run \`npm ci\` first`);
  process.exit(1);
}
process.exit(r.status ?? 1);
