// spawn, list, show, result, diff: delegating a task and reading what came back.
import type { Command } from "commander";
import { existsSync, readFileSync, statSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import type { AgentResult } from "../../core/types.js";
import type { CliContext } from "../context.js";
import { parseDuration } from "../duration.js";
import { exitCodeForStatus, EXIT } from "../exit-codes.js";
import { renderCard } from "../format/card.js";
import { colorEnabled } from "../format/color.js";
import { renderTable, type TaskRow } from "../format/table.js";
import { printJson } from "../io.js";
import { isDshError } from "../../core/errors.js";
import { offlineRows, readResult, readResultText, resolveId, taskDir } from "../task-files.js";
import { pageText } from "../pager.js";
import { spinner } from "../spinner.js";
import { choice, examples, jsonOption, readStdin, STATUSES, usage } from "./shared.js";

interface SpawnOpts {
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

export async function spawnParams(o: SpawnOpts, words: string[]): Promise<Record<string, unknown>> {
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
  return p;
}

/** A wait without --timeout: longer than any task runs (tasks are bounded by their own timeoutMs). */
const WAIT_FOREVER_MS = 7 * 24 * 3_600_000;

/** Ctrl+C ended a wait before the tasks settled (128 + SIGINT, as shells report it). */
const EXIT_INTERRUPTED = 130;

/** Wait for tasks to settle; sets the exit code from their statuses (3 on timeout). */
export async function waitAndPrint(
  ctx: CliContext,
  taskIds: string[],
  mode: "any" | "all",
  timeoutMs: number | undefined,
  json: boolean,
): Promise<void> {
  const conn = await ctx.connect();
  // Drawn on stderr: only when both streams are a terminal (`wait ID 2>log` keeps frames out of the log).
  const stop =
    ctx.io.isTTY && (ctx.io.errIsTTY ?? true) && !json
      ? spinner(ctx.io, `waiting for ${taskIds.length} task(s)`)
      : () => {};
  let res: { results: AgentResult[]; timedOut: boolean } | undefined;
  let onAbort = () => {};
  try {
    // The socket request outlives the wait itself; without --timeout the task's own run bound ends the wait.
    const requestTimeoutMs = (timeoutMs ?? WAIT_FOREVER_MS) + 10_000;
    // Ctrl+C stops waiting (not the tasks): without this the spinner kept turning until a second Ctrl+C.
    const interrupted = new Promise<undefined>((resolve) => {
      onAbort = () => resolve(undefined);
      if (ctx.signal.aborted) onAbort();
      else ctx.signal.addEventListener("abort", onAbort, { once: true });
    });
    const waited = conn.request<{ results: AgentResult[]; timedOut: boolean }>(
      "task.wait",
      { taskIds, mode, timeoutMs: timeoutMs ?? WAIT_FOREVER_MS },
      { timeoutMs: requestTimeoutMs },
    );
    waited.catch(() => undefined); // after Ctrl+C the connection closes under it; that rejection is expected
    res = await Promise.race([waited, interrupted]);
  } finally {
    ctx.signal.removeEventListener("abort", onAbort);
    stop();
  }
  if (!res) {
    ctx.io.err(`stopped waiting; the tasks keep running (dsh-herdr wait ${taskIds.join(" ")})\n`);
    ctx.exitCode = EXIT_INTERRUPTED;
    return;
  }
  if (json) printJson(ctx.io, res);
  else {
    ctx.io.out(
      res.results.map((r) => renderCard(r, undefined, { color: colorEnabled(ctx.io.env, ctx.io.isTTY) })).join("\n"),
    );
    if (res.timedOut)
      ctx.io.err(
        `dsh-herdr: TIMEOUT: not settled in time; the tasks keep running (dsh-herdr wait ${taskIds.join(" ")})\n`,
      );
  }
  const settled = res.results.filter((r) => !["starting", "working", "running"].includes(r.status));
  ctx.exitCode = res.timedOut ? EXIT.timeout : Math.max(EXIT.ok, ...settled.map((r) => exitCodeForStatus(r.status)));
}

export function registerTaskCommands(program: Command, ctx: CliContext): void {
  const spawn = program
    .command("spawn")
    .description("delegate a task to a new child pi agent; prints the task id")
    .argument("[prompt...]", "the task, as words (or use --prompt / --prompt-file)")
    .option("--model <model>", "provider/model id or a config alias")
    .addOption(
      choice("--thinking <level>", "thinking level", ["off", "minimal", "low", "medium", "high", "xhigh", "max"]),
    )
    .addOption(choice("--role <role>", "worker changes files; reviewer only reads", ["worker", "reviewer"]))
    .option("--cwd <dir>", "git repository to work in (default: current directory)")
    .option("--brief <text>", "a short label shown in lists and cards")
    .option("--isolated", "work in a new git worktree on branch dsh/<taskId>")
    .option("--owner <id>", "deliver the result to this owner (default: cli)")
    .option("--timeout <dur>", "run bound: 90s, 5m, 1h or ms")
    .option(
      "--machine <label>",
      "run on this machine (from `machine add`; --cwd is a path there), or a Herdr --machine label",
    )
    .addOption(choice("--runtime <runtime>", "where the child runs", ["herdr", "tmux", "headless"]))
    .option("--prompt <text>", "the task text")
    .option("--prompt-file <file>", "read the task from a file; - reads stdin")
    .option("--wait", "block until the task settles, then print its AgentResult");
  jsonOption(spawn);
  examples(spawn, [
    `dsh-herdr spawn --isolated --model anthropic/claude-sonnet-4-5 --prompt "add retries to src/http.ts"`,
    `dsh-herdr spawn --role reviewer --thinking high --wait "review the diff against HEAD"`,
    `git diff | dsh-herdr spawn --role reviewer --prompt-file - --json`,
  ]);
  spawn.action(async (words: string[], o: SpawnOpts) => {
    const params = await spawnParams(o, words);
    const conn = await ctx.connect({ start: true });
    const res = await conn.request<{ taskId: string; name: string; status: string; queued: boolean }>(
      "task.spawn",
      params,
    );
    if (o.wait) return waitAndPrint(ctx, [res.taskId], "all", undefined, o.json === true);
    if (o.json) printJson(ctx.io, res);
    else ctx.io.out(res.taskId + "\n");
    if (!o.json && res.queued) ctx.io.err(`queued: ${res.taskId} waits for a free slot (dsh-herdr daemon status)\n`);
  });

  const list = program
    .command("list")
    .alias("ls")
    .description("tasks in a table: id, agent, role, status, age, runtime, cwd (open tasks unless --all)")
    .option("--status <list>", "only these statuses, comma-separated")
    .option("--owner <id>", "only tasks of this owner")
    .option("--all", "include closed tasks")
    .option("--external", "also list Herdr agents dsh-herdr did not spawn");
  jsonOption(list);
  examples(list, ["dsh-herdr list", "dsh-herdr list --status running,blocked", "dsh-herdr list --all --json"]);
  list.action(async (o: { status?: string; owner?: string; all?: boolean; external?: boolean; json?: boolean }) => {
    const params: Record<string, unknown> = {};
    if (o.status !== undefined) {
      const wanted = o.status
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
      const bad = wanted.filter((s) => !(STATUSES as readonly string[]).includes(s));
      if (bad.length > 0 || wanted.length === 0)
        throw usage(`--status ${o.status}: unknown status ${bad.join(", ")}; use ${STATUSES.join(", ")}`);
      params["status"] = wanted;
    }
    if (o.owner !== undefined) params["owner"] = o.owner;
    if (o.external) params["external"] = true;
    // Without --all or --status, ask only for tasks that are not closed, so a long history is not paged through.
    if (!o.all && params["status"] === undefined) params["status"] = STATUSES.filter((s) => s !== "closed");
    type Page = { tasks: TaskRow[]; nextCursor?: string; external?: Record<string, unknown>[] };
    let res: Page;
    let offline = false;
    try {
      const conn = await ctx.connect();
      res = await conn.request<Page>("task.list", params);
      // The daemon answers in pages (newest first): follow the cursor to the end.
      for (let page = res; page.nextCursor !== undefined; ) {
        page = await conn.request<Page>("task.list", { ...params, external: false, cursor: page.nextCursor });
        res.tasks.push(...page.tasks);
      }
    } catch (e) {
      if (!isDshError(e) || e.code !== "DAEMON_UNAVAILABLE") throw e;
      // No daemon: the task index on disk answers, as show/diff/result read their files.
      const statuses = params["status"] === undefined ? undefined : new Set(params["status"] as string[]);
      const rows = offlineRows(ctx.home).filter(
        (t) => (!statuses || statuses.has(t.status)) && (o.owner === undefined || t.owner === o.owner),
      );
      res = { tasks: rows as TaskRow[] };
      offline = true;
    }
    const tasks = res.tasks;
    if (offline && !o.json)
      ctx.io.err(
        `daemon not running: listed from the task index (statuses as last recorded${o.external ? "; --external needs the daemon" : ""})\n`,
      );
    if (o.json)
      return printJson(ctx.io, {
        tasks,
        ...(res.external ? { external: res.external } : {}),
        ...(offline ? { offline: true } : {}),
      });
    if (tasks.length === 0 && !res.external?.length)
      return ctx.io.out(o.all ? "no tasks\n" : "no open tasks (dsh-herdr list --all shows closed ones)\n");
    ctx.io.out(
      renderTable(
        tasks,
        Date.now(),
        ctx.io.isTTY ? ctx.io.columns : 400,
        undefined,
        colorEnabled(ctx.io.env, ctx.io.isTTY),
      ).join("\n") + "\n",
    );
    for (const x of res.external ?? [])
      ctx.io.out(`external  ${String(x["name"] ?? "-")}  ${String(x["paneId"] ?? "-")}  ${String(x["status"])}\n`);
  });

  const show = program
    .command("show")
    .description("a task's AgentResult as a card")
    .argument("<id>", "task id or unique prefix");
  jsonOption(show);
  examples(show, ["dsh-herdr show tmg3", "dsh-herdr show tmg3k2a1b2c3 --json"]);
  show.action((id: string, o: { json?: boolean }) => {
    const taskId = resolveId(ctx.home, id);
    if (o.json) return ctx.io.out(readResultText(ctx.home, taskId).trimEnd() + "\n");
    const r = readResult(ctx.home, taskId);
    ctx.io.out(
      renderCard(r, undefined, {
        color: colorEnabled(ctx.io.env, ctx.io.isTTY),
        ...(r.worktree ? { worktreeExists: existsSync(r.worktree.path) } : {}),
      }),
    );
  });

  const result = program
    .command("result")
    .description("a task's result.json, exactly as the daemon wrote it")
    .argument("<id>", "task id or unique prefix");
  jsonOption(result);
  examples(result, ["dsh-herdr result tmg3 --json | jq .summary"]);
  result.action((id: string) => {
    ctx.io.out(readResultText(ctx.home, resolveId(ctx.home, id)));
  });

  const diff = program
    .command("diff")
    .description("the patch a task produced (paged on a terminal)")
    .argument("<id>", "task id or unique prefix");
  jsonOption(diff);
  examples(diff, ["dsh-herdr diff tmg3", "dsh-herdr diff tmg3 | git apply"]);
  diff.action(async (id: string, o: { json?: boolean }) => {
    const taskId = resolveId(ctx.home, id);
    const r = readResult(ctx.home, taskId);
    const local = join(taskDir(ctx.home, taskId), "diff.patch");
    // A task relayed to another machine: patchPath is the remote's; the local task dir holds its copy.
    const path =
      r.agent.machine !== undefined && existsSync(local)
        ? local
        : r.diff?.patchPath && isAbsolute(r.diff.patchPath)
          ? r.diff.patchPath
          : local;
    const patch = existsSync(path) ? readFileSync(path, "utf8") : "";
    if (o.json) return printJson(ctx.io, { taskId, patchPath: path, truncated: r.diff?.truncated ?? false, patch });
    if (patch === "")
      return ctx.io.err(
        `task ${taskId} has no diff (no changes since its baseline${r.diff ? "" : ", or not harvested yet"})\n`,
      );
    await pageText(ctx.io, patch);
  });
}
