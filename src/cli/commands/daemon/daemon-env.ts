// daemon env set|unset|list: the daemon's environment file (<home>/env, src/store/env-file.ts), which the daemon
// reads at start and a systemd unit names in EnvironmentFile=. Values are never printed; `list` shows names.
// daemon restart: stop, then start from this shell (the new daemon reads the file again).
import type { Command } from "commander";
import { daemonStatus } from "../../../client/daemon-control.js";
import { DshError } from "../../../core/errors.js";
import { ensureHome } from "../../../store/home.js";
import { envFilePath, isEnvName, readEnvFile, updateEnvFile } from "../../../store/env-file.js";
import type { CliContext } from "../../common/context.js";
import { restartHint, startDaemonFor, stopDaemonFor } from "../../common/daemon-control.js";
import { printJson } from "../../common/io.js";
import { examples, jsonOption, usage } from "../../common/options.js";

interface RunningEnv {
  pid: number;
  names?: string[];
}

async function running(home: string): Promise<RunningEnv | undefined> {
  const s = await daemonStatus(home).catch(() => undefined);
  if (!s?.running) return undefined;
  const env = s["env"] as { names?: string[] } | undefined;
  return { pid: s.pid!, ...(env?.names ? { names: env.names } : {}) };
}

/** `NAME=value`, or `NAME` alone (its value taken from this shell's environment). Never echoes a value. */
function parseAssignment(arg: string, index: number, env: NodeJS.ProcessEnv): [string, string] {
  const eq = arg.indexOf("=");
  const name = eq < 0 ? arg : arg.slice(0, eq);
  if (!isEnvName(name))
    throw usage(
      eq < 0
        ? `argument ${index + 1} is neither NAME=value nor a variable NAME (letters, digits and _, not starting with a digit)`
        : `${JSON.stringify(name)} (argument ${index + 1}, before "=") is not a variable name: letters, digits and _`,
    );
  if (eq >= 0) return [name, arg.slice(eq + 1)];
  const v = env[name];
  if (v === undefined)
    throw usage(`${name} is not set in this shell; give its value (${name}=value) or export it first`);
  return [name, v];
}

export function registerDaemonEnv(daemon: Command, ctx: CliContext): void {
  const env = daemon
    .command("env")
    .description(
      "the daemon's environment file (<home>/env, mode 0600): API keys, LANG, PI_CODING_AGENT_DIR... read by the daemon at start",
    );

  const set = env
    .command("set")
    .description(
      "set variables: NAME=value, or NAME alone to take its value from this shell (values are never printed)",
    )
    .argument("<assignment...>", "NAME=value or NAME");
  jsonOption(set);
  examples(set, [
    "dsh-herdr daemon env set ANTHROPIC_API_KEY        # this shell's value",
    "dsh-herdr daemon env set LANG=C.UTF-8 PI_CODING_AGENT_DIR=~/.pi/agent",
  ]);
  set.action(async (args: string[], o: { json?: boolean }) => {
    const changes = new Map(args.map((a, i) => parseAssignment(a, i, ctx.io.env)));
    await ensureHome(ctx.home);
    await updateEnvFile(ctx.home, changes);
    await report(ctx, [...changes.keys()], "set", o.json);
  });

  const unset = env
    .command("unset")
    .description("remove variables from the file")
    .argument("<name...>", "variable names");
  jsonOption(unset);
  unset.action(async (names: string[], o: { json?: boolean }) => {
    names.forEach((n, i) => {
      if (!isEnvName(n)) throw usage(`argument ${i + 1} is not a variable name (letters, digits and _)`);
    });
    const had = readEnvFile(ctx.home).vars ?? new Map<string, string>();
    const present = names.filter((n) => had.has(n));
    if (present.length > 0) await updateEnvFile(ctx.home, new Map(present.map((n) => [n, undefined])));
    const absent = names.filter((n) => !had.has(n));
    if (absent.length > 0 && !o.json) ctx.io.err(`not in ${envFilePath(ctx.home)}: ${absent.join(", ")}\n`);
    await report(ctx, present, "removed", o.json);
  });

  const list = env.command("list").description("the variable names in the file (never their values)");
  jsonOption(list);
  list.action((o: { json?: boolean }) => {
    const f = readEnvFile(ctx.home);
    const keys = [...(f.vars?.keys() ?? [])];
    if (o.json) return printJson(ctx.io, { file: f.path, exists: f.vars !== undefined, keys });
    if (keys.length === 0)
      return ctx.io.err(`no variables in ${f.path}; add one with \`dsh-herdr daemon env set NAME=value\`\n`);
    ctx.io.out(keys.map((k) => k + "\n").join(""));
    if (f.mode !== undefined && (f.mode & 0o077) !== 0)
      ctx.io.err(`warning: ${f.path} has mode ${f.mode.toString(8)}; others can read it: chmod 600 ${f.path}\n`);
  });

  const restart = daemon
    .command("restart")
    .description("stop the daemon and start it again from this shell (it reads <home>/env and config.json again)");
  jsonOption(restart);
  restart.action(async (o: { json?: boolean }) => {
    const r = await running(ctx.home);
    if (r?.names?.includes("INVOCATION_ID"))
      throw new DshError(
        "BAD_STATE",
        `the daemon (pid ${r.pid}) runs under systemd; restart it there so systemd keeps it: systemctl --user restart dsh-herdr (your unit's name)`,
      );
    const stopped = await stopDaemonFor(ctx.home);
    const started = await startDaemonFor(ctx.home, { env: ctx.io.env });
    if (o.json) return printJson(ctx.io, { wasRunning: stopped.wasRunning, pid: started.pid });
    ctx.io.out(
      `daemon ${stopped.wasRunning ? "restarted" : "started"} (pid ${started.pid}) at ${ctx.home}, with ${envFilePath(ctx.home)}\n`,
    );
  });
}

async function report(ctx: CliContext, names: string[], verb: string, json?: boolean): Promise<void> {
  const file = envFilePath(ctx.home);
  const r = await running(ctx.home);
  if (json) return printJson(ctx.io, { file, [verb]: names, ...(r ? { restart: restartHint(r.names) } : {}) });
  if (names.length > 0) ctx.io.out(`${verb} ${names.join(", ")} in ${file}\n`);
  if (r)
    ctx.io.err(
      `the running daemon (pid ${r.pid}) reads ${file} at start: restart it to apply: ${restartHint(r.names)}\n`,
    );
}
