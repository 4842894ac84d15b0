// daemon log (daemon.log as readable lines) and daemon install-unit (a systemd user unit that runs `daemon run`).
import type { Command } from "commander";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DshError } from "../../../core/errors.js";
import { effectiveLocale, isUtf8Locale } from "../../../core/session/provider-keys.js";
import { envFilePath } from "../../../store/env-file.js";
import { credentialGaps, unitSide } from "../../doctor/daemon.js";
import { parseUnit, unitDir } from "../../doctor/unit.js";
import type { CliContext } from "../../common/context.js";
import { colorEnabled, painter, type Paint } from "../../format/color.js";
import { packageRoot } from "../../common/home.js";
import { printJson } from "../../common/io.js";
import { resolveId } from "../../common/task-files.js";
import { examples, jsonOption, usage } from "../../common/options.js";

const LEVELS: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };
const LEVEL_NAME: Record<number, string> = Object.fromEntries(Object.entries(LEVELS).map(([k, v]) => [v, k]));
const LEVEL_STYLE: Record<string, string> = {
  trace: "dim",
  debug: "dim",
  info: "green",
  warn: "yellow",
  error: "red",
  fatal: "red",
};

/** pino's own fields: shown in the line's head, not repeated as key=value. */
const HEAD_KEYS = new Set(["level", "time", "pid", "hostname", "msg", "v"]);

interface LogFilter {
  minLevel: number;
  taskId?: string;
}

/** One daemon.log line as a person reads it: `12:03:04.512 INFO  task started taskId=t… runtime=tmux`. */
export function formatLogLine(line: string, f: LogFilter, paint: Paint): string | undefined {
  if (line.trim() === "") return undefined;
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(line) as Record<string, unknown>;
  } catch {
    // Not pino's: the daemon's own stderr (a crash trace) goes to the same file; shown as is, unless filtered.
    return f.minLevel <= LEVELS["info"]! && f.taskId === undefined
      ? line
      : f.taskId !== undefined && line.includes(f.taskId)
        ? line
        : undefined;
  }
  const level = typeof o["level"] === "number" ? o["level"] : LEVELS["info"]!;
  if (level < f.minLevel) return undefined;
  if (f.taskId !== undefined && o["taskId"] !== f.taskId && !line.includes(f.taskId)) return undefined;
  const name = LEVEL_NAME[level] ?? String(level);
  const time = typeof o["time"] === "number" ? new Date(o["time"]).toISOString().slice(11, 23) : "--:--:--.---";
  const extra = Object.entries(o)
    .filter(([k]) => !HEAD_KEYS.has(k))
    .map(([k, v]) => `${k}=${typeof v === "string" && !/\s/.test(v) ? v : JSON.stringify(v)}`);
  const head = `${paint("dim", time)} ${paint(LEVEL_STYLE[name] ?? "bold", name.toUpperCase().padEnd(5))}`;
  return [head, String(o["msg"] ?? ""), ...extra].filter((x) => x !== "").join(" ");
}

function readText(path: string, from = 0): string {
  try {
    const buf = readFileSync(path);
    return buf.subarray(Math.min(from, buf.length)).toString("utf8");
  } catch {
    return "";
  }
}

function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

export interface UnitOptions {
  home: string;
  nodePath: string;
  binPath: string;
  path: string;
  piBin?: string;
  /** A UTF-8 locale for LANG (tmux and pi's TUI need one; systemd's user manager may have none). */
  lang: string;
  piDir?: string;
}

/**
 * The systemd user unit: `daemon run` in the foreground under systemd, the home, PATH, a UTF-8 LANG and the pi dir of
 * the shell that installed it, then `<home>/env` (EnvironmentFile=, `-`: absent is fine; it overrides the lines
 * above, and the daemon reads it at start too). KillMode=process: `systemctl --user stop` stops the daemon only;
 * children keep running in their panes and are picked up on the next start, as with `dsh-herdr daemon stop`.
 */
export function unitText(o: UnitOptions): string {
  // systemd expands %-specifiers in every value: a literal % is %%.
  const pct = (s: string) => s.replace(/%/g, "%%");
  const esc = (s: string) => pct(/[\s"\\]/.test(s) ? `"${s.replace(/(["\\])/g, "\\$1")}"` : s);
  return [
    "[Unit]",
    "Description=dsh-herdr supervisor daemon for pi coding agents",
    `Documentation=file://${join(packageRoot, "docs", "cli.md")}`,
    "",
    "[Service]",
    "Type=simple",
    `ExecStart=${esc(o.nodePath)} ${esc(o.binPath)} daemon run`,
    `Environment=${esc(`DSH_HERDR_HOME=${o.home}`)}`,
    `Environment=${esc(`PATH=${o.path}`)}`,
    ...(o.piBin ? [`Environment=${esc(`DSH_HERDR_PI_BIN=${o.piBin}`)}`] : []),
    `Environment=${esc(`LANG=${o.lang}`)}`,
    ...(o.piDir ? [`Environment=${esc(`PI_CODING_AGENT_DIR=${o.piDir}`)}`] : []),
    `EnvironmentFile=-${pct(envFilePath(o.home))}`,
    "KillMode=process",
    "Restart=on-failure",
    "RestartSec=2",
    "",
    "[Install]",
    "WantedBy=default.target",
    "",
  ].join("\n");
}

export function registerDaemonExtras(daemon: Command, ctx: CliContext): void {
  const log = daemon
    .command("log")
    .description("daemon.log as readable lines (the log is capped at 10 MiB; the previous part is daemon.log.1)")
    .option("-f, --follow", "keep printing new lines until Ctrl+C")
    .option("-n, --lines <n>", "how many of the last matching lines to print first", "200")
    .option("--level <level>", `only this level and above: ${Object.keys(LEVELS).join(", ")}`)
    .option("--task <id>", "only lines about this task (id, suffix or agent name)");
  jsonOption(log);
  examples(log, ["dsh-herdr daemon log", "dsh-herdr daemon log -f --level warn", "dsh-herdr daemon log --task vzzn"]);
  log.action(async (o: { follow?: boolean; lines: string; level?: string; task?: string; json?: boolean }) => {
    const n = Number(o.lines);
    if (!Number.isInteger(n) || n < 0) throw usage(`--lines ${o.lines}: give a whole number (0 or more)`);
    if (o.level !== undefined && LEVELS[o.level.toLowerCase()] === undefined)
      throw usage(`--level ${o.level}: use one of ${Object.keys(LEVELS).join(", ")}`);
    const filter: LogFilter = { minLevel: o.level ? LEVELS[o.level.toLowerCase()]! : 0 };
    if (o.task !== undefined) filter.taskId = resolveId(ctx.home, o.task);
    const path = join(ctx.home, "daemon.log");
    if (!existsSync(path) && !o.follow)
      throw new DshError(
        "DAEMON_UNAVAILABLE",
        `${path} does not exist yet; start the daemon with \`dsh-herdr daemon start\``,
      );
    const paint = painter(!o.json && colorEnabled(ctx.io.env, ctx.io.isTTY));
    const show = (line: string): string | undefined => {
      const text = formatLogLine(line, filter, paint);
      return text === undefined ? undefined : o.json ? line : text;
    };
    const lines = (text: string) =>
      text
        .split("\n")
        .map(show)
        .filter((l): l is string => l !== undefined);
    // The rotated part first, so the last N lines span a rotation.
    const first = lines(readText(`${path}.1`) + readText(path));
    for (const l of n === 0 ? [] : first.slice(-n)) ctx.io.out(l + "\n");
    if (!o.follow) return;
    let offset = fileSize(path);
    let partial = "";
    while (!ctx.signal.aborted) {
      await sleep(250, undefined, { signal: ctx.signal }).catch(() => undefined);
      const size = fileSize(path);
      if (size < offset) offset = 0; // rotated: the new daemon.log starts from its beginning
      if (size === offset) continue;
      const chunk = partial + readText(path, offset);
      offset = size;
      const cut = chunk.lastIndexOf("\n");
      partial = cut < 0 ? chunk : chunk.slice(cut + 1);
      for (const l of lines(cut < 0 ? "" : chunk.slice(0, cut))) ctx.io.out(l + "\n");
    }
  });

  const install = daemon
    .command("install-unit")
    .description("write a systemd user unit that runs `dsh-herdr daemon run` at login, and print how to enable it")
    .option("--name <name>", "unit name", "dsh-herdr")
    .option("--print", "print the unit instead of writing it")
    .option("--force", "replace an existing unit that differs");
  jsonOption(install);
  examples(install, [
    "dsh-herdr daemon install-unit",
    "dsh-herdr daemon install-unit --print",
    "DSH_HERDR_HOME=~/work/dsh dsh-herdr daemon install-unit --name dsh-work",
  ]);
  install.action((o: { name: string; print?: boolean; force?: boolean; json?: boolean }) => {
    if (!/^[A-Za-z0-9_.@-]+$/.test(o.name)) throw usage(`--name ${o.name}: use letters, digits, - _ . @ only`);
    const env = ctx.io.env;
    const unit = unitText({
      home: ctx.home,
      nodePath: process.execPath,
      binPath: join(packageRoot, "bin", "dsh-herdr"),
      path: env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
      ...(env.DSH_HERDR_PI_BIN ? { piBin: env.DSH_HERDR_PI_BIN } : {}),
      lang: isUtf8Locale(effectiveLocale(env)) ? effectiveLocale(env)! : "C.UTF-8",
      ...(env.PI_CODING_AGENT_DIR ? { piDir: env.PI_CODING_AGENT_DIR } : {}),
    });
    if (o.print) return void ctx.io.out(unit);
    const dir = unitDir(env);
    const file = join(dir, `${o.name}.service`);
    // Provider keys this shell has that the unit's daemon would not (its Environment= lines and <home>/env).
    const found = credentialGaps(env, unitSide(parseUnit(unit, file), env));
    const gaps = [...found.fail, ...found.warn];
    const warnings = gaps.map(
      (g) =>
        `the unit's daemon will not have ${g.variable} (the key of ${g.provider}), which this shell has: dsh-herdr daemon env set ${g.variable}`,
    );
    const enable = `systemctl --user daemon-reload && systemctl --user enable --now ${o.name}.service`;
    if (existsSync(file) && readFileSync(file, "utf8") !== unit && !o.force) {
      throw usage(`${file} exists and differs; pass --force to replace it (or --print to compare)`);
    }
    try {
      mkdirSync(dir, { recursive: true });
      writeFileSync(file, unit, { mode: 0o644 });
    } catch (e) {
      throw new DshError(
        "HOME_UNWRITABLE",
        `cannot write ${file}: ${(e as Error).message}; use --print and place the unit yourself`,
      );
    }
    if (o.json)
      return printJson(ctx.io, {
        unit: file,
        name: `${o.name}.service`,
        enable,
        envFile: envFilePath(ctx.home),
        ...(warnings.length ? { warnings } : {}),
      });
    for (const w of warnings) ctx.io.err(`warning: ${w}\n`);
    ctx.io.out(
      [
        `wrote ${file}`,
        `its environment: PATH, LANG${env.PI_CODING_AGENT_DIR ? ", PI_CODING_AGENT_DIR" : ""} of this shell, then ${envFilePath(ctx.home)} (dsh-herdr daemon env set NAME=value; API keys go there)`,
        `enable it now and at every login:`,
        `  ${enable}`,
        `keep it running after logout (and start it at boot): loginctl enable-linger $USER`,
        `logs: dsh-herdr daemon log -f   status: systemctl --user status ${o.name}`,
        "",
      ].join("\n"),
    );
  });
}
