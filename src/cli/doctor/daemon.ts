// The daemon's environment, asked of the daemon itself: a running one reports the NAMES of its children's variables
// (daemon.status `env`, never a value), its locale, pi dir and the providers its auth.json has; without one, the
// systemd unit install-unit wrote for this home says what systemd will start it with (Environment=, EnvironmentFile=),
// else the next command starts one from this shell (plus <home>/env). Compared with this shell: a provider key, a
// UTF-8 locale or PI_CODING_AGENT_DIR the shell has and the daemon lacks is a FAIL naming the variable and the fix.
import { daemonStatus } from "../../client/daemon-control.js";
import { resolveSpawnModel } from "../../core/session/model-choice.js";
import {
  effectiveLocale,
  isUtf8Locale,
  providerKeyTable,
  providerKeyVars,
  providerOf,
} from "../../core/session/provider-keys.js";
import { agentDirOf, authProviders, modelsKeyVar } from "../../pi/credentials.js";
import { resolvePiBin } from "../../pi/launch.js";
import { envFilePath, parseEnvFile, readEnvFile, type EnvFileState } from "../../store/env-file.js";
import { restartHint } from "../common/daemon-control.js";
import type { CheckResult } from "./types.js";
import { findUnitFor, type UnitEnv } from "./unit.js";
import { readFileSync, statSync } from "node:fs";

/** What a daemon has (or will have): names only. */
export interface DaemonSide {
  /** "the running daemon (pid 4242)", "the unit dsh-herdr.service", ... */
  who: string;
  names: ReadonlySet<string>;
  locale: string | undefined;
  piDir: string | undefined;
  /** Its pi agent dir, resolved. */
  agentDir: string;
  authProviders: readonly string[];
  /** How a change to <home>/env reaches it. */
  apply: string;
}

type Env = Readonly<Record<string, string | undefined>>;

/** The shell's variables that hold `provider`'s key (built-in names, or the one its models.json apiKey names). */
function keyVars(provider: string, agentDir: string): string[] {
  const custom = modelsKeyVar(agentDir, provider);
  return [...(providerKeyVars(provider) ?? []), ...(custom ? [custom] : [])];
}

export interface KeyGap {
  provider: string;
  /** The variable to give the daemon (a key variable, or PI_CODING_AGENT_DIR when the shell's key is in its pi dir). */
  variable: string;
}

/** Variables many shells export for other reasons (git hosting, cloud tools): not a sign of a model provider's use
 *  unless that provider is the default model's or the shell's pi has logged in to it. */
const GENERIC_VARS = new Set(["GH_TOKEN", "GITHUB_TOKEN", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "HF_TOKEN"]);

/**
 * The providers whose key the shell has (environment or its pi dir's auth.json) and the daemon lacks. With a default
 * model its provider's gap is `fail` and the others `warn` (a --model of theirs would fail). Without one, pi picks
 * its default among the providers it has keys for: a daemon with none of the shell's is `fail` (every child fails),
 * else the gaps are `warn`.
 */
export function credentialGaps(
  shell: Env,
  side: DaemonSide,
  defaultModel?: string,
): { fail: KeyGap[]; warn: KeyGap[] } {
  const shellDir = agentDirOf(shell);
  const shellAuth = authProviders(shellDir);
  const main = defaultModel ? providerOf(defaultModel) : undefined;
  const daemonHas = (provider: string) =>
    keyVars(provider, side.agentDir).some((v) => side.names.has(v)) || side.authProviders.includes(provider);
  const shellVarsOf = (provider: string) =>
    keyVars(provider, shellDir).filter(
      (v) => shell[v] && (provider === main || shellAuth.includes(provider) || !GENERIC_VARS.has(v)),
    );
  const all = [...new Set([...providerKeyTable().map(([p]) => p), ...shellAuth, ...(main ? [main] : [])])];
  const shellHas = all.filter((p) => shellVarsOf(p).length > 0 || shellAuth.includes(p));
  const gaps: KeyGap[] = shellHas
    .filter((p) => !daemonHas(p))
    .map((provider) => ({ provider, variable: shellVarsOf(provider)[0] ?? "PI_CODING_AGENT_DIR" }));
  if (main !== undefined)
    return { fail: gaps.filter((g) => g.provider === main), warn: gaps.filter((g) => g.provider !== main) };
  return gaps.length > 0 && gaps.length === shellHas.length ? { fail: gaps, warn: [] } : { fail: [], warn: gaps };
}

function sideFromEnv(who: string, env: Env, auth: readonly string[] | undefined, apply: string): DaemonSide {
  const agentDir = agentDirOf(env);
  return {
    who,
    names: new Set(Object.keys(env).filter((k) => env[k] !== undefined)),
    locale: effectiveLocale(env),
    piDir: env.PI_CODING_AGENT_DIR || undefined,
    agentDir,
    authProviders: auth ?? authProviders(agentDir),
    apply,
  };
}

/** What systemd starts the unit's daemon with: its Environment= lines, then its EnvironmentFile= files. */
export function unitSide(unit: UnitEnv, shell: Env): DaemonSide {
  const env: Record<string, string | undefined> = { HOME: shell.HOME, USER: shell.USER };
  for (const [k, v] of unit.env) env[k] = v;
  for (const f of unit.envFiles) {
    try {
      for (const [k, v] of parseEnvFile(readFileSync(f, "utf8"), f)) env[k] = v;
    } catch {
      // absent (the "-" prefix) or invalid: the envfile check names an invalid one
    }
  }
  return sideFromEnv(
    `the unit ${unit.name} (systemd starts the daemon with its environment)`,
    env,
    undefined,
    `systemctl --user restart ${unit.name}`,
  );
}

function keyCheck(shell: Env, side: DaemonSide, defaultModel: string | undefined, home: string): CheckResult {
  const { fail, warn } = credentialGaps(shell, side, defaultModel);
  const file = envFilePath(home);
  const fixFor = (gs: KeyGap[]) =>
    `dsh-herdr daemon env set ${[...new Set(gs.map((g) => g.variable))].join(" ")} (takes this shell's value${gs.length > 1 ? "s" : ""} into ${file}), then ${side.apply}`;
  const lacks = (gs: KeyGap[]) =>
    gs
      .map((g) =>
        g.variable === "PI_CODING_AGENT_DIR"
          ? `credentials for ${g.provider} (this shell's pi dir ${agentDirOf(shell)} has them; the daemon's ${side.agentDir} does not)`
          : `${g.variable} (the key of ${g.provider})`,
      )
      .join(", ");
  if (fail.length > 0)
    return {
      name: "daemon-key",
      level: "fail",
      detail: `${side.who} has no ${lacks(fail)}, which this shell has: its children would fail "No API key"${defaultModel ? ` on ${defaultModel}` : ""}`,
      fix: fixFor(fail),
    };
  if (warn.length > 0)
    return {
      name: "daemon-key",
      level: "warn",
      detail: `${side.who} has ${defaultModel ? "the default model's key" : "some of this shell's provider keys"}, but no ${lacks(warn)}, which this shell has: a child on ${[...new Set(warn.map((g) => g.provider))].join(", ")} would fail "No API key"`,
      fix: fixFor(warn),
    };
  const provider = defaultModel ? providerOf(defaultModel) : undefined;
  return {
    name: "daemon-key",
    level: "ok",
    detail: provider
      ? `${side.who} has every key this shell has for ${provider} (${defaultModel})`
      : `${side.who} has every provider key this shell has`,
  };
}

function localeCheck(shell: Env, side: DaemonSide): CheckResult {
  if (isUtf8Locale(side.locale))
    return { name: "daemon-locale", level: "ok", detail: `${side.who} has the UTF-8 locale ${side.locale}` };
  const mine = effectiveLocale(shell);
  const which = ["LC_ALL", "LC_CTYPE", "LANG"].find((k) => shell[k]) ?? "LANG";
  if (isUtf8Locale(mine))
    return {
      name: "daemon-locale",
      level: "fail",
      detail: `${side.who} has no UTF-8 locale (${side.locale ?? "LANG, LC_ALL and LC_CTYPE unset"}), which this shell has (${which}=${mine}): pi's screen in a pane and non-ASCII text break`,
      fix: `dsh-herdr daemon env set ${which === "LANG" ? "LANG" : `LANG=${mine}`}, then ${side.apply}`,
    };
  return {
    name: "daemon-locale",
    level: "warn",
    detail: `neither this shell nor ${side.who} has a UTF-8 locale (${side.locale ?? "none"})`,
    fix: `dsh-herdr daemon env set LANG=C.UTF-8, then ${side.apply}`,
  };
}

function piDirCheck(shell: Env, side: DaemonSide): CheckResult {
  const mine = shell.PI_CODING_AGENT_DIR || undefined;
  if (mine !== undefined && side.piDir === undefined)
    return {
      name: "daemon-pidir",
      level: "fail",
      detail: `${side.who} has no PI_CODING_AGENT_DIR, which this shell has (${mine}): its children use pi's default ${side.agentDir} (other models, keys and settings)`,
      fix: `dsh-herdr daemon env set PI_CODING_AGENT_DIR, then ${side.apply}`,
    };
  return {
    name: "daemon-pidir",
    level: "ok",
    detail: `${side.who} runs pi with the agent dir ${side.agentDir}`,
  };
}

function envFileCheck(home: string, startedAt: number | undefined, apply: string): CheckResult {
  let f: EnvFileState;
  try {
    f = readEnvFile(home);
  } catch (e) {
    return {
      name: "envfile",
      level: "fail",
      detail: `${(e as Error).message.replace(/; each line is.*$/s, "")}: the daemon will not start`,
      fix: `fix that line (NAME=value; quote values with spaces), or remove it and use dsh-herdr daemon env set NAME=value`,
    };
  }
  if (f.vars === undefined)
    return {
      name: "envfile",
      level: "ok",
      detail: `no ${f.path} (optional: dsh-herdr daemon env set NAME=value gives the daemon a variable)`,
    };
  if (f.mode !== undefined && (f.mode & 0o077) !== 0)
    return {
      name: "envfile",
      level: "fail",
      detail: `${f.path} has mode ${f.mode.toString(8)}: others can read the keys in it`,
      fix: `chmod 600 ${f.path}`,
    };
  const n = f.vars.size;
  let mtime = 0;
  try {
    mtime = statSync(f.path).mtimeMs;
  } catch {
    // gone meanwhile
  }
  if (startedAt !== undefined && mtime > startedAt)
    return {
      name: "envfile",
      level: "warn",
      detail: `${f.path} changed after the running daemon started: it does not have the change yet`,
      fix: apply,
    };
  return { name: "envfile", level: "ok", detail: `${f.path}: ${n} variable(s), mode 600` };
}

interface ReportedEnv {
  piBin: string | null;
  piDir: string | null;
  path: string;
  names?: string[];
  locale?: string | null;
  authProviders?: string[];
}

/** The running daemon's pi, pi dir and PATH against this shell's (a difference is a WARN: restart it). */
function sameLaunchCheck(pid: unknown, de: ReportedEnv, env: Env, apply: string): CheckResult {
  let myPi: string | null = null;
  try {
    myPi = resolvePiBin(env);
  } catch {
    // compared as "none"
  }
  const diffs: string[] = [];
  // Unset in the daemon while this shell has one: the daemon-pidir FAIL says so.
  if (de.piDir !== null && (env.PI_CODING_AGENT_DIR ?? null) !== de.piDir)
    diffs.push(`PI_CODING_AGENT_DIR ${de.piDir} there, ${env.PI_CODING_AGENT_DIR ?? "(unset)"} here`);
  if (myPi !== de.piBin) diffs.push(`pi ${de.piBin ?? "(none)"} there, ${myPi ?? "(none)"} here`);
  if ((env.PATH ?? "") !== de.path) diffs.push("PATH differs");
  if (diffs.length === 0)
    return {
      name: "daemon",
      level: "ok",
      detail: `the running daemon (pid ${String(pid)}) has this pi, pi dir and PATH`,
    };
  return {
    name: "daemon",
    level: "warn",
    detail: `the running daemon (pid ${String(pid)}) runs children with another environment: ${diffs.join("; ")}`,
    fix: `restart the daemon from this shell: ${apply}`,
  };
}

function defaultModelOf(cfg: { defaultModel?: string; modelAliases: Record<string, string> } | undefined) {
  try {
    return cfg ? resolveSpawnModel(undefined, cfg) : undefined;
  } catch {
    return undefined; // the model check names a bad default
  }
}

/** Every check of the daemon's environment (see the file's head). */
export async function checkDaemonEnv(
  home: string,
  env: NodeJS.ProcessEnv,
  cfg?: { defaultModel?: string; modelAliases: Record<string, string> },
): Promise<CheckResult[]> {
  const model = defaultModelOf(cfg);
  const s = await daemonStatus(home).catch(() => ({ running: false }) as Record<string, unknown>);
  if (s.running) {
    const de = s.env as ReportedEnv | undefined;
    const apply = restartHint(de?.names);
    if (!de?.names)
      return [
        {
          name: "daemon",
          level: "warn",
          detail: `the running daemon (pid ${String(s.pid)}) does not report its environment (an older version)`,
          fix: "restart the daemon: dsh-herdr daemon restart",
        },
      ];
    const reported: Record<string, string | undefined> = Object.fromEntries(de.names.map((n) => [n, "1"]));
    const side: DaemonSide = {
      ...sideFromEnv(`the running daemon (pid ${String(s.pid)})`, reported, de.authProviders ?? [], apply),
      locale: de.locale ?? undefined,
      piDir: de.piDir ?? undefined,
      agentDir: agentDirOf({ HOME: env.HOME, PI_CODING_AGENT_DIR: de.piDir ?? undefined }),
    };
    return [
      sameLaunchCheck(s.pid, de, env, apply),
      keyCheck(env, side, model, home),
      localeCheck(env, side),
      piDirCheck(env, side),
      envFileCheck(home, typeof s.startedAt === "number" ? s.startedAt : undefined, apply),
    ];
  }
  const unit = findUnitFor(home, env);
  if (unit) {
    const side = unitSide(unit, env);
    return [
      {
        name: "daemon",
        level: "ok",
        detail: `no daemon running; ${unit.file} starts it (the checks below are what that unit gives it)`,
      },
      keyCheck(env, side, model, home),
      localeCheck(env, side),
      piDirCheck(env, side),
      envFileCheck(home, undefined, side.apply),
    ];
  }
  // The next command starts a daemon from this shell; it reads <home>/env over this environment.
  let file: Map<string, string> = new Map();
  try {
    file = readEnvFile(home).vars ?? file;
  } catch {
    // the envfile check names it
  }
  const merged = { ...env, ...Object.fromEntries(file) };
  const side = sideFromEnv("a daemon started from this shell", merged, undefined, "the next command starts it");
  return [
    {
      name: "daemon",
      level: "ok",
      detail: `no daemon running (the next command starts one with this environment and ${envFilePath(home)})`,
    },
    keyCheck(env, side, model, home),
    localeCheck(env, side),
    envFileCheck(home, undefined, "the next command starts it"),
  ];
}
