// What a task runner (src/daemon/task/task-runner.ts) keeps per task while the daemon runs, and what the supervisor is
// built from. Types only: the modules that act on a task (evidence, settle, task-commands) share them without
// importing each other's behaviour.
import type { Clock } from "../../core/clock.js";
import type { CrewReport } from "../../core/crew/crew-cycle.js";
import type { JournalRecordOf } from "../../core/lifecycle/journal-record.js";
import type { SettleReason, TaskState } from "../../core/lifecycle/task-cycle.js";
import type { AgentResult, DiffEvidence, HerdrStatus, RuntimeKind } from "../../core/types.js";
import type { Runtime } from "../../runtime/types.js";
import type { Config } from "../../store/config.js";
import type { TaskStore } from "../../store/task-store.js";
import type { PendingRequest } from "./relay-request-state.js";
import type { CreatedWorktree, GitPort } from "../ports/git-port.js";
import type { TaskRecord } from "./record.js";
import type { Connection, Logger } from "../server/server.js";
import type { TaskFiles } from "../ports/watcher.js";

export interface SupervisorDeps {
  home: string;
  store: TaskStore;
  config(): Config;
  runtimeFor(kind: RuntimeKind): Runtime;
  socketPath: string;
  childExtensionPath: string;
  /** Extra env for every child (tests: HOME, PI_CODING_AGENT_DIR, PI_OFFLINE). */
  childEnv: Record<string, string>;
  log: Logger;
  /** The clock the task runners time with (default: the system clock; tests pass a fake one). */
  clock?: Clock;
  /** The git the task runners use (default: src/git). */
  git?: GitPort;
}

export interface Live {
  rec: TaskRecord;
  files?: TaskFiles;
  child?: Connection;
  /** The lifecycle phase (src/core/lifecycle/task-cycle.ts): the one source of truth for where the task is. */
  state: TaskState;
  /** The text of the newest cycle's prompt (the task, or a follow-up); pending while the phase says so. */
  prompt?: { cycle: number; text: string };
  /** The last prompt pushed and to which connection: a prompt goes to each child connection at most once. */
  promptPushed?: { child: Connection; prompt: { cycle: number; text: string } };
  promptSentAt?: number;
  /** The newest cycle whose run pi started (the child's agent_start): a prompt handed to pi may still be refused. */
  agentStartedCycle?: number;
  lastStopReason?: string;
  runtimeState?: HerdrStatus | "missing";
  unwatch?: () => void;
  /** The child process was ended by the daemon (or found gone): a later exit is expected, not news. */
  childEnded?: boolean;
  diff?: DiffEvidence;
  result?: AgentResult;
  /** The cycle whose settled harvest `result` holds: a close keeps that verdict instead of judging the files again. */
  settledCycle?: number;
  /** What waits on the task: its harvests and on-demand work, queued only by the runner's onChain. */
  readonly chain: Promise<void>;
  /** The effects of every event fed so far, done: a daemon stop waits for them (a close's record is half written). */
  effectsDone?: Promise<void>;
  /** The one refresh waiting behind the running one; later requests join it (it reads the newest evidence). */
  queued?: { settled?: boolean; reason?: SettleReason; done?: Promise<void> };
  /** The crew_report the child extension accepted, with the cycle it ended. */
  report?: CrewReport & { cycle: number };
  /** errorMessage of the child's last agent_end, for a session file that does not show it yet. */
  lastErrorMessage?: string;
  /** The output tail of the last child ended for a stall, read before its pane closed. */
  stalledOutput?: string;
  /** Herdr's raw word for that child's pane's agent (herdr runtime), read with its output; "missing" when gone. */
  stalledHerdrWord?: string;
  /**
   * The repo facts the spawn request already checked, for a task admitted at once (a queued one asks again), and the
   * isolated worktree it already started.
   */
  knownRepo?: { root: string; head?: string | null; worktree?: Promise<CreatedWorktree> };
  /** prompt.md's write, running while the runtime launches (awaited right after the launch call). */
  promptWrite?: Promise<unknown>;
  /** The latest live result is not on disk yet: a deferred snapshot write is scheduled. */
  snapshotDue?: boolean;
  /** A status record that could not be written (HOME_UNWRITABLE), waiting for its retry. */
  unsaved?: UnsavedStatus;
  /** Steers (src/daemon/task/steer.ts): the highest number handed out, and the responds waiting to learn their fate. */
  steering?: { reserved: number; waiters: Map<number, (fate: "taken" | "missed") => void> };
  /**
   * What the settle record of `cycle` pinned about the disk: `note` when it was full (a PANE_GONE or AGENT_ERROR
   * ending then names it). Present: the settle judged it, so the harvest does not ask the disk again (after a restart
   * the space may be back, and the verdict stays what it was).
   */
  settleDisk?: { cycle: number; note?: string };
  /** A relayed task: the cycle whose settle record a restarted daemon found journaled without its recorded result. */
  settleJournaled?: number;
  /** A relayed task: the cycle whose settled status record a restarted daemon found journaled without result.json. */
  statusJournaled?: number;
  /**
   * A relayed task: the settle of its machine's result under way (a push and a refresh may bring the same settle at
   * once; the second joins it). src/daemon/relay/relay-follow.ts.
   */
  remoteSettling?: Promise<void>;
  /** A relayed task: its spawn or follow-up, journaled and not answered yet (src/daemon/relay/relay-requests.ts). */
  remoteRequest?: PendingRequest;
  /** A relayed task's request the machine refused, while that refusal is being recorded and settled here. */
  remoteRefusing?: boolean;
}

/** A status record that could not be written (a full or read-only home), and how often it was tried. */
export interface UnsavedStatus {
  ev: JournalRecordOf<"status">;
  sync: boolean;
  attempt: number;
  /** Files written with the record (result.md's pinned copy). */
  extra?: { name: string; data: string }[];
}
