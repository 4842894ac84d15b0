// `dsh-herdr verify --all` over a home of closed tasks (10,000; BENCH_QUICK: 200), each task dir as the daemon writes
// it: task.json, result.json, events.jsonl with the settle record, the pinned settled status record and the close,
// a short session, result.md's pinned copy and diff.patch. verify replays each journal through the machine, rebuilds
// each result from its pin (session read to the pinned offset, both digests taken) and compares it field by field.
// Baseline, measured in the same run: a node process that only reads and JSON.parses the same result.json files.
// The script fails unless verify agrees on every task.
// Run: node dist/bench/verify-all.js
import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { closedResult } from "../src/core/result/agent-result.js";
import { pinnedResultFile, resultFromPin, resultMdOf, type HarvestPin } from "../src/core/lifecycle/harvest-pin.js";
import { newTaskId } from "../src/core/ids.js";
import { parseYaml } from "../src/core/result/result-md.js";
import { SessionReader } from "../src/core/session/session-reader.js";
import type { DiffEvidence } from "../src/core/types.js";
import { median, printFigure, repoRoot, sizes, tempDir } from "./_util.js";

const { N, RUNS } = sizes({ N: 10_000, RUNS: 3 }, { N: 200, RUNS: 1 });
const thousands = (x: number) => x.toLocaleString("en-US");
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/** One closed task's files, as the daemon writes them, with TASK standing for its id. */
function template(home: string): Record<string, string> {
  const TASK = "tTEMPLATE0000";
  const dir = join(home, "tasks", TASK);
  const at = Date.parse("2026-01-01T00:00:00.000Z");
  const session =
    [
      { type: "session", version: 3, id: "s1", timestamp: "2026-01-01T00:00:00.000Z", cwd: "/repo" },
      { type: "model_change", id: "m1", timestamp: "2026-01-01T00:00:00.100Z", provider: "held", modelId: "m" },
      {
        type: "message",
        id: "u1",
        timestamp: "2026-01-01T00:00:01.000Z",
        message: { role: "user", content: [{ type: "text", text: "write work.txt" }], timestamp: at + 1000 },
      },
      {
        type: "message",
        id: "a1",
        timestamp: "2026-01-01T00:00:02.000Z",
        message: {
          role: "assistant",
          content: [{ type: "text", text: "Wrote work.txt with the answer." }],
          provider: "held",
          model: "m",
          usage: { input: 120, output: 40, cacheRead: 0, cacheWrite: 0, totalTokens: 160 },
          stopReason: "stop",
          timestamp: at + 2000,
        },
      },
    ]
      .map((l) => JSON.stringify(l))
      .join("\n") + "\n";
  const resultMd =
    "---\nstatus: completed\nsummary: Wrote work.txt\nfiles: work.txt\n---\nThe answer is in work.txt.\n";
  const patch =
    "diff --git a/work.txt b/work.txt\nnew file mode 100644\n--- /dev/null\n+++ b/work.txt\n@@ -0,0 +1 @@\n+42\n";
  const record = {
    taskId: TASK,
    owner: "cli",
    status: "closed",
    createdAt: at,
    cwd: "/repo",
    kind: "pi",
    role: "worker",
    model: "held/m",
    thinking: "off",
    isolated: false,
    timeoutMs: 900_000,
    runtime: "headless",
    name: `worker-m-${TASK.slice(-4)}`,
    token: "0".repeat(48),
    workdir: "/repo",
    sessionPath: join(dir, "session.jsonl"),
    resultPath: join(dir, "result.md"),
    cycle: 1,
    timing: { createdAt: at, promptedAt: at + 900, settledAt: at + 2500 },
    sessionOffset: Buffer.byteLength(session),
  };
  const diff: DiffEvidence = {
    baselineHead: "a".repeat(40),
    stat: " work.txt | 1 +\n 1 file changed, 1 insertion(+)",
    files: [],
    untracked: ["work.txt"],
    patchPath: join(dir, "diff.patch"),
    patchBytes: Buffer.byteLength(patch),
    truncated: false,
    dirtyAtStart: [],
  };
  const pin: HarvestPin = {
    agent: { name: record.name, kind: "pi", model: "held/m", thinking: "off", runtime: "headless", runtimeId: "4242" },
    timing: record.timing,
    runtime: "idle",
    settled: true,
    fresh: true,
    stopReason: "stop",
    resultMd: { file: pinnedResultFile(1), sha256: sha256(resultMd) },
    diff,
    diffSha256: sha256(patch),
    session: true,
  };
  const reader = new SessionReader();
  reader.push(Buffer.from(session));
  const reason = { kind: "agent_end" as const, stopReason: "stop" };
  const settled = resultFromPin(record as never, pin, {
    session: reader.facts(),
    resultMd: resultMdOf({ text: resultMd }, parseYaml),
    reason,
  });
  const events = [
    { type: "created", ts: at },
    { type: "admitted", queuedMs: 0, ts: at + 10 },
    { type: "launched", attempt: 1, runtime: "headless", handle: { runtime: "headless", pid: 4242 }, ts: at + 500 },
    { type: "prompt_sent", cycle: 1, bytes: 300, ts: at + 900 },
    { type: "prompt_accepted", cycle: 1, ts: at + 950 },
    { type: "settle", why: "agent_end", cycle: 1, reason, ts: at + 2500 },
    { type: "status", status: "completed", cycle: 1, settled: true, sessionOffset: record.sessionOffset, pin },
    { type: "closed", closePane: true, ts: at + 5000 },
    { type: "status", status: "closed", cycle: 1, sessionOffset: record.sessionOffset, ts: at + 5001 },
  ];
  return {
    "task.json": JSON.stringify(record, null, 2) + "\n",
    "result.json": JSON.stringify(closedResult(settled), null, 2) + "\n",
    "events.jsonl": events.map((e) => JSON.stringify(e)).join("\n") + "\n",
    "session.jsonl": session,
    [pinnedResultFile(1)]: resultMd,
    "diff.patch": patch,
    TASK,
  };
}

function timed(args: string[], env: NodeJS.ProcessEnv): { ms: number; stdout: string } {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, args, { env, encoding: "utf8", maxBuffer: 1024 * 1024 * 1024 });
  const ms = performance.now() - t0;
  if (r.status !== 0 && !(args.includes("verify") && r.status === 1))
    throw new Error(`${args.join(" ")} exited ${r.status}: ${r.stderr}`);
  return { ms, stdout: r.stdout };
}

function main(): void {
  const { dir, cleanup } = tempDir("verify-all");
  try {
    const home = join(dir, "home");
    const files = template(home);
    const TASK = files.TASK!;
    const base = Date.parse("2026-01-01T00:00:00.000Z");
    const t0 = performance.now();
    for (let i = 0; i < N; i++) {
      const id = newTaskId(base + i, randomBytes(8));
      const td = join(home, "tasks", id);
      mkdirSync(td, { recursive: true });
      for (const [name, text] of Object.entries(files))
        if (name !== "TASK") writeFileSync(join(td, name), text.split(TASK).join(id), { mode: 0o600 });
    }
    console.log(`${thousands(N)} closed task dirs written in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const env = { ...process.env, DSH_HERDR_HOME: home };
    const cli = join(repoRoot, "bin", "dsh-herdr");
    const readAll = `const fs=require("fs"),p=require("path");const t=p.join(${JSON.stringify(home)},"tasks");let n=0;for(const d of fs.readdirSync(t)){try{JSON.parse(fs.readFileSync(p.join(t,d,"result.json"),"utf8"));n++}catch{}}process.stdout.write(String(n))`;
    const verifyMs: number[] = [];
    const baseMs: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const b = timed(["-e", readAll], env);
      if (Number(b.stdout) !== N) throw new Error(`the baseline read ${b.stdout} of ${N} results`);
      baseMs.push(b.ms);
      const v = timed([cli, "verify", "--all", "--json"], env);
      const rows = JSON.parse(v.stdout) as {
        taskId: string;
        ok: boolean;
        unchecked?: string[];
        differences: unknown[];
      }[];
      const bad = rows.filter((r) => !r.ok || r.unchecked?.length);
      if (rows.length !== N || bad.length)
        throw new Error(
          `verify checked ${rows.length} of ${N}, ${bad.length} not rebuilt in full: ${JSON.stringify(bad[0])}`,
        );
      verifyMs.push(v.ms);
    }
    printFigure({
      name: `verify --all of ${thousands(N)} closed tasks, rebuilt in full (median of ${RUNS})`,
      value: median(verifyMs),
      unit: "ms",
      baselineName: "node reading and JSON.parse of their result.json",
      baseline: median(baseMs),
      better: "lower",
    });
  } finally {
    cleanup();
  }
}

main();
