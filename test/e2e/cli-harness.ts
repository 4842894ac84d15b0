// For the CLI e2e files: a temp dir with a git repo, the scripted model, a pi agent dir, and a runner for the real
// bin/dsh-herdr as a subprocess against a daemon it starts in a temp home (headless runtime unless told).
import { execa } from "execa";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { preparePiAgentDir } from "../../fixtures/scripted-model/agent-dir.js";
import { startScriptedModel, type ScriptedModel } from "../../fixtures/scripted-model/server.js";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { initRepo } from "../helpers/git.js";
import { killUnder } from "../helpers/procs.js";
import { dshBin, runCli, type CliRun } from "../helpers/cli.js";

export const root = join(import.meta.dirname, "..", "..", "..");
export const bin = dshBin;

export type { CliRun };

export interface CliHarness {
  dir: string;
  home: string;
  repo: string;
  model: ScriptedModel;
  /** HOME, PI_*, DSH_HERDR_HOME and a Herdr socket that does not exist: what every CLI call gets. */
  env: Record<string, string>;
  cli(args: string[], opts?: { input?: string; timeoutMs?: number }): Promise<CliRun>;
  close(): Promise<void>;
}

export function makeGitRepo(dir: string): string {
  return initRepo(dir);
}

export interface CliHarnessOptions {
  /** Set as the config's herdrSocketPath (e.g. a fixtures/fake-herdr socket); HERDR_SOCKET_PATH in the env still names no socket. */
  herdrSocketPath?: string;
}

export async function startCliHarness(
  script: Script,
  runtime = "headless",
  opts: CliHarnessOptions = {},
): Promise<CliHarness> {
  const dir = mkdtempSync(join(tmpdir(), "dsh-cli-e2e-"));
  const home = join(dir, "dsh");
  const repo = makeGitRepo(dir);
  const model = await startScriptedModel({ script, logPath: join(dir, "requests.jsonl") });
  const agent = preparePiAgentDir(dir, model.url);
  const env = {
    ...agent.env,
    DSH_HERDR_HOME: home,
    HERDR_SOCKET_PATH: join(dir, "no-herdr.sock"),
    DSH_HERDR_PAGER: "cat",
  };
  const cli = (args: string[], o: { input?: string; timeoutMs?: number } = {}): Promise<CliRun> =>
    runCli(args, { env, cwd: repo, ...o });
  const settings = [
    ["defaultModel", agent.model],
    ["runtime", runtime],
    ["readinessTimeoutMs", "60000"],
    ["tmuxSocket", `dsh-cli-${process.pid}`],
  ];
  if (opts.herdrSocketPath) settings.push(["herdrSocketPath", opts.herdrSocketPath]);
  for (const [k, v] of settings) {
    const r = await cli(["config", "set", k as string, v as string]);
    if (r.code !== 0) throw new Error(`config set ${k}: ${r.err}`);
  }
  return {
    dir,
    home,
    repo,
    model,
    env,
    cli,
    async close() {
      await cli(["abort", "--all"]).catch(() => undefined);
      await cli(["daemon", "stop"]).catch(() => undefined);
      await execa("tmux", ["-L", `dsh-cli-${process.pid}`, "kill-server"], { reject: false });
      await model.close();
      // `daemon stop` leaves children running by design; a test's own leftovers (completed or blocked tasks it
      // never closed) are ended here, found by their cwd inside this test's temp dir.
      killUnder(dir);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
