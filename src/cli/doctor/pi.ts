// pi: the binary the daemon launches, and the default model it can run with the credentials it has.
import { execa } from "execa";
import { resolveSpawnModel } from "../../core/session/model-choice.js";
import { PI_INSTALL_HINT, findPi } from "../../pi/launch.js";
import type { CheckResult } from "./types.js";
import { compareVersions } from "./versions.js";

/** The oldest pi the child and owner extensions are tested against. */
export const MIN_PI = "0.73.1";

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
