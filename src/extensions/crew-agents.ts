// Subagent definition discovery for crew_list/crew_spawn: <cwd>/.pi/agents, the user's pi agent dir, then the
// definitions bundled with this package; the higher-priority source wins, unusable files become warnings.
import { readFileSync, readdirSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import {
  mergeAgentSources,
  parseAgentDefinition,
  type AgentDefinition,
  type AgentSource,
  type AgentWarning,
} from "../core/crew/crew-agents.js";

/** Package root from the compiled file: dist/src/extensions → root. */
export const bundledAgentsDir = join(import.meta.dirname, "..", "..", "..", "agents");

export function agentDirs(cwd: string, env: NodeJS.ProcessEnv = process.env): { dir: string; source: AgentSource }[] {
  const piAgentDir = env.PI_CODING_AGENT_DIR?.trim() || join(env.HOME ?? homedir(), ".pi", "agent");
  return [
    { dir: join(cwd, ".pi", "agents"), source: "project" },
    { dir: join(piAgentDir, "agents"), source: "user" },
    { dir: bundledAgentsDir, source: "bundled" },
  ];
}

function readSource(dir: string, source: AgentSource, warnings: AgentWarning[]): AgentDefinition[] {
  let names: string[];
  try {
    names = readdirSync(dir)
      .filter((n) => n.endsWith(".md"))
      .sort();
  } catch {
    return []; // an absent directory is normal
  }
  const out: AgentDefinition[] = [];
  for (const n of names) {
    const file = join(dir, n);
    try {
      if (!statSync(file).isFile()) continue;
      const parsed = parseAgentDefinition(readFileSync(file, "utf8"), file, source);
      warnings.push(...parsed.warnings);
      if (parsed.agent) out.push(parsed.agent);
    } catch (e) {
      warnings.push({ file, message: `cannot read: ${(e as Error).message}` });
    }
  }
  return out;
}

export function discoverAgents(
  cwd: string,
  env: NodeJS.ProcessEnv = process.env,
): { agents: AgentDefinition[]; warnings: AgentWarning[] } {
  const warnings: AgentWarning[] = [];
  const sources = agentDirs(cwd, env).map(({ dir, source }) => ({ agents: readSource(dir, source, warnings) }));
  const merged = mergeAgentSources(sources);
  return { agents: merged.agents, warnings: [...warnings, ...merged.warnings] };
}
