// The systemd user unit `daemon install-unit` wrote for a home, read back: what environment systemd will start that
// daemon with (its Environment= lines and EnvironmentFile= files). `doctor` uses it when no daemon runs.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";

export interface UnitEnv {
  file: string;
  /** The unit's name, e.g. dsh-herdr.service. */
  name: string;
  /** Environment= assignments, in order (a later one wins). */
  env: Map<string, string>;
  /** EnvironmentFile= paths (a leading "-", optional, removed). */
  envFiles: string[];
}

export function unitDir(env: NodeJS.ProcessEnv): string {
  return join(env.XDG_CONFIG_HOME || join(env.HOME ?? homedir(), ".config"), "systemd", "user");
}

/** A unit value as systemd reads ours: `"..."` with \" and \\ escapes, else as is; %% is %. */
function unquote(v: string): string {
  const s = v.startsWith('"') && v.endsWith('"') && v.length >= 2 ? v.slice(1, -1).replace(/\\(["\\])/g, "$1") : v;
  return s.replace(/%%/g, "%");
}

/** Parse the [Service] lines of a unit this CLI wrote (one assignment per Environment= line). */
export function parseUnit(text: string, file: string): UnitEnv & { execStart?: string } {
  const env = new Map<string, string>();
  const envFiles: string[] = [];
  let execStart: string | undefined;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line.startsWith("Environment=")) {
      const a = unquote(line.slice("Environment=".length));
      const eq = a.indexOf("=");
      if (eq > 0) env.set(a.slice(0, eq), a.slice(eq + 1));
    } else if (line.startsWith("EnvironmentFile=")) {
      envFiles.push(unquote(line.slice("EnvironmentFile=".length).replace(/^-/, "")));
    } else if (line.startsWith("ExecStart=")) execStart = line.slice("ExecStart=".length);
  }
  return { file, name: file.split("/").pop()!, env, envFiles, ...(execStart ? { execStart } : {}) };
}

/** The unit under the user's systemd dir that runs `daemon run` for this home, if install-unit wrote one. */
export function findUnitFor(home: string, env: NodeJS.ProcessEnv): UnitEnv | undefined {
  const dir = unitDir(env);
  if (!existsSync(dir)) return undefined;
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith(".service"));
  } catch {
    return undefined;
  }
  for (const n of names.sort()) {
    let text: string;
    try {
      text = readFileSync(join(dir, n), "utf8");
    } catch {
      continue;
    }
    if (!text.includes("daemon run")) continue;
    const u = parseUnit(text, join(dir, n));
    const h = u.env.get("DSH_HERDR_HOME");
    if (u.execStart?.includes("daemon run") && h !== undefined && resolve(h) === resolve(home)) {
      const { execStart: _e, ...rest } = u;
      return rest;
    }
  }
  return undefined;
}
