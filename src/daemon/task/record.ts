// The supervisor's task record (task.json): everything a restarted daemon needs to find the child again.
import type {
  AgentStatus,
  CheckReceipt,
  Landing,
  ResultError,
  Role,
  RuntimeKind,
  Timing,
  WorktreeInfo,
} from "../../core/types.js";
import type { RuntimeHandle } from "../../runtime/types.js";
import type { TaskRecordBase } from "../../store/task-store.js";
import type { TaskCaps } from "../../core/budget.js";
import { join } from "node:path";
import type { TaskPrompt } from "./prompt.js";

/** Where a follow-up's text is kept (cycle ≥ 2), so a restarted daemon can still send it. */
export function followUpPath(taskDir: string, cycle: number): string {
  return join(taskDir, `followup.${cycle}.md`);
}

export interface TaskRecord extends TaskRecordBase {
  taskId: string;
  owner: string;
  status: AgentStatus;
  createdAt: number;
  updatedAt?: number;
  brief?: string;
  cwd: string;
  kind: "pi";
  role: Role;
  /** provider/id as passed to pi; absent: pi's own default model (no --model). */
  model?: string;
  thinking: string;
  isolated: boolean;
  timeoutMs: number;
  machine?: string;
  /** A task relayed to another machine's daemon (src/daemon/relay/relay.ts): the machine's label and its task id there. */
  remote?: {
    label: string;
    /** "" while the spawn request is not answered yet (src/daemon/relay/relay-requests.ts). */
    taskId: string;
  };
  /** The request id another machine's daemon relaying this spawn gave it (src/daemon/methods/request-memo.ts). */
  requestId?: string;
  runtime: RuntimeKind;
  ownerPaneId?: string;
  prompt?: string;
  task?: TaskPrompt;
  /** Agent name: tmux window / Herdr tab / agent label. */
  name: string;
  /** Per-task secret the child extension proves itself with (task.json is 0600 in a 0700 home). */
  token: string;
  /** Where the child works: cwd, or the isolated worktree. */
  workdir: string;
  sessionPath: string;
  resultPath: string;
  worktree?: WorktreeInfo;
  baseline?: {
    isRepo: boolean;
    head: string | null;
    dirtyAtStart: string[];
    dirtyHashes?: Record<string, string>;
    warnings: string[];
  };
  handle?: RuntimeHandle;
  cycle: number;
  timing: Timing;
  /**
   * Read only: records written before the closed/interrupted override was read from the machine's phase carry it here
   * (recovery still honours it); the daemon no longer writes it (a closed or interrupted task's status says so).
   */
  lifecycle?: "closed" | "interrupted";
  error?: ResultError;
  warnings?: string[];
  sessionOffset?: number;
  /** `spawn --check CMD`: commands the daemon runs in the task's worktree (src/checks), and their timeout. */
  checks?: string[];
  checkTimeoutMs?: number;
  /** The newest check run's receipts and the cycle they checked (src/daemon/methods/land-methods.ts). */
  checkRun?: { cycle: number; at: number; receipts: CheckReceipt[] };
  /** Landability of the work, and its landing once `land` did it (src/daemon/methods/land-methods.ts). */
  landing?: Landing;
  /** `spawn --include PATTERN` / `--setup CMD` / `--setup-timeout`: the worktree made ready (src/daemon/task/workdir-setup.ts). */
  include?: string[];
  setup?: string;
  setupTimeoutMs?: number;
  /** What the includes brought into the worktree: gc treats an unchanged copy as the checkout's, not the task's work. */
  included?: { copied: string[]; linked: string[] };
  /** What setup changed that git sees, committed on the task branch (the baseline), and its parent: never landed. */
  setupCommit?: { from: string; commit: string };
  /** Spend caps (spawn --max-cost ...; config budget): the limit now and what a respond adds (src/daemon/task/budget.ts). */
  caps?: TaskCaps;
}

/** The check receipts and landing the AgentResult carries (src/core/result/check-receipts.ts; `verify` reads them too). */
export { landFieldsOf } from "../../core/result/check-receipts.js";
