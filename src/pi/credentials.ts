// Where pi finds a provider's credentials besides the environment: its agent dir's auth.json (`/login`, keys saved
// by pi) and models.json (a custom provider's `apiKey`, which may name a variable). Only NAMES are read out of them
// (provider names, variable names), never a key.
import { readFileSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { apiKeyVarName } from "../core/session/provider-keys.js";

/** pi's agent dir for an environment: PI_CODING_AGENT_DIR (`~` expanded), else ~/.pi/agent. */
export function agentDirOf(env: Readonly<Record<string, string | undefined>>): string {
  const home = env.HOME || homedir();
  const dir = env.PI_CODING_AGENT_DIR;
  if (dir) return dir === "~" ? home : dir.startsWith("~/") ? join(home, dir.slice(2)) : dir;
  return join(home, ".pi", "agent");
}

function readJsonObject(path: string): Record<string, unknown> | undefined {
  try {
    if (statSync(path).size > 4 * 1024 * 1024) return undefined;
    const v = JSON.parse(readFileSync(path, "utf8")) as unknown;
    return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The providers auth.json in the agent dir holds credentials for (its top-level keys), sorted. */
export function authProviders(agentDir: string): string[] {
  const auth = readJsonObject(join(agentDir, "auth.json"));
  if (!auth) return [];
  return Object.entries(auth)
    .filter(([, v]) => v !== null && typeof v === "object")
    .map(([k]) => k)
    .sort();
}

/** The variable a custom provider's models.json `apiKey` names, if it names one. */
export function modelsKeyVar(agentDir: string, provider: string): string | undefined {
  const models = readJsonObject(join(agentDir, "models.json"));
  const providers = models?.["providers"];
  if (providers === null || typeof providers !== "object") return undefined;
  const p = (providers as Record<string, unknown>)[provider];
  return p !== null && typeof p === "object" ? apiKeyVarName((p as Record<string, unknown>)["apiKey"]) : undefined;
}
