// logs and open: the child's own screen or output, read straight from its runtime with the handle in task.json.
// (Read-only diagnostics; a `task.output` daemon method would let the CLI stop knowing the runtimes.)
import type { Command } from "commander";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DshError } from "../../core/errors.js";
import { loadConfig } from "../../store/config.js";
import { createHeadlessRuntime } from "../../runtime/headless/runtime.js";
import { createHerdrRuntime, createTransport, HerdrClient } from "../../runtime/herdr/index.js";
import { createTmuxRuntime } from "../../runtime/tmux/runtime.js";
import type { Runtime, RuntimeHandle } from "../../runtime/types.js";
import type { CliContext } from "../context.js";
import { printJson } from "../io.js";
import { resolveId, taskDir } from "../task-files.js";
import { examples, jsonOption } from "./shared.js";

interface TaskJson { taskId: string; name?: string; runtime?: string; handle?: RuntimeHandle; machine?: string }

function readTaskJson(home: string, taskId: string): TaskJson & { handle: RuntimeHandle } {
  const file = join(taskDir(home, taskId), "task.json");
  if (!existsSync(file)) throw new DshError("TASK_NOT_FOUND", `${file} is missing; the task record is gone (dsh-herdr list --all)`);
  const rec = JSON.parse(readFileSync(file, "utf8")) as TaskJson;
  if (!rec.handle) throw new DshError("BAD_STATE", `task ${taskId} has not been launched yet (still queued or starting); try again shortly`);
  return rec as TaskJson & { handle: RuntimeHandle };
}

async function runtimeFor(ctx: CliContext, h: RuntimeHandle): Promise<Runtime> {
  const cfg = await loadConfig(ctx.home, ctx.io.env);
  if (h.runtime === "tmux") return createTmuxRuntime({ socketName: h.tmuxSocket ?? cfg.tmuxSocket });
  if (h.runtime === "headless") return createHeadlessRuntime();
  return createHerdrRuntime({
    env: ctx.io.env,
    ...(cfg.herdrSocketPath ? { socketPath: cfg.herdrSocketPath } : {}),
    ...(cfg.herdrSession ? { session: cfg.herdrSession } : {}),
    ...(h.machine ? { machine: h.machine } : {}),
  });
}

/** The part of `next` not already printed as the end of `prev` (screens scroll, files grow). */
export function newTail(prev: string, next: string): string {
  if (next.startsWith(prev)) return next.slice(prev.length);
  const a = prev.split("\n");
  const b = next.split("\n");
  for (let k = Math.min(a.length, b.length); k > 0; k--) {
    if (a.slice(a.length - k).join("\n") === b.slice(0, k).join("\n")) return "\n" + b.slice(k).join("\n");
  }
  return "\n" + next;
}

export function registerPaneCommands(program: Command, ctx: CliContext): void {
  const logs = program
    .command("logs")
    .description("the child's screen (herdr, tmux) or output (headless)")
    .argument("<id>", "task id or unique prefix")
    .option("-n, --lines <n>", "how many lines", "80")
    .option("-f, --follow", "keep printing new output until the child exits or Ctrl+C");
  jsonOption(logs);
  examples(logs, ["dsh-herdr logs tmg3", "dsh-herdr logs tmg3 -f"]);
  logs.action(async (id: string, o: { lines: string; follow?: boolean; json?: boolean }) => {
    const taskId = resolveId(ctx.home, id);
    const lines = Number.parseInt(o.lines, 10);
    if (!Number.isInteger(lines) || lines < 1) throw new DshError("BAD_PARAMS", `--lines ${o.lines}: give a positive number`, { usage: true });
    const rec = readTaskJson(ctx.home, taskId);
    const rt = await runtimeFor(ctx, rec.handle);
    let text = await rt.readOutput(rec.handle, { lines });
    if (o.json) return printJson(ctx.io, { taskId, runtime: rec.handle.runtime, output: text });
    ctx.io.out(text);
    while (o.follow && !ctx.signal.aborted) {
      const alive = await rt.isAlive(rec.handle);
      await sleep(500, undefined, { signal: ctx.signal }).catch(() => undefined);
      const next = await rt.readOutput(rec.handle, { lines });
      if (next !== text) ctx.io.out(newTail(text, next));
      text = next;
      if (!alive) break;
    }
    if (text !== "" && !text.endsWith("\n")) ctx.io.out("\n");
  });

  const open = program.command("open").description("focus the child's pane in Herdr, or attach to its tmux window").argument("<id>", "task id or unique prefix");
  jsonOption(open);
  examples(open, ["dsh-herdr open tmg3"]);
  open.action(async (id: string, o: { json?: boolean }) => {
    const taskId = resolveId(ctx.home, id);
    const h = readTaskJson(ctx.home, taskId).handle;
    if (h.runtime === "headless") {
      throw new DshError("BAD_STATE", `task ${taskId} runs headless and has no pane; read its output with \`dsh-herdr logs ${taskId} -f\``);
    }
    if (h.runtime === "herdr") {
      if (!h.paneId) throw new DshError("BAD_STATE", `task ${taskId} has no Herdr pane id recorded`);
      const client = new HerdrClient(createTransport({ env: ctx.io.env, ...(h.machine ? { machine: h.machine } : {}) }));
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
    if (r.status !== 0) throw new DshError("RUNTIME_UNAVAILABLE", `tmux attach to ${target} on -L ${sock} failed; the window may be closed (dsh-herdr show ${taskId})`);
  });
}
