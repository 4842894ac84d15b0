// Test helper: a temp dir with a running scripted model, a pi agent dir pointing at it, and the real pi binary.
//   const h = await startPiHarness({ script }); ... run h.piBin with env {...process.env, ...h.env} ...
//   await h.cleanup();
import { execa, type ResultPromise } from "execa";
import { spawnSync } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { piLineOfVersion, type PiLine } from "../../src/core/session/retry-outlook.js";
import { preparePiAgentDir } from "../../fixtures/scripted-model/agent-dir.js";
import { startScriptedModel, type ScriptedModel } from "../../fixtures/scripted-model/server.js";
import type { Script } from "../../fixtures/scripted-model/script.js";

/** Repo root from a compiled helper: dist/test/helpers → root. */
export const repoRoot = join(import.meta.dirname, "..", "..", "..");
/** The devDependency pi (0.73.1), whatever DSH_HERDR_PI_BIN says. */
export const bundledPiBin = join(repoRoot, "node_modules", ".bin", "pi");
/**
 * The pi every test launches: DSH_HERDR_PI_BIN when set (CI's second pass points it at a pi 1.x wrapper, see
 * .ci/run), else the devDependency. The daemons the tests start read the same variable (src/pi/launch.ts).
 */
export const piBin = process.env.DSH_HERDR_PI_BIN || bundledPiBin;

let version: string | undefined;
/** `piBin --version` (asked once per test process). */
export function testPiVersion(): string {
  if (version === undefined) {
    const r = spawnSync(piBin, ["--version"], {
      encoding: "utf8",
      env: { ...process.env, PI_OFFLINE: "1", PI_SKIP_VERSION_CHECK: "1" },
      timeout: 30_000,
    });
    const v = /\d+\.\d+\.\d+\S*/.exec(`${r.stdout}\n${r.stderr}`)?.[0];
    if (!v) throw new Error(`${piBin} --version printed no version: ${r.stderr || r.stdout}`);
    version = v;
  }
  return version;
}
/** The line of the pi under test: where 0.73.1 and 1.x word or record things differently, tests ask this. */
export function testPiLine(): PiLine {
  return piLineOfVersion(testPiVersion()) ?? "0.73";
}

export interface PiHarness {
  /** The temp dir holding everything below. */
  dir: string;
  /** A scratch working directory for pi (dir/work). */
  work: string;
  model: ScriptedModel;
  /** "scripted/scripted-model". */
  modelName: string;
  /** HOME, PI_CODING_AGENT_DIR, PI_OFFLINE, PI_SKIP_VERSION_CHECK. */
  env: Record<string, string>;
  piBin: string;
  /** Path of the model's JSONL request log. */
  requestLog: string;
  /** Runs pi with the harness env, cwd `work` and stdin ignored (pi reads a non-TTY stdin to EOF). */
  runPi(args: string[], opts?: { cwd?: string; timeoutMs?: number; env?: Record<string, string> }): ResultPromise;
  cleanup(): Promise<void>;
}

export async function startPiHarness(opts: { script: Script; retry?: boolean; prefix?: string }): Promise<PiHarness> {
  const dir = mkdtempSync(join(tmpdir(), opts.prefix ?? "dsh-pi-"));
  const work = join(dir, "work");
  mkdirSync(work);
  const requestLog = join(dir, "requests.jsonl");
  let model: ScriptedModel;
  try {
    model = await startScriptedModel({ script: opts.script, logPath: requestLog });
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const agent = preparePiAgentDir(dir, model.url, opts.retry === undefined ? {} : { retry: opts.retry });
  const children = new Set<ResultPromise>();
  return {
    dir,
    work,
    model,
    modelName: agent.model,
    env: agent.env,
    piBin,
    requestLog,
    runPi(args, o = {}) {
      const child = execa(piBin, args, {
        cwd: o.cwd ?? work,
        env: { ...agent.env, ...(o.env ?? {}) },
        stdin: "ignore",
        reject: false,
        timeout: o.timeoutMs ?? 60_000,
      });
      children.add(child);
      void child.finally(() => children.delete(child)).catch(() => undefined);
      return child;
    },
    async cleanup() {
      for (const c of children) c.kill("SIGKILL");
      await Promise.allSettled([...children]);
      await model.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
