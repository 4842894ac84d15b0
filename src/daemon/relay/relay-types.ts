// What the relay (src/daemon/relay/relay.ts) needs of the daemon, structurally, and what its parts share: the record
// fields it writes, the supervisor's task map and listeners, its options, and the remote's result as this daemon's.
import type { Clock } from "../../core/clock.js";
import type { AgentResult, AgentStatus, Role, RuntimeKind } from "../../core/types.js";
import type { BackoffPolicy } from "../../core/machines.js";
import type { CycleEvent, TaskState } from "../../core/lifecycle/task-cycle.js";
import type { TaskRecord } from "../task/record.js";
import type { JournalRecord } from "../../core/lifecycle/journal-record.js";
import type { RemoteSettled } from "../task/runner-types.js";
import type { Config } from "../../store/config.js";
import type { TaskStore } from "../../store/task-store.js";
import type { MachineLink } from "../../link/link.js";
import type { PendingRequest } from "../task/relay-request-state.js";

/** The fields of a task record (src/daemon/task/record.ts) the relay writes or reads: a remote task has no handle here. */
export type RemoteRecord = Pick<
  TaskRecord,
  | "taskId"
  | "owner"
  | "status"
  | "createdAt"
  | "updatedAt"
  | "brief"
  | "cwd"
  | "kind"
  | "role"
  | "model"
  | "thinking"
  | "isolated"
  | "timeoutMs"
  | "machine"
  | "remote"
  | "runtime"
  | "name"
  | "token"
  | "workdir"
  | "sessionPath"
  | "resultPath"
  | "worktree"
  | "cycle"
  | "timing"
>;

/**
 * A relayed task as the relay sees its runner: its record, its machine state and result, its journal, and the relay's
 * per-task state (on the runner, as every task's state is: src/daemon/task/live.ts).
 */
export interface RelayLive {
  rec: RemoteRecord;
  /** Read only here: the runner's machine (dispatchRemote) is the one writer. */
  readonly state: TaskState;
  result?: AgentResult;
  /** The cycle whose settle record a restarted daemon found journaled without its recorded result. */
  settleJournaled?: number;
  /** The cycle whose settled status record a restarted daemon found journaled without its result.json. */
  statusJournaled?: number;
  /** The settle of the machine's result under way (a push and a refresh may bring the same settle at once). */
  remoteSettling?: Promise<void>;
  /** The spawn or follow-up journaled and not answered yet (relay-requests.ts). */
  remoteRequest?: PendingRequest;
  /** The machine refused that request, and the refusal is being recorded and settled here (relay-requests.ts). */
  remoteRefusing?: boolean;
  /** What a reader of the record waits for (task.wait and task.get await it before they answer). */
  readonly chain: Promise<void>;
  /** `op` queued on the task's chain (the runner's: task-runner.ts onChain). */
  onChain<T>(op: () => Promise<T>): Promise<T>;
  /** Durable when it resolves. */
  journal(event: JournalRecord): Promise<void>;
  /** Written when it resolves, durable through the commit log behind the caller (before any later outbox record). */
  journalWritten(...events: [JournalRecord, ...JournalRecord[]]): Promise<void>;
  /**
   * Feed the machine one of the remote's events; `onSettled` records a settled cycle (after its settle record, or
   * with it: src/daemon/task/runner-types.ts RemoteSettled).
   */
  dispatchRemote(ev: CycleEvent, onSettled?: RemoteSettled): Promise<void>;
}

export interface RelayLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** The supervisor as the relay uses it: its task map, store, config, clock and status listeners. */
export interface RelayHost {
  /** The task map (a spawn the machine refused leaves it again). */
  readonly tasks: Map<string, RelayLive>;
  readonly deps: { store: TaskStore; config(): Config; log: RelayLogger; clock: Clock };
  register(rec: RemoteRecord): RelayLive;
  notifyStatus(live: RelayLive, result: AgentResult, info: { settled: boolean }): void;
  statusOf(live: RelayLive): AgentStatus;
}

/** task.spawn params the relay forwards (src/daemon/methods/methods.ts SpawnParams). */
export interface RemoteSpawnParams {
  machine?: string;
  cwd: string;
  model?: string;
  thinking?: string;
  role?: Role;
  prompt?: string;
  task?: unknown;
  brief?: string;
  isolated?: boolean | "auto";
  timeoutMs?: number;
  runtime?: RuntimeKind;
  include?: string[];
  setup?: string;
  setupTimeoutMs?: number;
  checks?: string[];
  checkTimeoutMs?: number;
  maxCost?: number;
  maxOutputTokens?: number;
  maxTurns?: number;
}

export interface RelayOptions {
  version: string;
  /** Environment for ssh (HOME finds ~/.ssh). */
  env?: NodeJS.ProcessEnv;
  backoff?: BackoffPolicy;
  /** Bound of each request start-up's reattach makes of a machine (the socket serves meanwhile; default 20 s). */
  reattachTimeoutMs?: number;
  /** Where links make their forwards' sockets (`<home>/links`); without it every link uses the bridge. */
  forwardDir?: string;
}

/** What the relay's parts get from the Relay: the supervisor and the machines' links. */
export interface RelayContext {
  readonly sup: RelayHost;
  /** The relay was stopped: loops end. */
  readonly stopped: boolean;
  /** The machine's link when one was made (never connects). */
  linkOf(label: string): MachineLink | undefined;
  /** The link up now, or MACHINE_UNREACHABLE with ssh's line (waits for an attempt under way). */
  ready(label: string): Promise<MachineLink>;
}

export const UNREACHABLE_PREFIX = (label: string) => `machine ${label} unreachable since `;

/**
 * The remote's result (checked: src/daemon/relay/remote-check.ts) as this daemon's: the local id and owner, the machine's
 * label, and `diff.patchPath` naming the local copy of the patch in this task dir (the remote's path is never read
 * here); its other paths (session, worktree) stay the remote's, shown for reference only.
 */
export function localize(sup: RelayHost, live: RelayLive, r: AgentResult): AgentResult {
  const out: AgentResult = {
    ...r,
    taskId: live.rec.taskId,
    owner: live.rec.owner,
    agent: { ...r.agent, machine: live.rec.remote!.label },
  };
  if (r.diff) out.diff = { ...r.diff, patchPath: sup.deps.store.taskPaths(live.rec.taskId).diffPatch };
  const warnings = (r.warnings ?? []).filter((w) => !w.startsWith(UNREACHABLE_PREFIX(live.rec.remote!.label)));
  if (warnings.length > 0) out.warnings = warnings;
  else delete out.warnings;
  return out;
}

/** The relayed task's spawn is not answered yet: no task id there (src/daemon/relay/relay-requests.ts). */
export function awaitingSpawn(live: RelayLive): boolean {
  return live.rec.remote !== undefined && live.rec.remote.taskId === "";
}

/**
 * The cycle was settled by this daemon's own verdict, not the machine's word: its word was refused (REMOTE_INVALID)
 * or it no longer knows the task (REMOTE_LOST). A close then keeps that verdict whatever the machine says.
 */
export function settledHere(live: RelayLive): boolean {
  const p = live.state.phase;
  return p.name === "settled" && (p.reason.kind === "remote_invalid" || p.reason.kind === "remote_lost");
}
