// The supervisor: the task map (one runner per task, src/daemon/task/task-runner.ts), the status listeners and the
// children's authentication. Everything a task does is its runner's: evidence in, the lifecycle machine, harvests,
// timers and watches; the supervisor only builds each runner's ports and routes a child's connection to it.
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { Clock } from "../core/clock.js";
import { DshError } from "../core/errors.js";
import { agentName } from "../core/ids.js";
import { PI_DEFAULT_MODEL } from "../core/session/model-choice.js";
import { lifecycleOf } from "../core/lifecycle/task-cycle.js";
import type { AgentResult, AgentStatus } from "../core/types.js";
import { Admission } from "./task/admission.js";
import { systemClock } from "./ports/clock.js";
import { realGit, type GitPort } from "./ports/git-port.js";
import type { Live, SupervisorDeps } from "./task/live.js";
import type { TaskRecord } from "./task/record.js";
import type { Runner, StatusInfo, TaskPorts } from "./task/runner-types.js";
import type { Connection } from "./server/server-types.js";
import type { NewTaskInput, StatusListener, Supervisor as SupervisorPort } from "./task/supervisor-types.js";
import { TaskRunner } from "./task/task-runner.js";

export type { Live, SupervisorDeps } from "./task/live.js";
export type { StatusInfo } from "./task/supervisor-types.js";
export { TaskRunner } from "./task/task-runner.js";

export class Supervisor implements SupervisorPort {
  readonly tasks = new Map<string, TaskRunner>();
  readonly admission: Admission;
  readonly deps: SupervisorDeps & { clock: Clock; git: GitPort };
  /** Set first thing at daemon stop: unfinished launches are then left to the next daemon's recovery. */
  stopped = false;
  /** Idempotent requests' first answers (src/daemon/methods/request-memo.ts). */
  readonly requestMemo = new Map<string, Promise<unknown>>();
  private readonly listeners = new Set<StatusListener>();

  constructor(deps: SupervisorDeps) {
    this.deps = { ...deps, clock: deps.clock ?? systemClock, git: deps.git ?? realGit };
    this.admission = new Admission(() => deps.config(), this.deps.clock);
  }

  onStatus(fn: StatusListener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** A status change (or a settled harvest) reaches every listener before it is recorded. */
  notifyStatus(live: Live, result: AgentResult, info: StatusInfo = { settled: false }): void {
    for (const fn of this.listeners) fn(live, result, info);
  }

  /** A child proves itself with its task's token, while its task is open (not closed, not interrupted). */
  authenticate(taskId: string, token: string): boolean {
    const live = this.tasks.get(taskId);
    return live !== undefined && live.rec.token === token && lifecycleOf(live.state.phase) === undefined;
  }

  runnerOf(conn: Connection): TaskRunner | undefined {
    return this.tasks.get(conn.taskId ?? "");
  }

  childConnected(conn: Connection): void {
    this.runnerOf(conn)?.childConnected(conn);
  }

  /** A task's runner, with its ports: what it may use of the daemon. */
  register(rec: TaskRecord): TaskRunner {
    const { deps, admission } = this;
    const taskId = rec.taskId;
    const ports: TaskPorts = {
      runtimeFor: deps.runtimeFor,
      git: deps.git,
      store: deps.store,
      clock: deps.clock,
      log: deps.log,
      config: deps.config,
      env: {
        home: deps.home,
        socketPath: deps.socketPath,
        childExtensionPath: deps.childExtensionPath,
        childEnv: deps.childEnv,
      },
      slot: {
        acquire: () => admission.acquire(taskId),
        holds: () => admission.holds(taskId),
        release: () => {
          admission.cancel(taskId, () => new DshError("BAD_STATE", `task ${taskId} ended while queued`));
          admission.release(taskId);
        },
      },
      notify: (result, info) => this.notifyStatus(runner, result, info),
      stopped: () => this.stopped,
      taskCount: () => this.tasks.size,
      tasks: () => this.tasks.values(),
    };
    const runner = new TaskRunner(rec, ports);
    this.tasks.set(taskId, runner);
    return runner;
  }

  statusOf(live: Pick<Live, "result"> & { rec: Pick<Live["rec"], "status"> }): AgentStatus {
    return live.result?.status ?? live.rec.status;
  }

  isOpen(live: Pick<Live, "state">): boolean {
    return lifecycleOf(live.state.phase) === undefined;
  }

  newRecord(input: NewTaskInput, taskId: string): TaskRecord {
    const paths = this.deps.store.taskPaths(taskId);
    return {
      ...input,
      taskId,
      status: "starting",
      name: agentName(input.role, input.model ?? PI_DEFAULT_MODEL, taskId),
      token: randomBytes(24).toString("hex"),
      workdir: input.cwd,
      sessionPath: join(paths.dir, "session.jsonl"),
      resultPath: paths.resultMd,
      cycle: 1,
      timing: { createdAt: input.createdAt },
    };
  }
}
