// What the daemon's supervisor-level modules (method handlers, recovery, delivery, the relay's host) may ask of the
// supervisor, as a type: they import this, never supervisor.ts, so the modules form no import cycle
// (test/unit/import-cycles.test.ts). The supervisor keeps the task map (one runner per task), the status listeners
// and the children's authentication; everything a task does is its runner's (runner-types.ts).
import type { Clock } from "../../core/clock.js";
import type { AgentResult, AgentStatus } from "../../core/types.js";
import type { Admission } from "./admission.js";
import type { GitPort } from "../ports/git-port.js";
import type { Live, SupervisorDeps } from "./live.js";
import type { TaskRecord } from "./record.js";
import type { Runner, StatusInfo } from "./runner-types.js";
import type { Connection } from "../server/server-types.js";

export type { ChildEvent, ChildReport, StatusInfo } from "./runner-types.js";
export type StatusListener = (live: Live, result: AgentResult, info: StatusInfo) => void;

export type NewTaskInput = Omit<
  TaskRecord,
  "token" | "name" | "sessionPath" | "resultPath" | "workdir" | "cycle" | "status" | "timing" | "createdAt"
> & { createdAt: number };

export interface Supervisor {
  /** One runner per task. */
  readonly tasks: Map<string, Runner>;
  readonly admission: Admission;
  readonly deps: SupervisorDeps & { clock: Clock; git: GitPort };
  /** Set first thing at daemon stop: unfinished launches are then left to the next daemon's recovery. */
  stopped: boolean;
  /**
   * The first answer of each idempotent request (task.spawn/task.respond with a requestId from a relaying daemon)
   * while this daemon runs, by request; bounded (src/daemon/methods/request-memo.ts).
   */
  readonly requestMemo: Map<string, Promise<unknown>>;
  onStatus(fn: StatusListener): () => void;
  notifyStatus(live: Live, result: AgentResult, info?: StatusInfo): void;
  authenticate(taskId: string, token: string): boolean;
  /** A child's extension said hello: its task's runner takes the connection. */
  childConnected(conn: Connection): void;
  /** The runner of the task a child connection belongs to. */
  runnerOf(conn: Connection): Runner | undefined;
  register(rec: TaskRecord): Runner;
  statusOf(live: Pick<Live, "result"> & { rec: Pick<Live["rec"], "status"> }): AgentStatus;
  isOpen(live: Pick<Live, "state">): boolean;
  newRecord(input: NewTaskInput, taskId: string): TaskRecord;
}
