// logs and open: the child's own screen or output, read straight from its runtime with the handle in task.json.
// (Read-only diagnostics; a `task.output` daemon method would let the CLI stop knowing the runtimes.)
import { safeText } from "../format/safe.js";
import type { Command } from "commander";
import { spawnSync } from "node:child_process";
import { closeSync, existsSync, fstatSync, openSync, readFileSync, readSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DshError } from "../../core/errors.js";
import { loadConfig } from "../../store/config.js";
import { pathsOf, readState } from "../../runtime/headless/files.js";
import { createHeadlessRuntime } from "../../runtime/headless/runtime.js";
import { renderRpcLog } from "../format/rpc-log.js";
import { createHerdrRuntime, createTransport, HerdrClient } from "../../runtime/herdr/index.js";
import { createTmuxRuntime } from "../../runtime/tmux/runtime.js";
import type { Runtime, RuntimeHandle } from "../../runtime/types.js";
import type { CliContext } from "../common/context.js";
import { printJson } from "../common/io.js";
import { resolveId, taskDir } from "../common/task-files.js";
import { remoteLogs, remoteOpen } from "./remote-panes.js";
import { examples, jsonOption } from "../common/options.js";

interface TaskJson {
  taskId: string;
  name?: string;
  runtime?: string;
  handle?: RuntimeHandle;
  machine?: string;
  remote?: { label: string; taskId: string };
}

function readTaskJson(home: string, taskId: string): TaskJson {
  const file = join(taskDir(home, taskId), "task.json");
  if (!existsSync(file))
    throw new DshError("TASK_NOT_FOUND", `${file} is missing; the task record is gone (dsh-herdr list --all)`);
  return JSON.parse(readFileSync(file, "utf8")) as TaskJson;
}

function launched(taskId: string, rec: TaskJson): TaskJson & { handle: RuntimeHandle } {
  if (!rec.handle)
    throw new DshError(
      "BAD_STATE",
      `task ${taskId} has not been launched yet (still queued or starting); try again shortly`,
    );
  return rec as TaskJson & { handle: RuntimeHandle };
}

/** Where Herdr listens, as the daemon finds it: config first (herdrSocketPath, herdrSession, herdrBin), then env. */
async function herdrOptions(ctx: CliContext, machine: string | undefined) {
  const cfg = await loadConfig(ctx.home, ctx.io.env);
  return {
    env: ctx.io.env,
    ...(cfg.herdrSocketPath ? { socketPath: cfg.herdrSocketPath } : {}),
    ...(cfg.herdrSession ? { session: cfg.herdrSession } : {}),
    ...(cfg.herdrBin ? { herdrBin: cfg.herdrBin } : {}),
    ...(machine ? { machine } : {}),
  };
}

async function runtimeFor(ctx: CliContext, h: RuntimeHandle): Promise<Runtime> {
  if (h.runtime === "tmux")
    return createTmuxRuntime({ socketName: h.tmuxSocket ?? (await loadConfig(ctx.home, ctx.io.env)).tmuxSocket });
  if (h.runtime === "headless") return createHeadlessRuntime();
  return createHerdrRuntime(await herdrOptions(ctx, h.machine));
}

/** The last `max` bytes of a file from a line start ("" when it cannot be read). */
function readTail(path: string, max: number): string {
  let fd: number | undefined;
  try {
    fd = openSync(path, "r");
    const size = fstatSync(fd).size;
    const from = Math.max(0, size - max);
    const buf = Buffer.alloc(size - from);
    let got = 0;
    for (let n; got < buf.length && (n = readSync(fd, buf, got, buf.length - got, from + got)) > 0; ) got += n;
    const text = buf.subarray(0, got).toString("utf8");
    return from === 0 ? text : text.slice(text.indexOf("\n") + 1);
  } catch {
    return "";
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** A headless pi child's output as readable lines (src/cli/format/rpc-log.ts), then its stderr's last lines. */
function headlessText(h: RuntimeHandle, lines: number): string {
  const p = pathsOf(h);
  const out = renderRpcLog(readTail(p.stdoutPath, 32 * 1024 * 1024)).slice(-lines);
  const err = readTail(p.stderrPath, 1024 * 1024)
    .replace(/\n$/, "")
    .split("\n")
    .slice(-lines)
    .join("\n");
  return err === "" ? out.join("\n") : `${out.join("\n")}\n--- stderr ---\n${err}`;
}

function screenLines(text: string): string[] {
  // TUIs pad their lines to the pane width; the padding is not output.
  return text === "" ? [] : text.split("\n").map((l) => l.trimEnd());
}

/** Indices of the lines of `b` that a longest common subsequence with `a` keeps (lines `b` shares with `a`, in order). */
export function commonLines(a: string[], b: string[]): Set<number> {
  const kept = new Set<number>();
  let p = 0;
  while (p < a.length && p < b.length && a[p] === b[p]) kept.add(p++);
  let s = 0;
  while (s < a.length - p && s < b.length - p && a[a.length - 1 - s] === b[b.length - 1 - s])
    kept.add(b.length - 1 - s++);
  const A = a.slice(p, a.length - s);
  const B = b.slice(p, b.length - s);
  if (A.length * B.length > 4_000_000) return kept; // huge -n windows: the middle counts as new
  // len[i][j]: LCS length of A[i..] and B[j..]
  const len = Array.from({ length: A.length + 1 }, () => new Uint32Array(B.length + 1));
  for (let i = A.length - 1; i >= 0; i--) {
    for (let j = B.length - 1; j >= 0; j--) {
      len[i]![j] = A[i] === B[j] ? len[i + 1]![j + 1]! + 1 : Math.max(len[i + 1]![j]!, len[i]![j + 1]!);
    }
  }
  for (let i = 0, j = 0; i < A.length && j < B.length; ) {
    if (A[i] === B[j]) {
      kept.add(p + j);
      i++;
      j++;
    } else if (len[i + 1]![j]! >= len[i]![j + 1]!) i++;
    else j++;
  }
  return kept;
}

/**
 * Follows a screen (herdr, tmux) or a growing output (headless) by polling it. A line is printed once, when it is
 * not already shown and reads the same in two polls in a row: a TUI redraws its spinner, footer and streaming text
 * in place, and reprinting the screen on every change would repeat it endlessly.
 */
export class OutputFollower {
  private shown: string[];
  private last: string[];

  constructor(first: string) {
    this.shown = this.last = screenLines(first);
  }

  /** The lines to print for the next poll; `final` (the child has exited) prints every new line. */
  next(text: string, final = false): string[] {
    const next = screenLines(text);
    const stable = commonLines(this.last, next);
    const seen = commonLines(this.shown, next);
    const fresh: string[] = [];
    const shown: string[] = [];
    next.forEach((line, i) => {
      if (seen.has(i)) shown.push(line);
      else if (final || stable.has(i)) {
        fresh.push(line);
        shown.push(line);
      }
    });
    this.shown = shown;
    this.last = next;
    return fresh;
  }
}

export function registerPaneCommands(program: Command, ctx: CliContext): void {
  const logs = program
    .command("logs")
    .description("the child's screen (herdr, tmux) or output (headless); on another machine, read there over ssh")
    .argument("<id>", "task id or unique prefix")
    .option("-n, --lines <n>", "how many lines", "80")
    .option("-f, --follow", "keep printing new output until the child exits or Ctrl+C")
    .option("--raw", "a headless child's pi rpc events as written (JSON lines), not the readable text");
  jsonOption(logs);
  examples(logs, ["dsh-herdr logs tmg3", "dsh-herdr logs tmg3 -f", "dsh-herdr logs tmg3 --raw | jq .type"]);
  logs.action(async (id: string, o: { lines: string; follow?: boolean; raw?: boolean; json?: boolean }) => {
    const taskId = resolveId(ctx.home, id);
    const lines = Number.parseInt(o.lines, 10);
    if (!Number.isInteger(lines) || lines < 1)
      throw new DshError("BAD_PARAMS", `--lines ${o.lines}: give a positive number`, { usage: true });
    const task = readTaskJson(ctx.home, taskId);
    // A task relayed to another machine: its output is there, read by that machine's own `logs`.
    if (task.remote) return remoteLogs(ctx, taskId, task.remote, { lines, follow: o.follow, raw: o.raw, json: o.json });
    const rec = launched(taskId, task);
    const rt = await runtimeFor(ctx, rec.handle);
    // A headless pi child writes rpc events: shown as readable text unless --raw.
    const readable =
      rec.handle.runtime === "headless" && !o.raw && readState(pathsOf(rec.handle).statePath)?.protocol !== "raw";
    const read = async () => (readable ? headlessText(rec.handle, lines) : rt.readOutput(rec.handle, { lines }));
    const text = await read();
    // A pane that is gone reads as nothing: said, so an empty screen is never taken for a child that printed nothing.
    if (!readable && rec.handle.runtime !== "headless" && text.trim() === "" && !(await rt.isAlive(rec.handle)))
      throw new DshError(
        "BAD_STATE",
        `task ${taskId}'s ${rec.handle.runtime} pane is gone, and its screen with it; ` +
          `its result: \`dsh-herdr show ${taskId}\`, its session: ${join(taskDir(ctx.home, taskId), "session.jsonl")}`,
      );
    if (o.json) return printJson(ctx.io, { taskId, runtime: rec.handle.runtime, output: text });
    // A child's screen or output: its control sequences shown escaped, not run by this terminal (safe.ts).
    for (const line of screenLines(text)) ctx.io.out(safeText(line) + "\n");
    const follower = new OutputFollower(text);
    while (o.follow && !ctx.signal.aborted) {
      const alive = await rt.isAlive(rec.handle);
      await sleep(500, undefined, { signal: ctx.signal }).catch(() => undefined);
      if (ctx.signal.aborted) break; // Ctrl+C ends the follow; exit 0
      for (const line of follower.next(await read(), !alive)) ctx.io.out(safeText(line) + "\n");
      if (!alive) break;
    }
  });

  const open = program
    .command("open")
    .description(
      "focus the child's pane in Herdr, or attach to its tmux window; on another machine, over `ssh -t` (printed without a terminal)",
    )
    .argument("<id>", "task id or unique prefix");
  jsonOption(open);
  examples(open, ["dsh-herdr open tmg3"]);
  open.action(async (id: string, o: { json?: boolean }) => {
    const taskId = resolveId(ctx.home, id);
    const task = readTaskJson(ctx.home, taskId);
    if (task.remote) return remoteOpen(ctx, taskId, task.remote, task.runtime, o);
    const h = launched(taskId, task).handle;
    if (h.runtime === "headless") {
      throw new DshError(
        "BAD_STATE",
        `task ${taskId} runs headless and has no pane; read its output with \`dsh-herdr logs ${taskId} -f\``,
      );
    }
    if (h.runtime === "herdr") {
      if (!h.paneId) throw new DshError("BAD_STATE", `task ${taskId} has no Herdr pane id recorded`);
      const client = new HerdrClient(createTransport(await herdrOptions(ctx, h.machine)));
      await client.call("pane.focus", { pane_id: h.paneId });
      if (o.json) return printJson(ctx.io, { taskId, runtime: "herdr", paneId: h.paneId, focused: true });
      return ctx.io.out(`focused Herdr pane ${h.paneId}\n`);
    }
    const sock = h.tmuxSocket ?? "dsh-herdr";
    const target = `${h.tmuxSession ?? "dsh-herdr"}:${h.tmuxWindow ?? ""}`;
    const attach = ["tmux", "-L", sock, "attach-session", "-t", target];
    if (o.json || !ctx.io.isTTY) {
      if (o.json) return printJson(ctx.io, { taskId, runtime: "tmux", command: attach });
      return ctx.io.out(attach.join(" ") + "\n");
    }
    // A different tmux server than the one we may be inside: unset TMUX so tmux allows the nested attach.
    const r = spawnSync(attach[0] as string, attach.slice(1), { stdio: "inherit", env: { ...ctx.io.env, TMUX: "" } });
    if (r.status !== 0)
      throw new DshError(
        "RUNTIME_UNAVAILABLE",
        `tmux attach to ${target} on -L ${sock} failed; the window may be closed (dsh-herdr show ${taskId})`,
      );
  });
}
