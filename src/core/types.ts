// The domain's shapes. AgentResult follows shared/spec/agent-result-contract.md (schemaVersion 1);
// schema/agent-result.schema.json and docs/result-contract.md change in the same commit as this file.

export type AgentStatus =
  | "starting"
  | "working"
  | "blocked"
  | "idle"
  | "running"
  | "completed"
  | "failed"
  | "gone"
  | "closed"
  | "interrupted";

export type HerdrStatus = "idle" | "working" | "blocked" | "done" | "unknown";
export type Role = "worker" | "reviewer";
export type NextAction = "none" | "wait" | "answer" | "inspect";
export type RuntimeKind = "herdr" | "tmux" | "headless";
export type ThinkingLevel = "off" | "minimal" | "low" | "medium" | "high" | "xhigh" | "max";

export interface AgentInfo {
  name: string;
  kind: string;
  model: string;
  thinking: string;
  /** Herdr ids, present on the herdr runtime. */
  paneId?: string;
  tabId?: string;
  workspaceId?: string;
  /** The Herdr --machine label; absent means local. */
  machine?: string;
  /** Additive: which runtime the child runs in, and its id there (tmux pane id, headless pid). */
  runtime?: RuntimeKind;
  runtimeId?: string;
}

/** The four result.md frontmatter keys; unknown keys are ignored. */
export interface ResultMeta {
  status?: string;
  summary?: string;
  tests?: string;
  files?: string;
}

export interface ResultArtifact {
  path: string;
  text: string;
  meta: ResultMeta;
}

export interface DiffEvidence {
  baselineHead: string | null;
  stat: string;
  files: string[];
  untracked: string[];
  patchPath: string;
  patchBytes: number;
  truncated: boolean;
  dirtyAtStart: string[];
  /** Paths dirty at spawn whose content changed since (absent when they were not hashed: too many, or recovered). */
  dirtyChanged?: string[];
}

export interface WorktreeInfo {
  path: string;
  branch: string;
  repo: string;
  base: string;
}

export interface Usage {
  assistant: number;
  toolCalls: number;
  outputTokens: number;
}

export interface Timing {
  createdAt: number;
  promptedAt?: number;
  settledAt?: number;
  elapsedMs?: number;
  queuedMs?: number;
}

/** Additive: why a task failed, with a stable code (see src/core/errors.ts). */
export interface ResultError {
  code: string;
  message: string;
}

export interface AgentResult {
  schemaVersion: 1;
  taskId: string;
  status: AgentStatus;
  role: Role;
  agent: AgentInfo;
  herdrStatus: HerdrStatus;
  sessionPath?: string;
  summary: string;
  finalMessage?: string;
  result?: ResultArtifact;
  diff?: DiffEvidence;
  tests?: string;
  files?: string[];
  worktree?: WorktreeInfo;
  usage?: Usage;
  timing: Timing;
  nextAction: NextAction;
  warnings?: string[];
  /** Additive fields. */
  brief?: string;
  /** Additive: the directory the task was spawned for (the source cwd, not the worktree). */
  cwd?: string;
  owner?: string;
  error?: ResultError;
}
