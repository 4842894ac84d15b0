// One interface for every place a child can run (shared/design.md §8).
import type { HerdrStatus, RuntimeKind } from "../core/types.js";

export interface LaunchSpec {
  taskId: string;
  /** Agent name, e.g. worker-flash-a1b2: the tmux window / Herdr tab / agent name. */
  name: string;
  /** Program and arguments. Never interpreted by a shell. */
  argv: string[];
  env: Record<string, string>;
  cwd: string;
  /** The task directory: headless writes stdout/stderr/exit code here. */
  taskDir: string;
  /** Source repository name, for the Herdr workspace label `DSH · {repo}`. */
  repoName?: string;
  /** When the owner runs inside Herdr: split this pane instead of opening a tab. */
  ownerPaneId?: string;
  /** Herdr --machine label. */
  machine?: string;
}

/** Serializable: stored in task.json so a restarted daemon can find the child again. */
export interface RuntimeHandle {
  runtime: RuntimeKind;
  /** herdr */
  paneId?: string;
  tabId?: string;
  workspaceId?: string;
  agentName?: string;
  machine?: string;
  /** tmux */
  tmuxSocket?: string;
  tmuxSession?: string;
  tmuxWindow?: string;
  tmuxPaneId?: string;
  /** headless */
  pid?: number;
  stdinPath?: string;
  stdoutPath?: string;
  stderrPath?: string;
  exitPath?: string;
}

export interface ChildExit {
  /** Exit code, or null when killed by a signal or unknown. */
  code: number | null;
  signal?: string | null;
}

export type RuntimeEvent =
  | { type: "exited"; exit: ChildExit }
  | { type: "gone" }
  | { type: "state"; state: HerdrStatus };

export interface Runtime {
  readonly kind: RuntimeKind;
  launch(spec: LaunchSpec): Promise<RuntimeHandle>;
  isAlive(handle: RuntimeHandle): Promise<boolean>;
  /** Exit code when known (tmux remain-on-exit, headless exit file). */
  exitStatus(handle: RuntimeHandle): Promise<ChildExit | null>;
  /** Screen or output tail, for diagnostics only. */
  readOutput(handle: RuntimeHandle, opts?: { lines?: number }): Promise<string>;
  /** Send text as one submitted message (follow-up prompt). */
  sendText(handle: RuntimeHandle, text: string): Promise<void>;
  /** Send named keys (e.g. "Escape", "C-c"). */
  sendKeys(handle: RuntimeHandle, keys: string[]): Promise<void>;
  /** Kill the child and close its pane/process. Idempotent. */
  close(handle: RuntimeHandle): Promise<void>;
  /**
   * End the child and keep its pane to read (a close that keeps the pane); resolves once the process is gone.
   * Idempotent. Absent: the runtime cannot keep a pane without its child, and close() ends both.
   */
  end?(handle: RuntimeHandle): Promise<void>;
  /** Herdr's raw agent state; other runtimes answer from liveness ("unknown" or "missing"). */
  agentState?(handle: RuntimeHandle): Promise<HerdrStatus | "missing">;
  /**
   * The live child a launch of this task left behind, if any: the same handle launch() returned. Recovery asks
   * when the daemon died between launch() and journaling its handle, so that child is adopted, not started twice.
   * Undefined (the method or its answer): nothing to adopt.
   */
  find?(where: { taskId: string; taskDir: string; name: string; cwd?: string }): Promise<RuntimeHandle | undefined>;
  /** Push events (exit, gone, state) instead of polling; returns an unsubscribe. */
  watch?(handle: RuntimeHandle, onEvent: (e: RuntimeEvent) => void): () => void;
}
