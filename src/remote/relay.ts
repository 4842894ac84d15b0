// The relay: a task spawned with `machine: LABEL` (a label under config.json `machines`) runs on that machine's own
// daemon, reached over its MachineLink. This daemon is a client there: it calls the remote `task.spawn` (as the
// CLI, so the remote owes no owner delivery), follows the remote task (`task.subscribe` pushes for live status,
// `task.wait` for the settled harvest), and keeps a local record (task dir, task.json with `remote`, result.json,
// a copy of diff.patch) so the local owner gets one AgentResult and one delivery per settled cycle, as if local.
//
// Remote tasks stay outside the lifecycle machine (src/core/task-cycle.ts): they are registered in the supervisor's
// task map (so list/get/wait/subscribe/delivery see them unchanged) with a phase the relay sets from what the
// remote says: `running` while a cycle runs there, `settled` once its settled result is recorded here, `closed`.
// The machine is never stepped for them; respond/close/abort are forwarded to the remote instead.
import { randomBytes } from "node:crypto";
import { DshError, isDshError } from "../core/errors.js";
import { isSettledStatus } from "../core/derive.js";
import type { AgentResult, AgentStatus, Role, RuntimeKind, Timing, WorktreeInfo } from "../core/types.js";
import type { BackoffPolicy, MachineSpec } from "../core/machines.js";
import type { TaskState } from "../core/task-cycle.js";
import type { Config } from "../store/config.js";
import { writeAtomic } from "../store/fsio.js";
import type { TaskStore } from "../store/task-store.js";
import { MachineLink, type LinkDown } from "./link.js";

// What the relay needs of the daemon, structurally (nothing outside src/daemon imports it; the Supervisor, its
// Live and RemoteRecord fit these shapes).

/** The fields of a task record (src/daemon/record.ts) the relay writes or reads. */
export interface RemoteRecord {
  taskId: string;
  owner: string;
  status: AgentStatus;
  createdAt: number;
  updatedAt?: number;
  brief?: string;
  cwd: string;
  kind: "pi";
  role: Role;
  model?: string;
  thinking: string;
  isolated: boolean;
  timeoutMs: number;
  machine?: string;
  remote?: { label: string; taskId: string };
  runtime: RuntimeKind;
  name: string;
  token: string;
  workdir: string;
  sessionPath: string;
  resultPath: string;
  worktree?: WorktreeInfo;
  cycle: number;
  timing: Timing;
  lifecycle?: "closed" | "interrupted";
}

export interface RelayLive {
  rec: RemoteRecord;
  state: TaskState;
  result?: AgentResult;
}
type Live = RelayLive;

interface RelayLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** The supervisor as the relay uses it: its task map, store, config, journal and status listeners. */
export interface RelayHost {
  readonly tasks: ReadonlyMap<string, RelayLive>;
  readonly deps: { store: TaskStore; config(): Config; log: RelayLogger };
  register(rec: RemoteRecord): RelayLive;
  journal(live: RelayLive, event: { type: string; [k: string]: unknown }): Promise<void>;
  notifyStatus(live: RelayLive, result: AgentResult, info: { settled: boolean }): void;
  statusOf(live: RelayLive): AgentStatus;
}

/** task.spawn params the relay forwards (src/daemon/methods.ts SpawnParams). */
export interface RemoteSpawnParams {
  machine?: string;
  cwd: string;
  model?: string;
  thinking?: string;
  role?: Role;
  prompt?: string;
  task?: unknown;
  brief?: string;
  isolated?: boolean;
  timeoutMs?: number;
  runtime?: RuntimeKind;
}

export interface RelayOptions {
  version: string;
  /** Environment for ssh (HOME finds ~/.ssh). */
  env?: NodeJS.ProcessEnv;
  backoff?: BackoffPolicy;
  /** How long start-up recovery waits for each machine before serving anyway (default 20 s). */
  reattachTimeoutMs?: number;
}

/** A `task.wait` round on the remote: short, so a drop or a close is noticed between rounds. */
const WAIT_ROUND_MS = 20_000;

const UNREACHABLE_PREFIX = (label: string) => `machine ${label} unreachable since `;

interface RemoteState {
  /** A follow loop (task.wait rounds) runs for this task. */
  following: boolean;
}

export class Relay {
  private readonly links = new Map<string, MachineLink>();
  private readonly state = new WeakMap<Live, RemoteState>();
  private stopped = false;

  constructor(
    private readonly sup: RelayHost,
    private readonly opts: RelayOptions,
  ) {}

  private machines(): Record<string, MachineSpec> {
    return this.sup.deps.config().machines ?? {};
  }

  /** `machine` names a configured machine (else it is Herdr's label, or unknown). */
  knows(label: string): boolean {
    return Object.hasOwn(this.machines(), label);
  }

  /** The task is relayed to another machine. */
  owns(live: Live): boolean {
    return live.rec.remote !== undefined;
  }

  private remoteLives(label: string): Live[] {
    return [...this.sup.tasks.values()].filter((l) => l.rec.remote?.label === label);
  }

  private byRemoteId(label: string, remoteId: string): Live | undefined {
    return this.remoteLives(label).find((l) => l.rec.remote!.taskId === remoteId);
  }

  /** The machine's link, once something used it (tests kill its ssh or read the remote daemon's pid). */
  linkOf(label: string): MachineLink | undefined {
    return this.links.get(label);
  }

  private link(label: string): MachineLink {
    let link = this.links.get(label);
    if (link) return link;
    const machine = this.machines()[label];
    if (!machine)
      throw new DshError(
        "MACHINE_UNKNOWN",
        `no machine "${label}" in config.json; add it with \`dsh-herdr machine add ${label} --ssh USER@HOST\``,
      );
    link = new MachineLink({
      label,
      machine,
      version: this.opts.version,
      ...(this.opts.env ? { env: this.opts.env } : {}),
      ...(this.opts.backoff ? { backoff: this.opts.backoff } : {}),
    });
    this.links.set(label, link);
    link.on("up", () => void this.onUp(label));
    link.on("down", (d) => void this.onDown(label, d));
    link.on("push", (method, params) => {
      if (method === "task.status") void this.onPush(label, params as { taskId: string; result: AgentResult });
    });
    link.start();
    return link;
  }

  /** The link up now, or MACHINE_UNREACHABLE with ssh's line (waits for an attempt under way). */
  private async ready(label: string): Promise<MachineLink> {
    const link = this.link(label);
    if (link.state === "up") return link;
    if (link.state === "down" && link.error) throw link.error;
    await link.ready();
    return link;
  }

  // ---- spawn ----

  async spawn(
    p: RemoteSpawnParams,
    owner: string,
  ): Promise<{ taskId: string; subagent_id: string; name: string; status: string; queued: boolean }> {
    const label = p.machine!;
    const link = await this.ready(label);
    const params: Record<string, unknown> = { cwd: p.cwd };
    for (const k of [
      "model",
      "thinking",
      "role",
      "prompt",
      "task",
      "brief",
      "isolated",
      "timeoutMs",
      "runtime",
    ] as const) {
      if (p[k] !== undefined) params[k] = p[k];
    }
    // As the CLI: the remote owes nobody a delivery; this daemon delivers to the local owner (docs/architecture.md).
    const spawned = await link.request<{ taskId: string; queued: boolean }>("task.spawn", params);
    const remote = await link.request<AgentResult>("task.get", { taskId: spawned.taskId });
    const { store } = this.sup.deps;
    const createdAt = Date.now();
    const rec = await store.createTask<RemoteRecord>(
      (taskId) => ({
        taskId,
        owner,
        status: remote.status,
        createdAt,
        cwd: p.cwd,
        kind: "pi",
        role: remote.role,
        model: remote.agent.model,
        thinking: remote.agent.thinking,
        isolated: p.isolated ?? false,
        timeoutMs: p.timeoutMs ?? this.sup.deps.config().defaultTimeoutMs,
        machine: label,
        remote: { label, taskId: spawned.taskId },
        runtime: remote.agent.runtime ?? "headless",
        name: remote.agent.name,
        token: randomBytes(24).toString("hex"),
        workdir: remote.worktree?.path ?? p.cwd,
        sessionPath: remote.sessionPath ?? "",
        resultPath: "",
        cycle: 1,
        timing: { createdAt },
        ...(p.brief !== undefined ? { brief: p.brief } : {}),
        ...(remote.worktree ? { worktree: remote.worktree } : {}),
      }),
      createdAt,
    );
    const live = this.sup.register(rec);
    live.state = { ...live.state, phase: { name: "running", cycle: 1 } };
    await this.sup.journal(live, { type: "remote_spawned", label, remoteTaskId: spawned.taskId });
    await this.snapshot(live, remote, true);
    void this.follow(live);
    return {
      taskId: rec.taskId,
      subagent_id: rec.taskId,
      name: rec.name,
      status: this.sup.statusOf(live),
      queued: spawned.queued,
    };
  }

  /** The remote's result as this daemon's: the local id and owner, the machine's label; its paths stay the remote's. */
  private localize(live: Live, r: AgentResult): AgentResult {
    const out: AgentResult = {
      ...r,
      taskId: live.rec.taskId,
      owner: live.rec.owner,
      agent: { ...r.agent, machine: live.rec.remote!.label },
    };
    const warnings = (r.warnings ?? []).filter((w) => !w.startsWith(UNREACHABLE_PREFIX(live.rec.remote!.label)));
    if (warnings.length > 0) out.warnings = warnings;
    else delete out.warnings;
    return out;
  }

  /** A live (unsettled) status from the remote: kept in memory, pushed, written without fsync on a change. */
  private async snapshot(live: Live, remote: AgentResult, force = false): Promise<void> {
    if (live.state.phase.name !== "running" || live.rec.lifecycle) return; // a settled cycle is final
    if (isSettledStatus(remote.status)) return; // the follow loop records settled results, harvest included
    const result = this.localize(live, remote);
    const changed = force || result.status !== live.result?.status;
    live.result = result;
    live.rec.status = result.status;
    live.rec.updatedAt = Date.now();
    if (!changed) return;
    this.sup.notifyStatus(live, result, { settled: false });
    await this.sup.deps.store
      .saveTask(live.rec, result, { sync: false })
      .catch((e: unknown) =>
        this.sup.deps.log.warn({ taskId: live.rec.taskId, err: String(e) }, "remote snapshot not saved"),
      );
  }

  /**
   * Follow the remote task's current cycle until its settled result is recorded here. `task.wait` rounds answer
   * only after the remote's settled harvest (diff included); a drop ends the loop and the next "up" starts it again.
   */
  private async follow(live: Live): Promise<void> {
    const st = this.stateOf(live);
    if (st.following) return;
    st.following = true;
    try {
      while (!this.stopped && live.state.phase.name === "running" && !live.rec.lifecycle) {
        const link = this.links.get(live.rec.remote!.label);
        if (link?.state !== "up") return;
        let r: { results: AgentResult[]; timedOut: boolean };
        try {
          r = await link.request(
            "task.wait",
            { taskIds: [live.rec.remote!.taskId], timeoutMs: WAIT_ROUND_MS },
            { timeoutMs: WAIT_ROUND_MS + 30_000 },
          );
        } catch (e) {
          if (isDshError(e) && e.code === "MACHINE_UNREACHABLE") return;
          // The remote lost the task (its home wiped, or gc'd there): asking again every second would only spin.
          if (isDshError(e) && e.code === "TASK_NOT_FOUND") {
            this.sup.deps.log.error(
              { taskId: live.rec.taskId, remoteTaskId: live.rec.remote!.taskId, label: live.rec.remote!.label },
              "the remote daemon has no such task; not followed any more",
            );
            return;
          }
          this.sup.deps.log.warn({ taskId: live.rec.taskId, err: String(e) }, "remote task.wait failed; trying again");
          await new Promise((res) => setTimeout(res, 1000));
          continue;
        }
        const res = r.results[0];
        if (!res) continue;
        if (r.timedOut) {
          await this.snapshot(live, res);
          continue;
        }
        await this.settle(live, res);
      }
    } finally {
      st.following = false;
    }
  }

  private stateOf(live: Live): RemoteState {
    let st = this.state.get(live);
    if (!st) this.state.set(live, (st = { following: false }));
    return st;
  }

  /**
   * The remote's settled result of the current cycle: the patch copied here, then result.json, task.json and the
   * journal's settled status written durably, then the supervisor's listeners (owner delivery) hear it. A crash
   * before the write makes the next daemon ask the remote again; after it, recovery feeds it to delivery again and
   * the delivery id (`<taskId>-c<cycle>-<status>`) drops the repeat.
   */
  private async settle(live: Live, remote: AgentResult): Promise<void> {
    if (live.state.phase.name !== "running") return; // recorded already (a repeat after a reconnect)
    const { store } = this.sup.deps;
    const cycle = live.rec.cycle;
    if (remote.diff) {
      const link = this.links.get(live.rec.remote!.label);
      const p = await link
        ?.request<{ patch: string | null; truncated: boolean }>("task.patch", { taskId: live.rec.remote!.taskId })
        .catch((e: unknown) => {
          this.sup.deps.log.warn({ taskId: live.rec.taskId, err: String(e) }, "remote diff.patch not copied");
          return undefined;
        });
      if (p === undefined) return; // the link dropped meanwhile: the next "up" asks again
      if (p.patch !== null)
        await writeAtomic(store.taskPaths(live.rec.taskId).diffPatch, p.patch, 0o600, { sync: true });
    }
    const result = this.localize(live, remote);
    live.result = result;
    live.rec.status = result.status;
    live.rec.updatedAt = Date.now();
    live.rec.timing = { ...result.timing };
    if (result.worktree) live.rec.worktree = result.worktree;
    if (result.sessionPath) live.rec.sessionPath = result.sessionPath;
    live.state = { ...live.state, phase: { name: "settled", cycle, reason: { kind: "agent_end" } } };
    await store.saveTask(live.rec, result, { sync: true });
    await store.appendEvent(live.rec.taskId, {
      type: "status",
      status: result.status,
      cycle,
      settled: true,
      remote: true,
    });
    this.sup.notifyStatus(live, result, { settled: true });
  }

  // ---- link events ----

  private async onUp(label: string): Promise<void> {
    const link = this.links.get(label);
    if (!link) return;
    try {
      await link.request("task.subscribe", {});
    } catch (e) {
      this.sup.deps.log.warn({ label, err: String(e) }, "remote task.subscribe failed");
    }
    for (const live of this.remoteLives(label)) {
      if (live.rec.lifecycle) continue;
      if (live.state.phase.name === "running") {
        // The warning goes with the outage; task.get gives the status the remote holds now.
        const r = await link
          .request<AgentResult>("task.get", { taskId: live.rec.remote!.taskId })
          .catch(() => undefined);
        if (r) await this.snapshot(live, r, true);
        void this.follow(live);
      }
    }
  }

  /** A remote task keeps its last status, with a warning, until the link is back. */
  private async onDown(label: string, d: LinkDown): Promise<void> {
    const warning = `${UNREACHABLE_PREFIX(label)}${new Date(d.since).toISOString()} (${d.error.message.slice(0, 300)})`;
    for (const live of this.remoteLives(label)) {
      if (live.state.phase.name !== "running" || live.rec.lifecycle || !live.result) continue;
      const prefix = UNREACHABLE_PREFIX(label);
      if (live.result.warnings?.some((w) => w.startsWith(prefix))) continue;
      const result = { ...live.result, warnings: [...(live.result.warnings ?? []), warning] };
      live.result = result;
      this.sup.notifyStatus(live, result, { settled: false });
      await this.sup.deps.store.saveTask(live.rec, result, { sync: false }).catch(() => undefined);
    }
  }

  private async onPush(label: string, p: { taskId: string; result: AgentResult }): Promise<void> {
    const live = this.byRemoteId(label, p.taskId);
    if (!live || !p.result) return;
    await this.snapshot(live, p.result);
  }

  // ---- owner commands, forwarded ----

  async respond(live: Live, message: string): Promise<{ cycle: number; queued: boolean }> {
    const link = await this.ready(live.rec.remote!.label);
    const r = await link.request<{ cycle: number; queued?: true }>("task.respond", {
      taskId: live.rec.remote!.taskId,
      message,
    });
    live.rec.cycle = r.cycle;
    delete live.rec.timing.settledAt;
    live.state = { ...live.state, phase: { name: "running", cycle: r.cycle } };
    await this.sup.journal(live, { type: "respond", cycle: r.cycle, remote: true });
    const now = await link.request<AgentResult>("task.get", { taskId: live.rec.remote!.taskId }).catch(() => undefined);
    if (now && !isSettledStatus(now.status)) await this.snapshot(live, now, true);
    else await this.sup.deps.store.writeTask(live.rec);
    void this.follow(live);
    return { cycle: r.cycle, queued: r.queued === true };
  }

  async abort(live: Live): Promise<boolean> {
    if (live.state.phase.name !== "running") return false;
    const link = await this.ready(live.rec.remote!.label);
    const r = await link.request<{ aborted_ids: string[] }>("task.abort", { taskIds: [live.rec.remote!.taskId] });
    // The abort settles the remote cycle; the follow loop records it (one delivery, as for a local abort).
    return r.aborted_ids.includes(live.rec.remote!.taskId);
  }

  async close(live: Live, closePane: boolean): Promise<AgentResult> {
    const link = await this.ready(live.rec.remote!.label);
    const r = await link.request<AgentResult>("task.close", { taskId: live.rec.remote!.taskId, closePane });
    const result = this.localize(live, r);
    live.rec.lifecycle = "closed";
    live.rec.status = result.status;
    live.result = result;
    live.state = { ...live.state, phase: { name: "closed" } };
    await this.sup.journal(live, { type: "closed", closePane, remote: true });
    await this.sup.deps.store.saveTask(live.rec, result, { sync: true });
    this.sup.notifyStatus(live, result, { settled: false });
    return result;
  }

  // ---- start-up recovery (src/daemon/recover.ts) ----

  /**
   * A remote task found at start-up: registered from its record and result.json; a cycle recorded as settled is fed
   * to delivery again (the delivery id drops it when it was queued before the crash). Then the machine's link is
   * awaited (bounded): once up, open cycles are followed again. An unreachable machine leaves the task with its
   * last status and a warning; the link keeps trying.
   */
  async recover(rec: RemoteRecord, settledCycles: Set<number>): Promise<void> {
    const live = this.sup.register(rec);
    const stored = await this.sup.deps.store.readResult(rec.taskId).catch(() => undefined);
    if (stored) live.result = stored;
    if (settledCycles.has(rec.cycle) && stored && isSettledStatus(stored.status)) {
      live.state = {
        ...live.state,
        phase: { name: "settled", cycle: rec.cycle, reason: { kind: "settled_before_crash" } },
      };
      this.sup.notifyStatus(live, stored, { settled: true });
    } else {
      live.state = { ...live.state, phase: { name: "running", cycle: rec.cycle } };
    }
    await this.sup.journal(live, {
      type: "recovered",
      plan: "remote",
      label: rec.remote!.label,
      phase: live.state.phase.name,
    });
  }

  /** After every remote task is registered: reattach to each machine with open ones, before the socket serves. */
  async reattach(): Promise<void> {
    const labels = new Set(
      [...this.sup.tasks.values()].filter((l) => l.rec.remote && !l.rec.lifecycle).map((l) => l.rec.remote!.label),
    );
    await Promise.all(
      [...labels].map(async (label) => {
        if (!this.knows(label)) {
          this.sup.deps.log.warn({ label }, "remote tasks of a machine no longer in config.json: left as they are");
          return;
        }
        const link = this.link(label);
        let timer: NodeJS.Timeout | undefined;
        const up = new Promise<void>((resolve) => {
          if (link.state === "up") return resolve();
          link.once("up", () => resolve());
          timer = setTimeout(resolve, this.opts.reattachTimeoutMs ?? 20_000);
        });
        await up;
        if (timer) clearTimeout(timer);
        if (link.state === "up")
          await this.onUp(label); // the "up" listener runs it too; follow() runs once per task
        else
          this.sup.deps.log.warn(
            { label, err: link.error?.message },
            "machine unreachable at start-up; its tasks keep their last status",
          );
      }),
    );
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all([...this.links.values()].map((l) => l.close()));
    this.links.clear();
  }
}
