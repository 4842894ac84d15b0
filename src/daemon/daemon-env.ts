// The daemon's own environment: `<home>/env` applied at start (src/daemon/main.ts, before runDaemon), and what
// daemon.status reports of the environment its children get, for `doctor` to compare with a shell's. Names only:
// a variable's value never leaves the daemon (the locale and pi's paths excepted, which are not secrets).
import { effectiveLocale } from "../core/session/provider-keys.js";
import { agentDirOf, authProviders } from "../pi/credentials.js";
import { resolvePiBin } from "../pi/launch.js";
import { readEnvFile } from "../store/env-file.js";

export interface AppliedEnvFile {
  path: string;
  /** The variables the file set, in its order (empty when there is no file). */
  keys: string[];
  /** The file's permission bits, when it exists. */
  mode?: number;
}

/**
 * Read `<home>/env` and set its variables in `env` (process.env of the daemon process), over what it inherited:
 * as systemd's EnvironmentFile= overrides Environment=. Throws CONFIG_INVALID naming a bad line.
 */
export function applyEnvFile(home: string, env: NodeJS.ProcessEnv = process.env): AppliedEnvFile {
  const f = readEnvFile(home);
  const keys: string[] = [];
  for (const [k, v] of f.vars ?? []) {
    env[k] = v;
    keys.push(k);
  }
  return { path: f.path, keys, ...(f.mode !== undefined ? { mode: f.mode } : {}) };
}

export interface DaemonEnvFacts {
  /** The pi it launches (null: none found). */
  piBin: string | null;
  /** PI_CODING_AGENT_DIR (null: pi's default). */
  piDir: string | null;
  path: string;
  /** Every variable name the children get, sorted. */
  names: string[];
  /** LC_ALL, else LC_CTYPE, else LANG (null: none). */
  locale: string | null;
  /** The providers auth.json in the children's agent dir has credentials for. */
  authProviders: string[];
  /** The env file the daemon read at start (absent: started without main.ts, e.g. in-process in tests). */
  envFile?: AppliedEnvFile;
}

export function daemonEnvFacts(childEnv: NodeJS.ProcessEnv, envFile?: AppliedEnvFile): DaemonEnvFacts {
  let piBin: string | null = null;
  try {
    piBin = resolvePiBin(childEnv);
  } catch {
    // reported as null: doctor says pi is not found for the daemon
  }
  return {
    piBin,
    piDir: childEnv.PI_CODING_AGENT_DIR ?? null,
    path: childEnv.PATH ?? "",
    names: Object.keys(childEnv)
      .filter((k) => childEnv[k] !== undefined)
      .sort(),
    locale: effectiveLocale(childEnv) ?? null,
    authProviders: authProviders(agentDirOf(childEnv)),
    ...(envFile ? { envFile } : {}),
  };
}
