// The follow side of the relay: a remote task's live status (task.subscribe pushes, kept in memory and written
// without fsync), its settled result (`task.wait` rounds, then the patch copied and the result recorded durably
// before the owner hears it), and what a link's up and down mean for the tasks on that machine.
import { createHash } from "node:crypto";
import { isDshError } from "../core/errors.js";
import { isSettledStatus } from "../core/derive.js";
import type { AgentResult } from "../core/types.js";
import { writeAtomic } from "../store/fsio.js";
import type { LinkDown } from "./link.js";
import { stepRemote } from "./relay-machine.js";
import { localize, UNREACHABLE_PREFIX, WAIT_ROUND_MS, type RelayContext, type RelayLive } from "./relay-types.js";

export class RemoteFollow {
  constructor(private readonly ctx: RelayContext) {}

  private get sup() {
    return this.ctx.sup;
  }

  remoteLives(label: string): RelayLive[] {
    return [...this.sup.tasks.values()].filter((l) => l.rec.remote?.label === label);
  }

  private byRemoteId(label: string, remoteId: string): RelayLive | undefined {
    return this.remoteLives(label).find((l) => l.rec.remote!.taskId === remoteId);
  }

  /** A live (unsettled) status from the remote: kept in memory, pushed, written without fsync on a change. */
  async snapshot(live: RelayLive, remote: AgentResult, force = false): Promise<void> {
    if (live.state.phase.name !== "running") return; // a settled cycle is final
    if (isSettledStatus(remote.status)) return; // the follow loop records settled results, harvest included
    const result = localize(live, remote);
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
  async follow(live: RelayLive): Promise<void> {
    if (live.following) return;
    live.following = true;
    try {
      while (!this.ctx.stopped && live.state.phase.name === "running") {
        const link = this.ctx.linkOf(live.rec.remote!.label);
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
          await new Promise((res) => this.sup.deps.clock.setTimer(1000, () => res(undefined)));
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
      live.following = false;
    }
  }

  /**
   * The remote's settled result of the current cycle: the patch copied here, then result.json, task.json and the
   * journal's settled status written durably, then the supervisor's listeners (owner delivery) hear it. A crash
   * before the write makes the next daemon ask the remote again; after it, recovery feeds it to delivery again and
   * the delivery id (`<taskId>-c<cycle>-<status>`) drops the repeat.
   */
  private async settle(live: RelayLive, remote: AgentResult): Promise<void> {
    if (live.state.phase.name !== "running") return; // recorded already (a repeat after a reconnect)
    if (!isSettledStatus(remote.status)) return; // task.wait answered with a cycle still running: not a verdict
    const { store } = this.sup.deps;
    const cycle = live.rec.cycle;
    let diffSha256: string | undefined;
    if (remote.diff) {
      const link = this.ctx.linkOf(live.rec.remote!.label);
      const p = await link
        ?.request<{ patch: string | null; truncated: boolean }>("task.patch", { taskId: live.rec.remote!.taskId })
        .catch((e: unknown) => {
          this.sup.deps.log.warn({ taskId: live.rec.taskId, err: String(e) }, "remote diff.patch not copied");
          return undefined;
        });
      if (p === undefined) return; // the link dropped meanwhile: the next "up" asks again
      if (p.patch !== null) {
        await writeAtomic(store.taskPaths(live.rec.taskId).diffPatch, p.patch, 0o600, { sync: true });
        diffSha256 = createHash("sha256").update(p.patch).digest("hex");
      }
    }
    const result = localize(live, remote);
    // The machine settles the cycle (its settle record first, once per cycle), then asks for the settled record.
    await stepRemote(
      this.ctx,
      live,
      { type: "remote_settled", cycle, status: result.status, journaled: live.settleJournaled === cycle },
      async () => {
        live.result = result;
        live.rec.status = result.status;
        live.rec.updatedAt = Date.now();
        live.rec.timing = { ...result.timing };
        if (result.worktree) live.rec.worktree = result.worktree;
        if (result.sessionPath) live.rec.sessionPath = result.sessionPath;
        await store.saveTask(live.rec, result, { sync: true });
        // The local copy of the remote's diff.patch is pinned by its digest (`verify` checks it here).
        await store.appendEvent(live.rec.taskId, {
          type: "status",
          status: result.status,
          cycle,
          settled: true,
          remote: true,
          ...(diffSha256 ? { pin: { remote: true, diffSha256 } } : {}),
        });
        this.sup.notifyStatus(live, result, { settled: true });
      },
    );
    // The machine keeps the settled status (what abort is asked against).
    await live.dispatchRemote({ type: "harvested", cycle, status: result.status });
    delete live.settleJournaled;
  }

  // ---- link events ----

  async onUp(label: string): Promise<void> {
    const link = this.ctx.linkOf(label);
    if (!link) return;
    try {
      await link.request("task.subscribe", {});
    } catch (e) {
      this.sup.deps.log.warn({ label, err: String(e) }, "remote task.subscribe failed");
    }
    for (const live of this.remoteLives(label)) {
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
  async onDown(label: string, d: LinkDown): Promise<void> {
    const warning = `${UNREACHABLE_PREFIX(label)}${new Date(d.since).toISOString()} (${d.error.message.slice(0, 300)})`;
    for (const live of this.remoteLives(label)) {
      if (live.state.phase.name !== "running" || !live.result) continue;
      const prefix = UNREACHABLE_PREFIX(label);
      if (live.result.warnings?.some((w) => w.startsWith(prefix))) continue;
      const result = { ...live.result, warnings: [...(live.result.warnings ?? []), warning] };
      live.result = result;
      this.sup.notifyStatus(live, result, { settled: false });
      await this.sup.deps.store.saveTask(live.rec, result, { sync: false }).catch(() => undefined);
    }
  }

  async onPush(label: string, p: { taskId: string; result: AgentResult }): Promise<void> {
    const live = this.byRemoteId(label, p.taskId);
    if (!live || !p.result) return;
    await this.snapshot(live, p.result);
  }
}
