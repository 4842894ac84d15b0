// No import cycle in src/, value or type (issue 23): modules that reach each other through a cycle cannot be read,
// tested or replaced one at a time. Reads every src/**/*.ts, follows its relative imports and re-exports (static,
// `import type`, `export ... from`, dynamic `import()`), and fails naming each cycle.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { repoRoot } from "../helpers/pi.js";

const SRC = join(repoRoot, "src");

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return sources(p);
    return name.endsWith(".ts") && !name.endsWith(".d.ts") ? [p] : [];
  });
}

/** The relative modules a file imports, as .ts paths. */
export function importsOf(file: string, text: string): string[] {
  const specs = new Set<string>();
  const patterns = [
    /\b(?:import|export)\s+(?:type\s+)?[^;'"]*?\sfrom\s*["'](\.{1,2}\/[^"']+)["']/g,
    /\bimport\s*["'](\.{1,2}\/[^"']+)["']/g,
    /\bimport\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g,
  ];
  for (const re of patterns) for (const m of text.matchAll(re)) specs.add(m[1]!);
  return [...specs].map((s) => normalize(join(dirname(file), s.replace(/\.js$/, ".ts"))));
}

/** Strongly connected components of more than one module (or a module importing itself): the cycles. */
export function cyclesOf(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const on = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string): void => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = [];
      for (;;) {
        const w = stack.pop()!;
        on.delete(w);
        scc.push(w);
        if (w === v) break;
      }
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(scc.sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return out;
}

test("the cycle finder finds a value cycle, a type-only cycle and a re-export cycle, and passes a tree", () => {
  const g = (edges: Record<string, string[]>) => new Map(Object.entries(edges));
  assert.deepEqual(cyclesOf(g({ a: ["b"], b: ["c"], c: [] })), []);
  assert.deepEqual(cyclesOf(g({ a: ["b"], b: ["c"], c: ["a"], d: ["a"] })), [["a", "b", "c"]]);
  const f = "/x/src/daemon/settle.ts";
  assert.deepEqual(
    importsOf(
      f,
      [
        'import { a } from "./task-runner.js";',
        'import type { Live } from "./live.js";',
        'export type { X } from "../core/types.js";',
        'export * from "./cycle-phase.js";',
        'const m = await import("./pipeline.js");',
        'import { readFileSync } from "node:fs";',
      ].join("\n"),
    ).sort(),
    [
      "/x/src/core/types.ts",
      "/x/src/daemon/cycle-phase.ts",
      "/x/src/daemon/live.ts",
      "/x/src/daemon/pipeline.ts",
      "/x/src/daemon/task-runner.ts",
    ],
  );
});

test("src/ has no import cycle, value or type", () => {
  const graph = new Map<string, string[]>();
  for (const f of sources(SRC)) graph.set(f, importsOf(f, readFileSync(f, "utf8")));
  assert.ok(graph.size > 100, `read ${graph.size} modules`);
  const cycles = cyclesOf(graph).map((c) => c.map((f) => relative(repoRoot, f)).join(" ↔ "));
  assert.deepEqual(cycles, [], `import cycles:\n${cycles.join("\n")}`);
});

test("no import cycle between folders at any level (a folder and its subfolder are two folders), type imports counted", () => {
  const graph = new Map<string, string[]>();
  for (const f of sources(SRC)) {
    const from = relative(SRC, dirname(f)) || ".";
    const to = importsOf(f, readFileSync(f, "utf8"))
      .filter((t) => t.startsWith(SRC))
      .map((t) => relative(SRC, dirname(t)) || ".")
      .filter((t) => t !== from);
    graph.set(from, [...new Set([...(graph.get(from) ?? []), ...to])]);
  }
  assert.ok(graph.size > 15, `read ${graph.size} folders`);
  const cycles = cyclesOf(graph).map((c) => c.join(" ↔ "));
  assert.deepEqual(cycles, [], `folder cycles:\n${cycles.join("\n")}`);
});

test("no folder in src/ holds more than 25 modules flat", () => {
  const counts = new Map<string, number>();
  for (const f of sources(SRC)) counts.set(dirname(f), (counts.get(dirname(f)) ?? 0) + 1);
  const big = [...counts].filter(([, n]) => n > 25).map(([d, n]) => `${relative(repoRoot, d)}: ${n}`);
  assert.deepEqual(big, []);
});
