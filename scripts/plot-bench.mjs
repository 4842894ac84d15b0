#!/usr/bin/env node
// Draws bench/history.jsonl (written by `npm run bench`) as docs/bench-history.svg: every figure with a target, as
// its measured value over its bound (1.0 is the target; below it is met), one line per figure, runs in time order.
// Usage: node scripts/plot-bench.mjs [history.jsonl] [out.svg]
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dirname, "..");
const input = process.argv[2] ?? join(root, "bench", "history.jsonl");
const output = process.argv[3] ?? join(root, "docs", "bench-history.svg");

const records = readFileSync(input, "utf8")
  .split("\n")
  .filter((l) => l.trim())
  .map((l) => JSON.parse(l))
  .filter((r) => typeof r.bound === "number" && r.bound > 0);
/** What a record says against its target: its ratio when the target bounds the ratio, else its value. */
const level = (r) => (r.measure === "ratio" ? r.ratio : r.value) / r.bound;
// A run is the minute it was recorded in (one `npm run bench` writes all its figures within minutes of each other).
const runOf = (r) => r.at.slice(0, 16);
const runs = [...new Set(records.map(runOf))].sort();
const figures = [...new Set(records.map((r) => r.figure))];

const W = 900;
const H = 420;
const left = 50;
const right = 330;
const top = 30;
const bottom = 60;
const plotW = W - left - right;
const plotH = H - top - bottom;
const yMax = Math.max(2, ...records.map(level).filter(Number.isFinite)) * 1.05;
const x = (i) => left + (runs.length === 1 ? plotW / 2 : (i / (runs.length - 1)) * plotW);
const y = (v) => top + plotH - (Math.min(v, yMax) / yMax) * plotH;
const colour = (i) => `hsl(${Math.round((i * 360) / figures.length)}, 65%, 42%)`;
const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

const parts = [];
parts.push(
  `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
  "<title>dsh-herdr benchmark figures over their targets</title>",
  `<rect width="${W}" height="${H}" fill="white"/>`,
  `<text x="${left}" y="18" font-size="13">Benchmark figures over their targets (below 1.0: met), from bench/history.jsonl</text>`,
);
for (let t = 0; t <= yMax; t += 0.5) {
  parts.push(
    `<line x1="${left}" x2="${left + plotW}" y1="${y(t)}" y2="${y(t)}" stroke="${t === 1 ? "#c00" : "#ddd"}" stroke-width="${t === 1 ? 1.5 : 1}"/>`,
    `<text x="${left - 6}" y="${y(t) + 4}" text-anchor="end">${t.toFixed(1)}</text>`,
  );
}
const step = Math.max(1, Math.ceil(runs.length / 8));
runs.forEach((run, i) => {
  if (i % step !== 0 && i !== runs.length - 1) return;
  parts.push(
    `<text x="${x(i)}" y="${top + plotH + 16}" text-anchor="middle">${esc(run.slice(5, 10))}</text>`,
    `<text x="${x(i)}" y="${top + plotH + 29}" text-anchor="middle">${esc(run.slice(11))}</text>`,
  );
});
figures.forEach((fig, fi) => {
  const points = records
    .filter((r) => r.figure === fig)
    .map((r) => [runs.indexOf(runOf(r)), level(r), r])
    .sort((a, b) => a[0] - b[0]);
  const c = colour(fi);
  if (points.length > 1)
    parts.push(
      `<polyline fill="none" stroke="${c}" stroke-width="1.2" points="${points.map(([i, v]) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ")}"/>`,
    );
  for (const [i, v, r] of points)
    parts.push(
      `<circle cx="${x(i).toFixed(1)}" cy="${y(v).toFixed(1)}" r="2.5" fill="${r.met === false ? "white" : c}" stroke="${c}"><title>${esc(`${fig} ${r.at}: ${r.measure === "ratio" ? `${r.ratio}x` : `${r.value} ${r.unit}`} (target ${r.target ?? `≤ ${r.bound}`})${r.imported ? " (imported)" : ""}`)}</title></circle>`,
    );
  const ly = top + 4 + fi * 14;
  parts.push(
    `<rect x="${W - right + 14}" y="${ly - 8}" width="10" height="10" fill="${c}"/>`,
    `<text x="${W - right + 30}" y="${ly + 1}">${esc(fig.length > 52 ? `${fig.slice(0, 51)}…` : fig)}</text>`,
  );
});
parts.push(
  `<text x="${left}" y="${H - 8}">open circles: target missed in that run; imported: figures copied from the docs before the bench wrote history</text>`,
  "</svg>",
);
writeFileSync(output, `${parts.join("\n")}\n`);
console.log(`plot-bench: ${records.length} figures of ${runs.length} run(s) → ${output}`);
