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
  /** The machine the child runs on: a `machines` label of config.json (relayed to that machine's daemon) or Herdr's
   * --machine label; absent means this machine. */
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
  /** Every path the patch changes (renames: both names), new untracked files included. */
  files: string[];
  /** The working tree's untracked files; in a shared task those already there at spawn too (see dirtyAtStart). */
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
  /** Additive: the branch the repository's checkout was on at spawn (what `land` merges into); absent when detached. */
  baseBranch?: string;
}

/** Additive: one check run in the task's worktree (or the merged tree, for `land --check`), as the daemon saw it. */
export interface CheckReceipt {
  command: string;
  /** The command's exit code; null when it was cut off or ended by a signal. */
  exitCode: number | null;
  durationMs: number;
  /** Epoch ms. */
  startedAt: number;
  /** Its whole output (stdout and stderr, up to the cap) in the task dir. */
  logPath: string;
  /** The last lines of its output. */
  outputTail: string;
  /** Set when the daemon stopped it: it ran past its timeout, or printed more than the output cap. */
  cutOff?: CheckCutOff;
  /** The signal that ended it, when one did. */
  signal?: string;
  /** Where it ran: the task's worktree, or the merged tree of a `land --check`. */
  on?: CheckTree;
}

export type CheckCutOff = "timeout" | "output";
export type CheckTree = "worktree" | "merged";
export type LandedBy = "fast-forward" | "merge" | "squash" | "rebase";

/** Additive: whether the task's work applies to the current tip of its base branch, and where it landed. */
export interface Landing {
  baseBranch: string;
  /** The base branch's tip it was measured (or landed) against. */
  baseHead: string;
  /** `git merge-tree --write-tree` of the work against baseHead has no conflicts. */
  clean: boolean;
  /** Conflicting paths (empty when clean). */
  conflicts: string[];
  /** Epoch ms of the measurement. */
  checkedAt?: number;
  /** The commit the work landed as on baseBranch (`dsh-herdr land`). */
  landedAs?: string;
  /** How it landed: fast-forward, merge, squash or rebase. */
  strategy?: LandedBy;
  /** The task branch's tip that was landed (the child's uncommitted changes committed on it first). */
  workHead?: string;
  landedAt?: number;
}

export interface Usage {
  /** Assistant messages that spent (retries and errors included; not pi's empty, unbilled stub of a stopped turn). */
  assistant: number;
  toolCalls: number;
  outputTokens: number;
  /** Additive: prompt tokens pi counted per assistant message (`usage.input`: not read from or written to a cache). */
  inputTokens?: number;
  /** Additive: prompt tokens read from the provider's cache (`usage.cacheRead`). */
  cacheReadTokens?: number;
  /** Additive: prompt tokens written to the provider's cache (`usage.cacheWrite`). */
  cacheWriteTokens?: number;
  /** Additive: USD, the sum of pi's `usage.cost.total` (pi applies the model's prices from its models.json). */
  cost?: number;
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
  /** Additive: the receipts of the task's checks, run by the daemon (not the child's claim in `tests`). */
  checks?: CheckReceipt[];
  /** Additive: every check exited 0 (false when any failed or was cut off); absent when no check ran. */
  verified?: boolean;
  /** Additive: landability of an isolated task's work, and its landing. */
  landing?: Landing;
  /** Additive: the spend cap this blocked cycle was paused at (its `summary` says it in words). */
  cap?: CapReached;
}

export type CapName = "cost" | "outputTokens" | "turns";

/** Additive: a spend cap a cycle reached (spawn --max-cost, --max-output-tokens, --max-turns; config budget). */
export interface CapReached {
  /** Which cap: USD, output tokens, or turns (`usage.assistant`). */
  cap: CapName;
  /** The cap's value when it was reached (raised by each respond). */
  limit: number;
  /** What the task had spent then (every cycle so far), in the cap's unit. */
  spent: number;
  /** What a respond adds on top of the spend (the amount asked for at spawn, or given again with respond). */
  step: number;
}
