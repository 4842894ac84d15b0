// dsh-herdr demo: hermetic and real. A temp git repo, the scripted model, a daemon in a temp home, two isolated
// workers and one reviewer running real pi; watch while they run, then the cards and the diffs; clean up.
import type { Command } from "commander";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { DshError } from "../core/errors.js";
import type { AgentResult } from "../core/types.js";
import { setConfigValue } from "../store/config.js";
import { ensureHome } from "../store/home.js";
import type { CliContext } from "./common/context.js";
import { connectDaemon } from "./common/connect.js";
import { chooseDemoRuntime, startDaemonFor, stopDaemonFor } from "./common/daemon-control.js";
import { DEMO_TASKS, demoScript } from "./demo-script.js";
import { EXIT } from "./common/exit-codes.js";
import { renderCard } from "./format/card.js";
import { packageRoot } from "./common/home.js";
import { printJson } from "./common/io.js";
import { watchTasks } from "./commands/watch.js";
import { choice, jsonOption } from "./common/options.js";

interface DemoOpts {
  runtime?: "herdr" | "tmux" | "headless";
  keep?: boolean;
  json?: boolean;
}

function git(cwd: string, args: string[]): void {
  execFileSync("git", args, { cwd, stdio: "ignore", env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1" } });
}

function makeRepo(dir: string): void {
  mkdirSync(join(dir, "src"), { recursive: true });
  writeFileSync(join(dir, "README.md"), "# demo app\n\nRun it with `npm start`.\n");
  writeFileSync(join(dir, "src", "app.js"), 'console.log("hello");\n');
  writeFileSync(join(dir, "package.json"), '{ "name": "demo-app", "version": "1.0.0", "type": "module" }\n');
  git(dir, ["init", "-q"]);
  git(dir, ["config", "user.name", "dsh-herdr demo"]);
  git(dir, ["config", "user.email", "demo@dsh-herdr.invalid"]);
  // The user's own signing setup (commit.gpgsign=true in ~/.gitconfig) must not fail the demo's commits.
  git(dir, ["config", "commit.gpgsign", "false"]);
  git(dir, ["config", "tag.gpgsign", "false"]);
  git(dir, ["add", "-A"]);
  git(dir, ["commit", "-q", "-m", "demo app"]);
}

/** Processes (other than zombies) whose command line names `dir`: the demo's pi children all do (--session). */
function processesNaming(dir: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      if (/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${name}/stat`, "utf8"))) continue;
      if (readFileSync(`/proc/${name}/cmdline`, "utf8").includes(dir)) out.push(Number(name));
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/** The demo leaves nothing running: what is still there a few seconds after the close is named and ended. */
async function endLeftovers(dir: string, say: (s: string) => void): Promise<number> {
  if (!existsSync("/proc")) return 0;
  let left = processesNaming(dir);
  for (let i = 0; i < 50 && left.length > 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    left = processesNaming(dir);
  }
  if (left.length === 0) return 0;
  say(`demo: ${left.length} process(es) still running after the close (${left.join(", ")}); ending them`);
  for (const pid of left) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      /* already gone */
    }
  }
  return left.length;
}

/** Start fixtures/scripted-model as a process; resolves with its URL once it prints it. */
function startModel(scriptPath: string, logPath: string): Promise<{ url: string; proc: ChildProcess }> {
  const server = join(packageRoot, "dist", "fixtures", "scripted-model", "server.js");
  if (!existsSync(server))
    throw new DshError(
      "INTERNAL",
      `${server} is missing: the demo runs from a dsh-herdr checkout; run \`npm run build\` first`,
    );
  const proc = spawn(process.execPath, [server, "--script", scriptPath, "--port", "0", "--log", logPath], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: proc.stdout! });
    proc.once("exit", (code) =>
      reject(new DshError("INTERNAL", `the scripted model exited (code ${code}) before it listened`)),
    );
    lines.once("line", (line) => {
      lines.close();
      proc.removeAllListeners("exit");
      resolve({ url: (JSON.parse(line) as { url: string }).url, proc });
    });
  });
}

/** The fixture that writes pi's models.json for the scripted model (fixtures are not part of the published package). */
async function piAgentDir(dir: string, url: string): Promise<{ env: Record<string, string>; model: string }> {
  const file = join(packageRoot, "dist", "fixtures", "scripted-model", "agent-dir.js");
  const mod = (await import(pathToFileURL(file).href)) as {
    preparePiAgentDir(d: string, u: string): { env: Record<string, string>; model: string };
  };
  return mod.preparePiAgentDir(dir, url);
}

export async function runDemo(ctx: CliContext, o: DemoOpts): Promise<number> {
  const say = (s: string) => (o.json ? undefined : ctx.io.out(s + "\n"));
  const tmp = mkdtempSync(join(tmpdir(), "dsh-demo-"));
  const home = join(tmp, "home");
  const repo = join(tmp, "repo");
  const tmuxSocket = `dsh-demo-${process.pid}`;
  let model: ChildProcess | undefined;
  let daemonEnv: NodeJS.ProcessEnv | undefined;
  try {
    makeRepo(repo);
    writeFileSync(join(tmp, "script.json"), JSON.stringify(demoScript(), null, 2));
    const started = await startModel(join(tmp, "script.json"), join(tmp, "model-requests.jsonl"));
    model = started.proc;
    const pi = await piAgentDir(join(tmp, "pi"), started.url);
    const runtime = o.runtime ?? (await chooseDemoRuntime(ctx.io.env));
    await ensureHome(home);
    await setConfigValue(home, "defaultModel", pi.model);
    await setConfigValue(home, "runtime", runtime);
    await setConfigValue(home, "tmuxSocket", tmuxSocket);
    say(`demo: repo ${repo}, home ${home}, runtime ${runtime}, model ${pi.model} at ${started.url}`);

    daemonEnv = { ...ctx.io.env, ...pi.env, DSH_HERDR_HOME: home };
    await startDaemonFor(home, { env: daemonEnv });
    const conn = await connectDaemon(home);
    const ids: string[] = [];
    try {
      for (const t of DEMO_TASKS) {
        const r = await conn.request("task.spawn", {
          cwd: repo,
          prompt: t.prompt,
          role: t.role,
          brief: t.brief,
          runtime,
          ...(t.isolated ? { isolated: true } : {}),
        });
        ids.push(r.taskId);
        say(`spawned ${r.taskId} ${r.name} (${t.role}${t.isolated ? ", isolated worktree" : ""}): ${t.brief}`);
      }
      const demoCtx: CliContext = { ...ctx, home, connect: () => connectDaemon(home) };
      if (!o.json) await watchTasks(demoCtx, { taskIds: ids, untilSettled: true });
      const waited = await conn.request(
        "task.wait",
        { taskIds: ids, mode: "all", timeoutMs: 120_000 },
        { timeoutMs: 130_000 },
      );
      const results = ids
        .map((id) => waited.results.find((r) => r.taskId === id))
        .filter((r): r is AgentResult => r !== undefined);
      const patches = results.map((r) =>
        r.diff && existsSync(r.diff.patchPath) ? readFileSync(r.diff.patchPath, "utf8") : "",
      );
      const workersOk = results
        .filter((r) => r.role === "worker")
        .every((r, i) => r.status === "completed" && (patches[i] ?? "") !== "");
      const ok =
        !waited.timedOut &&
        results.length === ids.length &&
        results.every((r) => r.status === "completed") &&
        workersOk;
      if (o.json) printJson(ctx.io, { ok, runtime, home, repo, results, patches });
      else {
        for (const [i, r] of results.entries()) {
          say("\n" + renderCard(r).trimEnd());
          if (patches[i]) say(`--- diff ${r.taskId} ---\n${(patches[i] ?? "").trimEnd()}`);
        }
        say(ok ? "\ndemo: ok: three AgentResults, both workers with a diff" : "\ndemo: FAILED: see the cards above");
      }
      for (const id of ids) await conn.request("task.close", { taskId: id, closePane: true }).catch(() => undefined);
      const leftovers = await endLeftovers(join(home, "tasks"), say);
      return ok && leftovers === 0 ? EXIT.ok : EXIT.failed;
    } finally {
      conn.close();
    }
  } finally {
    if (daemonEnv) await stopDaemonFor(home).catch(() => undefined);
    model?.kill("SIGTERM");
    try {
      execFileSync("tmux", ["-L", tmuxSocket, "kill-server"], { stdio: "ignore" });
    } catch {
      /* no tmux server was started (headless or herdr) */
    }
    // tmux 3.3 leaves the socket file of a killed server behind.
    rmSync(join(ctx.io.env["TMUX_TMPDIR"] ?? "/tmp", `tmux-${process.getuid?.() ?? 0}`, tmuxSocket), { force: true });
    if (o.keep) say(`kept: ${tmp} (home ${home}, repo ${repo}); remove it with rm -rf ${tmp}`);
    else rmSync(tmp, { recursive: true, force: true });
  }
}

export function registerDemoCommand(program: Command, ctx: CliContext): void {
  const demo = program
    .command("demo")
    .description("hermetic demo: two isolated workers and a reviewer, real pi against a local scripted model")
    .addOption(
      choice("--runtime <runtime>", "force a runtime (default: herdr if reachable, else tmux, else headless)", [
        "herdr",
        "tmux",
        "headless",
      ]),
    )
    .option("--keep", "leave the temp home and repo for inspection");
  jsonOption(demo);
  demo.addHelpText("after", "\nExamples:\n  $ dsh-herdr demo\n  $ dsh-herdr demo --runtime headless --keep");
  demo.action(async (o: DemoOpts) => {
    ctx.exitCode = await runDemo(ctx, o);
  });
}
