// The folder layout is the architecture (docs/architecture.md): checked from the imports, so it cannot drift.
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
/** Every module a file imports at run time (type-only imports are erased and do not count). */
function imports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const out: string[] = [];
  for (const m of text.matchAll(/^\s*(import|export)\s+(?!type\b)[^;]*?from\s+"([^"]+)"/gm)) out.push(m[2]!);
  for (const m of text.matchAll(/import\(\s*"([^"]+)"\s*\)/g)) out.push(m[1]!);
  return out;
}
/** The src folder an import lands in ("core", "daemon", ...), or the package name. */
function target(file: string, spec: string): string {
  if (!spec.startsWith(".")) return spec;
  return relative(src, resolve(dirname(file), spec))
    .split("/")[0]!
    .replace(/\.js$/, "");
}
const folderOf = (file: string) => relative(src, file).split("/")[0]!;
const all = files(src);

test("src/core is pure: it imports only itself and yaml, and uses no clock, timer or process", () => {
  const bad: string[] = [];
  for (const f of all.filter((x) => folderOf(x) === "core")) {
    for (const spec of imports(f)) {
      const t = target(f, spec);
      if (t !== "core" && t !== "yaml") bad.push(`${relative(src, f)} imports ${spec}`);
    }
    const code = readFileSync(f, "utf8")
      .replace(/\/\/.*$/gm, "")
      .replace(/`[^`]*`/g, "``");
    for (const word of ["Date.now(", "new Date()", "setTimeout(", "setInterval(", "process."])
      if (code.includes(word)) bad.push(`${relative(src, f)} uses ${word}`);
  }
  assert.deepEqual(bad, []);
});

test("nothing outside the daemon imports it, nothing imports the CLI, and the CLI does not import the daemon", () => {
  const bad: string[] = [];
  for (const f of all) {
    const from = folderOf(f);
    for (const spec of imports(f)) {
      const t = target(f, spec);
      if (t === "daemon" && from !== "daemon") bad.push(`${relative(src, f)} imports ${spec}`);
      if (t === "cli" && from !== "cli") bad.push(`${relative(src, f)} imports ${spec}`);
    }
  }
  assert.deepEqual(bad, []);
});

test("the CLI reaches runtimes only where it reads panes itself (logs, open) and pings Herdr (doctor): no new ones", () => {
  // Known, listed exceptions: logs/open read a pane without the daemon, doctor and the demo ping Herdr.
  const allowed = new Set(["cli/commands/panes.ts", "cli/doctor/herdr.ts", "cli/common/daemon-control.ts"]);
  const bad: string[] = [];
  for (const f of all.filter((x) => folderOf(x) === "cli")) {
    if (imports(f).some((spec) => target(f, spec) === "runtime") && !allowed.has(relative(src, f)))
      bad.push(relative(src, f));
  }
  assert.deepEqual(bad, []);
});
