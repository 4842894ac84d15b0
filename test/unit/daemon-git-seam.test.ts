// The daemon asks git through one module (src/daemon/ports/git-port.ts): no other daemon module imports src/git, type
// imports included, so what the daemon needs of git is read in one place.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { repoRoot } from "../helpers/pi.js";

const src = join(repoRoot, "src");
function files(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? files(p) : p.endsWith(".ts") ? [p] : [];
  });
}

test("daemon modules reach src/git only through git-port.ts", () => {
  const door = join(src, "daemon", "ports", "git-port.ts");
  const bad: string[] = [];
  for (const f of files(join(src, "daemon"))) {
    if (f === door) continue;
    const text = readFileSync(f, "utf8");
    for (const m of text.matchAll(/(?:from\s+|import\(\s*)"(\.[^"]+)"/g)) {
      const to = relative(src, resolve(dirname(f), m[1]!));
      if (to.split("/")[0] === "git") bad.push(`${relative(src, f)} → ${to}`);
    }
  }
  assert.deepEqual(bad, [], "import these from daemon/ports/git-port.ts (add what is missing there)");
});
