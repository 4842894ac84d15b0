// `doctor`: one check per dependency; every FAIL names the fix.
import { execa } from "execa";
import { existsSync, statSync, statfsSync, unlinkSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { daemonStatus } from "../../client/daemon-control.js";
import { resolveSpawnModel } from "../../core/model-choice.js";
import { PI_INSTALL_HINT, findPi, resolvePiBin } from "../../pi/launch.js";
import { herdrPing } from "../../runtime/herdr/client.js";
import { resolveHerdrSocketPath } from "../../runtime/herdr/socket-path.js";

export type CheckLevel = "ok" | "warn" | "fail";
export interface CheckResult {
  name: string;
  level: CheckLevel;
  detail: string;
  fix?: string;
}

export interface DoctorContext {
  env: NodeJS.ProcessEnv;
  home: string;
  packageRoot: string;
  /** Validates config.json; throws with a message naming the problem. */
  validateConfig?: (home: string) => Promise<void>;
  /** The effective config (for the default model); absent or throwing: the model check uses pi's default. */
  loadConfig?: (home: string) => Promise<{ defaultModel?: string; modelAliases: Record<string, string> }>;
}

export const MIN_NODE = [20, 6] as const;
/** The oldest pi the child and owner extensions are tested against. */
export const MIN_PI = "0.73.1";
const LOW_DISK = 200 * 1024 * 1024;
const WARN_DISK = 1024 * 1024 * 1024;

/** Compare dotted versions numerically; the pre-release tail is ignored. */
export function compareVersions(a: string, b: string): number {
  const pa = a
    .replace(/^v/, "")
    .split(/[.-]/)
    .map((x) => Number.parseInt(x, 10) || 0);
  const pb = b
    .replace(/^v/, "")
    .split(/[.-]/)
    .map((x) => Number.parseInt(x, 10) || 0);
  for (let i = 0; i < 3; i++) if ((pa[i] ?? 0) !== (pb[i] ?? 0)) return (pa[i] ?? 0) - (pb[i] ?? 0);
  return 0;
}

async function versionOf(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<string | undefined> {
  const r = await execa(cmd, args, { env, reject: false, timeout: 10_000, stdin: "ignore" });
  if (r.failed) return undefined;
  const m = /\d+\.\d+(\.\d+)?/.exec(`${r.stdout} ${r.stderr}`);
  return m?.[0];
}

export function checkNode(version = process.versions.node): CheckResult {
  const ok = compareVersions(version, MIN_NODE.join(".")) >= 0;
  return ok
    ? { name: "node", level: "ok", detail: `node ${version}` }
    : {
        name: "node",
        level: "fail",
        detail: `node ${version} is too old`,
        fix: `install Node ${MIN_NODE.join(".")} or newer`,
      };
}

export async function checkGit(env: NodeJS.ProcessEnv): Promise<CheckResult> {
  const v = await versionOf("git", ["--version"], env);
  return v
    ? { name: "git", level: "ok", detail: `git ${v}` }
    : {
        name: "git",
        level: "fail",
        detail: "git not found on PATH",
        fix: "install git (apt-get install git / brew install git)",
      };
}

/**
 * The pi the daemon launches: resolved by the daemon's own function (DSH_HERDR_PI_BIN, else PATH, else the package's
 * copy) from this environment, which is the one a daemon started from here gets.
 */
export async function checkPi(env: NodeJS.ProcessEnv): Promise<CheckResult & { bin?: string }> {
  let found: { path: string; version: string };
  try {
    found = await findPi({ ...env, PI_OFFLINE: "1", PI_SKIP_VERSION_CHECK: "1" });
  } catch (e) {
    const fix = env.DSH_HERDR_PI_BIN
      ? "point DSH_HERDR_PI_BIN at a pi binary, or unset it to use pi on PATH"
      : `install pi: ${PI_INSTALL_HINT}`;
    return { name: "pi", level: "fail", detail: (e as Error).message, fix };
  }
  if (compareVersions(found.version, MIN_PI) < 0) {
    return {
      name: "pi",
      level: "fail",
      bin: found.path,
      detail: `pi ${found.version} (${found.path}${env.DSH_HERDR_PI_BIN ? ", from DSH_HERDR_PI_BIN" : ", first on PATH"}) is older than ${MIN_PI}, which the extensions need`,
      fix: `put a newer pi first on PATH or set DSH_HERDR_PI_BIN to one (${PI_INSTALL_HINT})`,
    };
  }
  return { name: "pi", level: "ok", detail: `pi ${found.version} (${found.path})`, bin: found.path };
}

/** `pi --list-models` lists only the models pi has credentials for (env keys, auth.json, models.json). */
async function listModels(bin: string, env: NodeJS.ProcessEnv): Promise<string[] | undefined> {
  const r = await execa(bin, ["--list-models"], {
    env: { ...env, PI_OFFLINE: "1", PI_SKIP_VERSION_CHECK: "1" },
    extendEnv: false,
    reject: false,
    timeout: 30_000,
    stdin: "ignore",
  });
  if (r.exitCode !== 0) return undefined;
  // 0.73.1 prints the table on stderr; read both streams.
  // The table: a "provider  model ..." header, then one row per model; anything else ("No models available") is not.
  const lines = `${String(r.stdout)}\n${String(r.stderr)}`.split("\n").map((l) => l.trim().split(/\s+/));
  const header = lines.findIndex((c) => c[0] === "provider" && c[1] === "model");
  if (header < 0) return [];
  const rows: string[] = [];
  for (const c of lines.slice(header + 1)) {
    if (c.length < 3 || c[0] === "") break;
    rows.push(`${c[0]}/${c[1]}`);
  }
  return rows;
}

/** Does pi know the default model, and does its provider have credentials? */
export async function checkModel(
  env: NodeJS.ProcessEnv,
  bin: string | undefined,
  config: { defaultModel?: string; modelAliases: Record<string, string> } | undefined,
): Promise<CheckResult> {
  if (!bin)
    return {
      name: "model",
      level: "warn",
      detail: "cannot check the default model without a working pi",
      fix: "fix the pi check first",
    };
  let model: string | undefined;
  try {
    model = config ? resolveSpawnModel(undefined, config) : undefined;
  } catch (e) {
    return {
      name: "model",
      level: "fail",
      detail: (e as Error).message,
      fix: "define the alias, or set defaultModel to provider/id (dsh-herdr config set defaultModel provider/id)",
    };
  }
  const models = await listModels(bin, env);
  if (models === undefined)
    return {
      name: "model",
      level: "warn",
      detail: `${bin} --list-models failed: cannot tell which models have credentials`,
      fix: "run `pi --list-models` to see why",
    };
  const login =
    "set the provider's API key in the environment (e.g. ANTHROPIC_API_KEY), run pi and /login, or add the provider to pi's models.json";
  if (models.length === 0)
    return {
      name: "model",
      level: "fail",
      detail: "pi has no model with credentials (pi --list-models lists none): every child would fail",
      fix: login,
    };
  if (model === undefined)
    return {
      name: "model",
      level: "ok",
      detail: `no defaultModel: pi picks its own default among ${models.length} model(s) with credentials`,
    };
  if (models.includes(model))
    return { name: "model", level: "ok", detail: `default model ${model} (credentials found)` };
  const known = models.some((m) => m.split("/")[0] === model.split("/")[0]);
  return {
    name: "model",
    level: "fail",
    detail: `default model ${model} is not among the models pi has credentials for${known ? " (its provider has others: check the id)" : ""}`,
    fix: known ? "pick an id from `pi --list-models` (dsh-herdr config set defaultModel provider/id)" : login,
  };
}

/** What the running daemon's children get vs this shell: a daemon started elsewhere runs another pi or pi dir. */
export async function checkDaemonEnv(home: string, env: NodeJS.ProcessEnv): Promise<CheckResult> {
  const s = await daemonStatus(home).catch(() => ({ running: false }) as Record<string, unknown>);
  if (!s.running)
    return {
      name: "daemon",
      level: "ok",
      detail: "no daemon running (the next command starts one with this environment)",
    };
  const de = s.env as { piBin: string | null; piDir: string | null; path: string } | undefined;
  const restart = "restart the daemon: dsh-herdr daemon stop (the next command starts it with this environment)";
  if (!de)
    return {
      name: "daemon",
      level: "warn",
      detail: `the running daemon (pid ${String(s.pid)}) does not report its environment`,
      fix: restart,
    };
  let myPi: string | null = null;
  try {
    myPi = resolvePiBin(env);
  } catch {
    // compared as "none"
  }
  const diffs: string[] = [];
  if ((env.PI_CODING_AGENT_DIR ?? null) !== de.piDir)
    diffs.push(`PI_CODING_AGENT_DIR ${de.piDir ?? "(unset)"} there, ${env.PI_CODING_AGENT_DIR ?? "(unset)"} here`);
  if (myPi !== de.piBin) diffs.push(`pi ${de.piBin ?? "(none)"} there, ${myPi ?? "(none)"} here`);
  if ((env.PATH ?? "") !== de.path) diffs.push("PATH differs");
  if (diffs.length === 0)
    return {
      name: "daemon",
      level: "ok",
      detail: `the running daemon (pid ${String(s.pid)}) has this pi, pi dir and PATH`,
    };
  return {
    name: "daemon",
    level: "warn",
    detail: `the running daemon (pid ${String(s.pid)}) runs children with another environment: ${diffs.join("; ")}`,
    fix: restart,
  };
}

export async function checkTmux(env: NodeJS.ProcessEnv): Promise<CheckResult> {
  const v = await versionOf("tmux", ["-V"], env);
  return v
    ? { name: "tmux", level: "ok", detail: `tmux ${v}` }
    : {
        name: "tmux",
        level: "warn",
        detail: "tmux not found: the tmux runtime is unavailable (herdr or headless still work)",
        fix: "install tmux to watch children in panes",
      };
}

export async function checkHerdr(env: NodeJS.ProcessEnv): Promise<CheckResult> {
  let sock: string;
  try {
    sock = resolveHerdrSocketPath({ env });
  } catch (e) {
    return { name: "herdr", level: "fail", detail: (e as Error).message, fix: "fix or unset HERDR_SESSION" };
  }
  if (!existsSync(sock)) {
    return {
      name: "herdr",
      level: "warn",
      detail: `Herdr not running (no socket at ${sock}); tmux or headless will be used`,
      fix: "start Herdr (`herdr`) to run children in Herdr panes",
    };
  }
  const pong = await herdrPing({ env, timeoutMs: 3000 });
  if (pong.ok)
    return {
      name: "herdr",
      level: "ok",
      detail: `Herdr ${pong.version ?? "?"}, protocol ${pong.protocol ?? "?"} at ${sock}`,
    };
  if (pong.code === "HERDR_TOO_OLD")
    return {
      name: "herdr",
      level: "fail",
      detail: pong.reason ?? "Herdr is too old",
      fix: "update Herdr (herdr update) or use --runtime tmux",
    };
  return {
    name: "herdr",
    level: "fail",
    detail: `Herdr socket ${sock} does not answer ping: ${pong.reason ?? "no reply"}`,
    fix: "restart Herdr, or unset HERDR_SOCKET_PATH / HERDR_SESSION so the default session is used",
  };
}

export function checkHome(home: string): CheckResult[] {
  if (!existsSync(home)) {
    return [{ name: "home", level: "ok", detail: `${home} does not exist yet (created on first use)` }];
  }
  const out: CheckResult[] = [];
  const st = statSync(home);
  // Writability is what the daemon needs, not only the mode: write a probe file.
  const probe = join(home, `.doctor-probe-${process.pid}`);
  try {
    writeFileSync(probe, "probe\n");
    unlinkSync(probe);
  } catch (e) {
    return [
      {
        name: "home",
        level: "fail",
        detail: `cannot write in ${home} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
        fix: `make it writable (chmod u+w ${home}) or set DSH_HERDR_HOME to a directory you can write`,
      },
    ];
  }
  const mode = st.mode & 0o777;
  if (!st.isDirectory())
    out.push({
      name: "home",
      level: "fail",
      detail: `${home} is not a directory`,
      fix: `move it away or set DSH_HERDR_HOME to another path`,
    });
  else if (mode & 0o077)
    out.push({
      name: "home",
      level: "fail",
      detail: `${home} has mode ${mode.toString(8)}; others can reach the socket`,
      fix: `chmod 700 ${home}`,
    });
  else if (typeof process.getuid === "function" && st.uid !== process.getuid())
    out.push({
      name: "home",
      level: "fail",
      detail: `${home} belongs to uid ${st.uid}, not you`,
      fix: `set DSH_HERDR_HOME to a directory you own`,
    });
  else out.push({ name: "home", level: "ok", detail: `${home} (mode 700)` });
  const sock = join(home, "daemon.sock");
  if (existsSync(sock)) {
    const smode = statSync(sock).mode & 0o777;
    out.push(
      smode & 0o077
        ? {
            name: "socket",
            level: "fail",
            detail: `${sock} has mode ${smode.toString(8)}`,
            fix: `stop the daemon (dsh-herdr daemon stop) and chmod 600 ${sock}, or restart it`,
          }
        : { name: "socket", level: "ok", detail: `${sock} (mode 600)` },
    );
  }
  return out;
}

export async function checkConfig(ctx: DoctorContext): Promise<CheckResult> {
  const file = join(ctx.home, "config.json");
  if (!existsSync(file)) return { name: "config", level: "ok", detail: "no config.json (defaults apply)" };
  try {
    if (ctx.validateConfig) await ctx.validateConfig(ctx.home);
    else JSON.parse(await readFile(file, "utf8"));
    return { name: "config", level: "ok", detail: `${file} is valid` };
  } catch (e) {
    // Not `config set`: it reads the file first and fails on the same problem.
    return { name: "config", level: "fail", detail: `${file}: ${(e as Error).message}`, fix: `edit or delete ${file}` };
  }
}

export function checkDisk(home: string): CheckResult {
  let dir = home;
  while (!existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir);
  const fs = statfsSync(dir);
  const free = fs.bavail * fs.bsize;
  const mb = Math.floor(free / (1024 * 1024));
  if (free < LOW_DISK)
    return {
      name: "disk",
      level: "fail",
      detail: `${mb} MiB free at ${dir}`,
      fix: "free disk space (worktrees and patches need room) or run `dsh-herdr gc`",
    };
  if (free < WARN_DISK)
    return {
      name: "disk",
      level: "warn",
      detail: `${mb} MiB free at ${dir}`,
      fix: "free some disk space or run `dsh-herdr gc`",
    };
  return { name: "disk", level: "ok", detail: `${mb} MiB free at ${dir}` };
}

/** Run every check; slow probes run in parallel. */
export async function runDoctor(ctx: DoctorContext): Promise<CheckResult[]> {
  const cfg = ctx.loadConfig ? await ctx.loadConfig(ctx.home).catch(() => undefined) : undefined;
  const [git, pi, tmux, herdr, config, daemon] = await Promise.all([
    checkGit(ctx.env),
    checkPi(ctx.env),
    checkTmux(ctx.env),
    checkHerdr(ctx.env),
    checkConfig(ctx),
    checkDaemonEnv(ctx.home, ctx.env),
  ]);
  const model = await checkModel(ctx.env, pi.level === "ok" ? pi.bin : undefined, cfg);
  const { bin: _bin, ...piCheck } = pi;
  return [checkNode(), git, piCheck, model, tmux, herdr, ...checkHome(ctx.home), config, daemon, checkDisk(ctx.home)];
}
