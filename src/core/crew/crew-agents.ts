// Subagent definitions (`*.md` with YAML frontmatter) for crew_list/crew_spawn: parsing and priority merge.
// Pure: the extension reads the files and hands over their text.
import { parse as parseYaml } from "yaml";
import { isValidMachineLabel } from "../machines.js";
import type { Role, ThinkingLevel } from "../types.js";

export type AgentSource = "project" | "user" | "bundled";

export interface AgentDefinition {
  name: string;
  description: string;
  /** provider/model-id; absent = the owner session's current model (like pi-crew). */
  model?: string;
  thinking?: ThinkingLevel;
  /** Absent = all built-in tools; [] = none. Recorded for the child; the daemon decides what it can honour. */
  tools?: string[];
  role: Role;
  /**
   * true: a worktree of the cwd's repository (NOT_A_REPO outside one); "auto": a worktree when the cwd is a git
   * repository with a commit, else the cwd itself; false: the cwd itself.
   */
  isolated: boolean | "auto";
  interactive: boolean;
  /** A machine label from config.json `machines`: the child runs there (crew_spawn's `machine` overrides it). */
  machine?: string;
  /** Checks the daemon runs in the child's worktree when a cycle settles completed (receipts in its result). */
  checks?: string[];
  /** An isolated worktree made ready before the child starts: files included from the checkout, a setup command. */
  worktree?: { include?: string[]; setup?: string };
  /** Spend caps (USD, output tokens, turns): reached, the child's turn is stopped and the subagent asks. */
  maxCost?: number;
  maxOutputTokens?: number;
  maxTurns?: number;
  /** The body: role instructions handed to the child with its task. */
  prompt: string;
  source: AgentSource;
  file: string;
}

export interface AgentWarning {
  file: string;
  message: string;
}

const THINKING: readonly ThinkingLevel[] = ["off", "minimal", "low", "medium", "high", "xhigh", "max"];
const FIELDS = [
  "name",
  "description",
  "model",
  "thinking",
  "tools",
  "role",
  "isolated",
  "interactive",
  "machine",
  "checks",
  "worktree",
  "maxCost",
  "maxOutputTokens",
  "maxTurns",
];

/** A string or a list of non-empty strings (one line each) → the list; null when it is neither. */
function stringList(v: unknown): string[] | null {
  const list = typeof v === "string" ? [v] : Array.isArray(v) ? v : null;
  if (!list?.every((x) => typeof x === "string" && x.trim() !== "" && !/[\n\r]/.test(x.trim()))) return null;
  return (list as string[]).map((x) => x.trim());
}

/** Split `---\n<yaml>\n---\n<body>`; null when the text has no frontmatter block. */
export function splitFrontmatter(text: string): { yaml: string; body: string } | null {
  const m = /^\uFEFF?---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)([\s\S]*)$/.exec(text);
  return m ? { yaml: m[1] ?? "", body: (m[2] ?? "").trim() } : null;
}

/**
 * One definition file → a definition plus warnings, or only warnings when the file cannot be used. Bad optional
 * fields are dropped with a warning (the definition stays usable); a missing name/description rejects the file.
 */
export function parseAgentDefinition(
  text: string,
  file: string,
  source: AgentSource,
): { agent?: AgentDefinition; warnings: AgentWarning[] } {
  const warnings: AgentWarning[] = [];
  const warn = (message: string) => warnings.push({ file, message });
  const parts = splitFrontmatter(text);
  if (!parts) {
    warn("no YAML frontmatter; start the file with ---, name:, description:, then ---");
    return { warnings };
  }
  let fm: unknown;
  try {
    fm = parseYaml(parts.yaml);
  } catch (e) {
    warn(`frontmatter is not valid YAML (${(e as Error).message.split("\n")[0]})`);
    return { warnings };
  }
  if (typeof fm !== "object" || fm === null || Array.isArray(fm)) {
    warn("frontmatter must be a YAML mapping of name, description, ...");
    return { warnings };
  }
  const f = fm as Record<string, unknown>;
  if (typeof f.name !== "string" || f.name.trim() === "") {
    warn("name is required");
    return { warnings };
  }
  const name = f.name.trim();
  if (/\s/.test(name)) {
    warn(`name "${name}" contains whitespace; use "-" instead`);
    return { warnings };
  }
  if (typeof f.description !== "string" || f.description.trim() === "") {
    warn(`description is required for "${name}"`);
    return { warnings };
  }
  for (const k of Object.keys(f)) if (!FIELDS.includes(k)) warn(`unknown field "${k}" ignored`);
  const agent: AgentDefinition = {
    name,
    description: f.description.trim(),
    role: "worker",
    isolated: false,
    interactive: false,
    prompt: parts.body,
    source,
    file,
  };
  if (f.model !== undefined) {
    if (typeof f.model === "string" && /^[^/\s]+\/\S+$/.test(f.model.trim())) agent.model = f.model.trim();
    else warn(`model must be provider/model-id, got ${JSON.stringify(f.model)}; the owner session's model is used`);
  }
  if (f.thinking !== undefined) {
    if (THINKING.includes(f.thinking as ThinkingLevel)) agent.thinking = f.thinking as ThinkingLevel;
    else warn(`thinking must be one of ${THINKING.join(", ")}; ignored`);
  }
  if (f.tools !== undefined) {
    const list = typeof f.tools === "string" ? f.tools.split(",") : Array.isArray(f.tools) ? f.tools : null;
    if (list && list.every((t) => typeof t === "string"))
      agent.tools = (list as string[]).map((t) => t.trim()).filter((t) => t !== "");
    else if (f.tools === null) agent.tools = [];
    else warn("tools must be a comma-separated string or a list of names; all built-in tools are used");
  }
  if (f.role !== undefined) {
    if (f.role === "worker" || f.role === "reviewer") agent.role = f.role;
    else warn(`role must be worker or reviewer; worker is used`);
  }
  if (f.isolated !== undefined) {
    if (typeof f.isolated === "boolean" || f.isolated === "auto") agent.isolated = f.isolated;
    else warn("isolated must be true, false or auto; false is used");
  }
  if (f.interactive !== undefined) {
    if (typeof f.interactive === "boolean") agent.interactive = f.interactive;
    else warn("interactive must be true or false; false is used");
  }
  if (f.machine !== undefined) {
    if (typeof f.machine === "string" && isValidMachineLabel(f.machine.trim())) agent.machine = f.machine.trim();
    else
      warn(
        `machine must be a machine label from dsh-herdr's config (letters, digits, ".", "_", "-"), got ${JSON.stringify(f.machine)}; the subagent runs here`,
      );
  }
  if (f.checks !== undefined) {
    const list = stringList(f.checks);
    if (list) agent.checks = list;
    else warn("checks must be a command or a list of commands (one line each); no checks are run");
  }
  if (f.worktree !== undefined) parseWorktree(f.worktree, agent, warn);
  if (f.maxCost !== undefined) {
    if (typeof f.maxCost === "number" && Number.isFinite(f.maxCost) && f.maxCost > 0) agent.maxCost = f.maxCost;
    else warn(`maxCost must be a positive number of USD, got ${JSON.stringify(f.maxCost)}; no cost cap`);
  }
  for (const k of ["maxOutputTokens", "maxTurns"] as const) {
    const v = f[k];
    if (v === undefined) continue;
    if (typeof v === "number" && Number.isSafeInteger(v) && v >= 1) agent[k] = v;
    else warn(`${k} must be a whole number, 1 or more, got ${JSON.stringify(v)}; no such cap`);
  }
  return { agent, warnings };
}

/** `worktree: {include: [...], setup: "..."}`: only for a definition that works in a worktree. */
function parseWorktree(v: unknown, agent: AgentDefinition, warn: (m: string) => void): void {
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    warn("worktree must be a mapping of include and setup; ignored");
    return;
  }
  const w = v as Record<string, unknown>;
  for (const k of Object.keys(w)) if (k !== "include" && k !== "setup") warn(`unknown field "worktree.${k}" ignored`);
  const out: NonNullable<AgentDefinition["worktree"]> = {};
  if (w.include !== undefined) {
    const list = stringList(w.include);
    if (list?.every((p) => !p.startsWith("#"))) out.include = list;
    else warn("worktree.include must be a .gitignore line or a list of them (.env, node_modules/); ignored");
  }
  if (w.setup !== undefined) {
    if (typeof w.setup === "string" && w.setup.trim() !== "") out.setup = w.setup.trim();
    else warn("worktree.setup must be a shell command; ignored");
  }
  if (out.include === undefined && out.setup === undefined) return;
  if (agent.isolated === false) {
    warn("worktree applies to a definition that works in a worktree (isolated: true or auto); ignored");
    return;
  }
  agent.worktree = out;
}

/**
 * Sources in priority order (project, user, bundled): the first definition of a name wins silently; a second one
 * with the same name inside one source is skipped with a warning.
 */
export function mergeAgentSources(sources: { agents: AgentDefinition[] }[]): {
  agents: AgentDefinition[];
  warnings: AgentWarning[];
} {
  const byName = new Map<string, AgentDefinition>();
  const warnings: AgentWarning[] = [];
  for (const { agents } of sources) {
    const here = new Set<string>();
    for (const a of agents) {
      if (here.has(a.name)) {
        warnings.push({
          file: a.file,
          message: `duplicate subagent name "${a.name}" in the ${a.source} definitions, skipping`,
        });
        continue;
      }
      here.add(a.name);
      if (!byName.has(a.name)) byName.set(a.name, a);
    }
  }
  return { agents: [...byName.values()].sort((a, b) => a.name.localeCompare(b.name)), warnings };
}

/** crew_list's model-bound JSON view of one definition (no prompt body, no file paths). */
export function agentSummary(a: AgentDefinition): Record<string, unknown> {
  return {
    name: a.name,
    description: a.description,
    model: a.model ?? null,
    thinking: a.thinking ?? null,
    tools: a.tools ?? null,
    role: a.role,
    isolated: a.isolated,
    interactive: a.interactive,
    machine: a.machine ?? null,
    ...(a.maxCost !== undefined ? { maxCost: a.maxCost } : {}),
    ...(a.maxOutputTokens !== undefined ? { maxOutputTokens: a.maxOutputTokens } : {}),
    ...(a.maxTurns !== undefined ? { maxTurns: a.maxTurns } : {}),
    source: a.source,
  };
}
