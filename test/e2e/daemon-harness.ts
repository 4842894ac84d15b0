// Shared by the e2e files: a temp home + git repo, the scripted model, an in-process daemon and a cli client.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startScriptedModel, type ScriptedModel } from "../../fixtures/scripted-model/server.js";
import { preparePiAgentDir, type ModelCost } from "../../fixtures/scripted-model/agent-dir.js";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { runDaemon, type RunningDaemon } from "../../src/daemon/daemon.js";
import { validateAgentResult } from "../../src/daemon/task/harvest.js";
import { connect, type DaemonClient } from "../../src/client/index.js";
import type { AgentResult } from "../../src/core/types.js";
import type { Config } from "../../src/store/config.js";
import { initRepo } from "../helpers/git.js";
import { killUnder } from "../helpers/procs.js";
import { completeJsonLines } from "../helpers/jsonl.js";
import { verifyTaskDir } from "../../src/cli/commands/verify.js";
import { knownTaskIds } from "../../src/cli/common/task-files.js";
import { describeDifference } from "../../src/core/lifecycle/verify.js";
import { parseJournalRecord } from "../../src/core/lifecycle/journal-record.js";

export interface Harness {
  dir: string;
  home: string;
  repo: string;
  model: ScriptedModel;
  modelName: string;
  /** The pi env every child gets (HOME, PI_CODING_AGENT_DIR, PI_OFFLINE...). */
  childEnv: Record<string, string>;
  daemon: RunningDaemon;
  cli: DaemonClient;
  spawn(params: Record<string, unknown>): Promise<{ taskId: string; queued: boolean }>;
  wait(taskId: string, timeoutMs?: number): Promise<AgentResult>;
  waitFor(taskId: string, pred: (r: AgentResult) => boolean, what: string, timeoutMs?: number): Promise<AgentResult>;
  close(): Promise<void>;
}

export function gitRepo(dir: string): string {
  return initRepo(dir);
}

export async function startHarness(
  script: Script,
  config: Partial<Config> = {},
  env: Record<string, string> = {},
  opts: { cost?: ModelCost } = {},
): Promise<Harness> {
  const dir = mkdtempSync(join(tmpdir(), "dsh-e2e-"));
  const home = join(dir, "home-dsh");
  const repo = gitRepo(dir);
  const model = await startScriptedModel({ script, logPath: join(dir, "requests.jsonl") });
  const agent = preparePiAgentDir(dir, model.url, opts.cost ? { cost: opts.cost } : {});
  const daemon = await runDaemon(home, {
    childEnv: { ...agent.env, ...env },
    config: { readinessTimeoutMs: 60_000, ...config },
  });
  const cli = await connect(home, { kind: "cli", timeoutMs: 120_000 });
  const h: Harness = {
    dir,
    home,
    repo,
    model,
    modelName: agent.model,
    childEnv: { ...agent.env, ...env },
    daemon,
    cli,
    // Through h.cli: a test may have restarted the daemon and connected a new client.
    spawn: (params) => h.cli.request("task.spawn", { model: agent.model, cwd: repo, ...params }),
    async wait(taskId, timeoutMs = 90_000) {
      const r = await h.cli.request("task.wait", { taskIds: [taskId], timeoutMs }, { timeoutMs: timeoutMs + 5000 });
      assert.equal(r.timedOut, false, `task ${taskId} did not settle: ${JSON.stringify(r.results[0])}`);
      validateAgentResult(r.results[0]);
      return r.results[0]!;
    },
    async waitFor(taskId, pred, what, timeoutMs = 90_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const r = await h.cli.request("task.get", { taskId });
        if (pred(r)) return r;
        if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}: ${JSON.stringify(r)}`);
        await new Promise((res) => setTimeout(res, 100));
      }
    },
    async close() {
      // The daemon and client in use now: a test may have restarted the daemon (h.daemon = a new one); closing tasks
      // through the stopped first one would write over what the new one settled (verify below caught that).
      h.cli.close();
      const open = [...h.daemon.supervisor.tasks.values()];
      for (const live of open) await live.close(true).catch(() => undefined);
      await h.daemon.stop();
      await model.close();
      // Every task this suite left agrees with its own task dir (`dsh-herdr verify --all`); checked before the dir goes.
      const disagree = knownTaskIds(home)
        .map((id) => verifyTaskDir(join(home, "tasks", id), id))
        .flatMap((v) => [
          ...v.differences.map((d) => `${v.taskId} ${describeDifference(d)}`),
          // Every task dir this version wrote is rebuilt in full: nothing left unchecked.
          ...(v.unchecked ?? []).map((u) => `${v.taskId} not checked: ${u}`),
        ]);
      // Every record the daemon wrote is of a kind (and shape) the journal's type knows: one its readers would
      // otherwise leave out of recovery and verify (src/core/lifecycle/journal-record.ts).
      const unknownRecords = knownTaskIds(home).flatMap((id) =>
        completeJsonLines<unknown>(join(home, "tasks", id, "events.jsonl"))
          .filter((line) => parseJournalRecord(line) === undefined)
          .map((line) => `${id} ${JSON.stringify(line).slice(0, 300)}`),
      );
      if (process.env.DSH_TEST_VERIFY_DEBUG)
        for (const line of disagree) {
          const id = line.split(" ")[0]!;
          console.error(readFileSync(join(home, "tasks", id, "result.json"), "utf8"));
          console.error(readFileSync(join(home, "tasks", id, "events.jsonl"), "utf8"));
        }
      // Anything still working in the temp dir (a wrapper recording its child's end, a child a test's own owner pi
      // spawned) is killed first: CI's pi 1.x pass saw the task dir refilled for over 5 s of rm retries (ENOTEMPTY).
      killUnder(dir);
      rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
      assert.deepEqual(disagree, [], "verify --all at teardown");
      assert.deepEqual(unknownRecords, [], "journal records of no known kind or shape");
    },
  };
  return h;
}

export function readJournal(h: Harness, taskId: string): { type: string; [k: string]: unknown }[] {
  // The daemon may be appending: complete lines only.
  return completeJsonLines<{ type: string; [k: string]: unknown }>(join(h.home, "tasks", taskId, "events.jsonl"));
}

/** The scenarios every runtime runs; each conversation is picked by a marker in the task prompt. */
export const SCRIPT: Script = {
  conversations: [
    {
      name: "worker",
      match: "MARK-WORKER",
      steps: [
        {
          toolCalls: [{ name: "write", arguments: { path: "feature.txt", content: "feature done\n" } }],
          usage: { prompt: 100, completion: 11 },
        },
        // crew_report terminates the cycle: no model call follows it.
        {
          toolCalls: [
            { name: "crew_report", arguments: { outcome: "completed", report: "Added feature.txt\n\nOne new file." } },
          ],
          usage: { prompt: 110, completion: 13 },
        },
      ],
    },
    {
      name: "reviewer",
      match: "MARK-REVIEWER",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "README.md", content: "# changed by reviewer\n" } }] },
        {
          toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "Reviewed; README touched" } }],
        },
      ],
    },
    {
      name: "error",
      match: "MARK-ERROR",
      steps: [{ httpError: { status: 500, message: "scripted upstream failure" } }],
    },
    { name: "slow", match: "MARK-SLOW", steps: [{ text: "thinking slowly", delayMs: 120_000 }] },
    {
      name: "blocked",
      match: "MARK-BLOCKED",
      steps: [
        {
          toolCalls: [
            {
              name: "crew_report",
              arguments: { outcome: "needs_input", report: "Half way.", needs: "Which color: red or blue?" },
            },
          ],
        },
        { toolCalls: [{ name: "write", arguments: { path: "color.txt", content: "blue\n" } }] },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "Painted it blue" } }] },
      ],
    },
    {
      name: "quick",
      match: "MARK-QUICK",
      steps: [
        {
          toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "quick one" } }],
          delayMs: 1500,
        },
      ],
    },
  ],
};
