// spawn: delegating a task to a new child (the prompt from --prompt, --prompt-file or words; --wait waits).
import type { Command } from "commander";
import { existsSync, readFileSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { loadConfig } from "../../store/config.js";
import type { TaskSpawnParams } from "../../protocol/methods.js";
import type { CliContext } from "../common/context.js";
import { parseDuration } from "../common/duration.js";
import { printJson } from "../common/io.js";
import { untrustedNote } from "./repo-trust.js";
import { capOptions, capParams, choice, examples, jsonOption, readStdin, usage } from "../common/options.js";
import { waitAndPrint } from "./wait-print.js";

export interface SpawnOpts {
  model?: string;
  thinking?: string;
  role?: string;
  cwd?: string;
  brief?: string;
  isolated?: boolean;
  owner?: string;
  timeout?: string;
  machine?: string;
  runtime?: string;
  prompt?: string;
  promptFile?: string;
  check?: string[];
  checkTimeout?: string;
  include?: string[];
  setup?: string;
  setupTimeout?: string;
  maxCost?: string;
  maxOutputTokens?: string;
  maxTurns?: string;
  wait?: boolean;
  json?: boolean;
}

function isDirectory(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

async function promptOf(o: SpawnOpts, words: string[]): Promise<string> {
  const sources = [o.prompt !== undefined, o.promptFile !== undefined, words.length > 0].filter(Boolean).length;
  if (sources !== 1)
    throw usage("give the task exactly once: --prompt TEXT, --prompt-file FILE (- for stdin), or as trailing words");
  let text: string;
  if (o.prompt !== undefined) text = o.prompt;
  else if (o.promptFile === "-") text = await readStdin();
  else if (o.promptFile !== undefined) {
    if (!existsSync(o.promptFile)) throw usage(`--prompt-file ${o.promptFile}: no such file`);
    text = readFileSync(o.promptFile, "utf8");
  } else text = words.join(" ");
  if (text.trim() === "") throw usage("the prompt is empty; say what the child should do");
  return text;
}

export async function spawnParams(o: SpawnOpts, words: string[]): Promise<TaskSpawnParams> {
  const cwd = resolve(o.cwd ?? process.cwd());
  // With --machine, --cwd is a path on that machine: its daemon checks it.
  if (o.cwd !== undefined && o.machine === undefined && !isDirectory(cwd))
    throw usage(`--cwd ${o.cwd}: no such directory; pass the repository to work in`);
  const p: Record<string, unknown> = { cwd, prompt: await promptOf(o, words) };
  for (const k of ["model", "thinking", "role", "brief", "owner", "machine", "runtime"] as const)
    if (o[k] !== undefined) p[k] = o[k];
  if (o.isolated) p["isolated"] = true;
  if (o.timeout !== undefined) {
    const ms = parseDuration(o.timeout, "--timeout");
    if (ms < 1000) throw usage(`--timeout ${o.timeout}: a task needs at least 1s to run`);
    p["timeoutMs"] = ms;
  }
  if (o.check !== undefined) {
    const checks = o.check.map((c) => c.trim());
    if (checks.some((c) => c === "")) throw usage('--check needs a command, e.g. --check "npm test"');
    p["checks"] = checks;
  }
  if (o.checkTimeout !== undefined) {
    const ms = parseDuration(o.checkTimeout, "--check-timeout");
    if (ms < 1000) throw usage(`--check-timeout ${o.checkTimeout}: a check needs at least 1s`);
    p["checkTimeoutMs"] = ms;
  }
  if (o.include !== undefined) p["include"] = o.include;
  if (o.setup !== undefined) {
    if (o.setup.trim() === "") throw usage('--setup needs a command, e.g. --setup "npm ci"');
    p["setup"] = o.setup;
  }
  if (o.setupTimeout !== undefined) {
    const ms = parseDuration(o.setupTimeout, "--setup-timeout");
    if (ms < 1000) throw usage(`--setup-timeout ${o.setupTimeout}: a setup needs at least 1s`);
    p["setupTimeoutMs"] = ms;
  }
  if ((o.include !== undefined || o.setup !== undefined) && !o.isolated)
    throw usage("--include and --setup make an isolated worktree ready: add --isolated");
  Object.assign(p, capParams(o));
  // Built field by field from the flags above (each one a TaskSpawnParams field); the daemon's schema checks the whole.
  return p as unknown as TaskSpawnParams;
}

export function registerSpawnCommand(program: Command, ctx: CliContext): void {
  const spawn = program
    .command("spawn")
    .description("delegate a task to a new child pi agent; prints the task id")
    .argument("[prompt...]", "the task, as words (or use --prompt / --prompt-file)")
    .option("--model <model>", "provider/model id or a config alias")
    .addOption(
      choice("--thinking <level>", "thinking level", ["off", "minimal", "low", "medium", "high", "xhigh", "max"]),
    )
    .addOption(choice("--role <role>", "worker changes files; reviewer only reads", ["worker", "reviewer"]))
    .option(
      "--cwd <dir>",
      "git repository to work in (default: current directory; required with a machine from `machine add`)",
    )
    .option("--brief <text>", "a short label shown in lists and cards")
    .option("--isolated", "work in a new git worktree on branch dsh/<taskId>")
    .option("--owner <id>", "deliver the result to this owner (default: cli)")
    .option("--timeout <dur>", "run bound: 90s, 5m, 1h or ms")
    .option(
      "--machine <label>",
      "run on this machine (from `machine add`; --cwd is then required, a path there), or a Herdr --machine label",
    )
    .addOption(choice("--runtime <runtime>", "where the child runs", ["herdr", "tmux", "headless"]))
    .option("--prompt <text>", "the task text")
    .option("--prompt-file <file>", "read the task from a file; - reads stdin")
    .option(
      "--check <cmd>",
      "a check the daemon runs in the task's worktree (`dsh-herdr check`, `land --check`); repeatable",
      (v: string, prev: string[] | undefined) => [...(prev ?? []), v],
    )
    .option("--check-timeout <dur>", "each check is cut off after this long (default 10m)")
    .option(
      "--include <pattern>",
      "an untracked or ignored file of the checkout to bring into the worktree, as a .gitignore line (.env, node_modules/): files copied, directories symlinked; repeatable",
      (v: string, prev: string[] | undefined) => [...(prev ?? []), v],
    )
    .option("--setup <cmd>", "a command run in the new worktree before the child starts (output in setup.log)")
    .option("--setup-timeout <dur>", "the setup is cut off after this long (default 10m)")
    .option("--wait", "block until the task settles, then print its AgentResult");
  capOptions(spawn, "; respond continues with as much again");
  jsonOption(spawn);
  examples(spawn, [
    `dsh-herdr spawn --isolated --model anthropic/claude-sonnet-4-5 --prompt "add retries to src/http.ts"`,
    `dsh-herdr spawn --isolated --include .env --include node_modules/ --setup "npm run build" --check "npm test" "fix the flaky test"`,
    `dsh-herdr spawn --role reviewer --thinking high --wait "review the diff against HEAD"`,
    `git diff | dsh-herdr spawn --role reviewer --prompt-file - --json`,
    `dsh-herdr spawn --max-cost 5 --max-turns 40 --prompt "port the parser to the new API"`,
  ]);
  spawn.action(async (words: string[], o: SpawnOpts) => {
    // A machine from `machine add` runs the task there: this directory is a path here, not there.
    if (o.machine !== undefined && o.cwd === undefined) {
      const machines = (await loadConfig(ctx.home, ctx.io.env)).machines;
      if (Object.hasOwn(machines, o.machine))
        throw usage(
          `--machine ${o.machine} runs the task on that machine: give --cwd, the path of the repository there (the current directory, ${process.cwd()}, is a path on this machine)`,
        );
    }
    const params = await spawnParams(o, words);
    const conn = await ctx.connect({ start: true });
    const res = await conn.request("task.spawn", params);
    // The repository's own commands left out for want of consent: one line, here as in the result's warnings.
    if (o.machine === undefined) {
      const note = await untrustedNote(ctx.home, params.cwd);
      if (note !== undefined) ctx.io.err(`dsh-herdr: ${note}\n`);
    }
    if (o.wait) return waitAndPrint(ctx, [res.taskId], "all", undefined, o.json === true);
    if (o.json) printJson(ctx.io, res);
    else ctx.io.out(res.taskId + "\n");
    if (!o.json && res.queued) ctx.io.err(`queued: ${res.taskId} waits for a free slot (dsh-herdr daemon status)\n`);
  });
}
