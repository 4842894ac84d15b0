// `doctor`: one check per dependency; every FAIL names the fix.
import { execa } from "execa";
import { existsSync, statSync, statfsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
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
}

export const MIN_NODE = [20, 6] as const;
/** The oldest pi the child and owner extensions are tested against. */
export const MIN_PI = "0.73.1";
const LOW_DISK = 200 * 1024 * 1024;
const WARN_DISK = 1024 * 1024 * 1024;

/** Compare dotted versions numerically; the pre-release tail is ignored. */
export function compareVersions(a: string, b: string): number {
  const pa = a.replace(/^v/, "").split(/[.-]/).map((x) => Number.parseInt(x, 10) || 0);
  const pb = b.replace(/^v/, "").split(/[.-]/).map((x) => Number.parseInt(x, 10) || 0);
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
    : { name: "node", level: "fail", detail: `node ${version} is too old`, fix: `install Node ${MIN_NODE.join(".")} or newer` };
}

export async function checkGit(env: NodeJS.ProcessEnv): Promise<CheckResult> {
  const v = await versionOf("git", ["--version"], env);
  return v
    ? { name: "git", level: "ok", detail: `git ${v}` }
    : { name: "git", level: "fail", detail: "git not found on PATH", fix: "install git (apt-get install git / brew install git)" };
}

/** The pi the daemon would launch: the package's own copy first, then PATH. */
export function piCandidates(packageRoot: string): string[] {
  return [join(packageRoot, "node_modules", ".bin", "pi"), "pi"];
}

export async function checkPi(env: NodeJS.ProcessEnv, packageRoot: string): Promise<CheckResult> {
  for (const bin of piCandidates(packageRoot)) {
    if (bin !== "pi" && !existsSync(bin)) continue;
    const v = await versionOf(bin, ["--version"], { ...env, PI_OFFLINE: "1" });
    if (!v) continue;
    if (compareVersions(v, MIN_PI) < 0) {
      return { name: "pi", level: "warn", detail: `pi ${v} (${bin}) is older than ${MIN_PI}, which the extensions support`, fix: "upgrade pi: npm install -g @mariozechner/pi-coding-agent@latest" };
    }
    return { name: "pi", level: "ok", detail: `pi ${v} (${bin})` };
  }
  return { name: "pi", level: "fail", detail: "pi not found", fix: "install pi: npm install -g @mariozechner/pi-coding-agent (or run `npm ci` in the dsh-herdr checkout)" };
}

export async function checkTmux(env: NodeJS.ProcessEnv): Promise<CheckResult> {
  const v = await versionOf("tmux", ["-V"], env);
  return v
    ? { name: "tmux", level: "ok", detail: `tmux ${v}` }
    : { name: "tmux", level: "warn", detail: "tmux not found: the tmux runtime is unavailable (herdr or headless still work)", fix: "install tmux to watch children in panes" };
}

export async function checkHerdr(env: NodeJS.ProcessEnv): Promise<CheckResult> {
  let sock: string;
  try {
    sock = resolveHerdrSocketPath({ env });
  } catch (e) {
    return { name: "herdr", level: "fail", detail: (e as Error).message, fix: "fix or unset HERDR_SESSION" };
  }
  if (!existsSync(sock)) {
    return { name: "herdr", level: "warn", detail: `Herdr not running (no socket at ${sock}); tmux or headless will be used`, fix: "start Herdr (`herdr`) to run children in Herdr panes" };
  }
  const pong = await herdrPing({ env, timeoutMs: 3000 });
  if (pong.ok) return { name: "herdr", level: "ok", detail: `Herdr ${pong.version ?? "?"}, protocol ${pong.protocol ?? "?"} at ${sock}` };
  if (pong.code === "HERDR_TOO_OLD") return { name: "herdr", level: "fail", detail: pong.reason ?? "Herdr is too old", fix: "update Herdr (herdr update) or use --runtime tmux" };
  return { name: "herdr", level: "fail", detail: `Herdr socket ${sock} does not answer ping: ${pong.reason ?? "no reply"}`, fix: "restart Herdr, or unset HERDR_SOCKET_PATH / HERDR_SESSION so the default session is used" };
}

export function checkHome(home: string): CheckResult[] {
  if (!existsSync(home)) {
    return [{ name: "home", level: "ok", detail: `${home} does not exist yet (created on first use)` }];
  }
  const out: CheckResult[] = [];
  const st = statSync(home);
  const mode = st.mode & 0o777;
  if (!st.isDirectory()) out.push({ name: "home", level: "fail", detail: `${home} is not a directory`, fix: `move it away or set DSH_HERDR_HOME to another path` });
  else if (mode & 0o077) out.push({ name: "home", level: "fail", detail: `${home} has mode ${mode.toString(8)}; others can reach the socket`, fix: `chmod 700 ${home}` });
  else if (typeof process.getuid === "function" && st.uid !== process.getuid()) out.push({ name: "home", level: "fail", detail: `${home} belongs to uid ${st.uid}, not you`, fix: `set DSH_HERDR_HOME to a directory you own` });
  else out.push({ name: "home", level: "ok", detail: `${home} (mode 700)` });
  const sock = join(home, "daemon.sock");
  if (existsSync(sock)) {
    const smode = statSync(sock).mode & 0o777;
    out.push(smode & 0o077
      ? { name: "socket", level: "fail", detail: `${sock} has mode ${smode.toString(8)}`, fix: `stop the daemon (dsh-herdr daemon stop) and chmod 600 ${sock}, or restart it` }
      : { name: "socket", level: "ok", detail: `${sock} (mode 600)` });
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
    return { name: "config", level: "fail", detail: `${file}: ${(e as Error).message}`, fix: `fix it with \`dsh-herdr config set KEY VALUE\` or edit ${file}` };
  }
}

export function checkDisk(home: string): CheckResult {
  let dir = home;
  while (!existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir);
  const fs = statfsSync(dir);
  const free = fs.bavail * fs.bsize;
  const mb = Math.floor(free / (1024 * 1024));
  if (free < LOW_DISK) return { name: "disk", level: "fail", detail: `${mb} MiB free at ${dir}`, fix: "free disk space (worktrees and patches need room) or run `dsh-herdr gc`" };
  if (free < WARN_DISK) return { name: "disk", level: "warn", detail: `${mb} MiB free at ${dir}`, fix: "free some disk space or run `dsh-herdr gc`" };
  return { name: "disk", level: "ok", detail: `${mb} MiB free at ${dir}` };
}

/** Run every check; slow probes run in parallel. */
export async function runDoctor(ctx: DoctorContext): Promise<CheckResult[]> {
  const [git, pi, tmux, herdr, config] = await Promise.all([
    checkGit(ctx.env),
    checkPi(ctx.env, ctx.packageRoot),
    checkTmux(ctx.env),
    checkHerdr(ctx.env),
    checkConfig(ctx),
  ]);
  return [checkNode(), git, pi, tmux, herdr, ...checkHome(ctx.home), config, checkDisk(ctx.home)];
}
