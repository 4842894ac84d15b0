// The follow side of the relay: what the machine says about its tasks reaches this daemon as `task.followed`
// pushes (src/daemon/methods/link-methods.ts: every status, with its cycle and whether it is the cycle's settled result),
// read once more with `task.fetch` when the link comes up (a settle while it was down) and whenever a result is too
// large to travel inline. Every result is checked first (remote-check.ts). A live status is kept in memory and
// written without fsync; a settled one has its patch copied here, then goes through the lifecycle machine
// (remote_settled: the settle record, then the record written and the owner told). A result that breaks the contract
// is the machine's remote_invalid event (the cycle settles `failed` with REMOTE_INVALID), a task the machine no
// longer knows its remote_lost (`gone`, REMOTE_LOST): verdicts of this daemon's, decided by the machine like any.
// The per-task state (a settle under way) lives on the task's runner (RelayLive), not here.
import { createHash } from "node:crypto";
import type { TimerHandle } from "../../core/clock.js";
import { isDshError } from "../../core/errors.js";
import { backoffDelay, RELAY_RETRY_BACKOFF } from "../../core/machines.js";
import { isSettledStatus, nextActionFor, recordStatus } from "../../core/result/derive.js";
import { settleVerdict, type CycleEvent, type SettleReason } from "../../core/lifecycle/task-cycle.js";
import type { AgentResult, AgentStatus } from "../../core/types.js";
import type { JournalRecord } from "../../core/lifecycle/journal-record.js";
import { writeAtomic } from "../../store/fsio.js";
import type { LinkDown, MachineLink } from "../../link/link.js";
import { fetchPart } from "./relay-fetch.js";
import { stepRemote } from "./relay-machine.js";
import {
  checkRemoteResult,
  checkSize,
  isRemoteViolation,
  REMOTE_PATCH_MAX_BYTES,
  REMOTE_RESULT_MAX_BYTES,
  RemoteViolation,
} from "./remote-check.js";
import { awaitingSpawn, localize, UNREACHABLE_PREFIX, type RelayContext, type RelayLive } from "./relay-types.js";

/** What the machine says of one task: a push, or a page read with task.fetch. */
interface News {
  cycle: number;
  settled: boolean;
  /** The result's JSON size in bytes, as announced. */
  bytes: number;
  /** Parsed, not checked yet; absent when too large to travel inline (then it is fetched). */
  result?: unknown;
}

/** How long one request of a reattach or a refresh may take before the task keeps its last status. */
export const REFRESH_TIMEOUT_MS = 20_000;

/** This daemon's own verdicts on a relayed task's running cycle (the machine decides them like any event). */
export type VerdictEvent = Extract<CycleEvent, { type: "remote_invalid" | "remote_lost" | "launch_failed" }>;

export class RemoteFollow {
  /** Tasks to read again after a failed read while their link stayed up: the timer, and the failures in a row. */
  private readonly rereads = new WeakMap<RelayLive, { timer?: TimerHandle; failures: number }>();
  /** byRemoteId's cache: `<label>\0<remote task id>` → the task here. */
  private readonly byRemote = new Map<string, RelayLive>();

  constructor(private readonly ctx: RelayContext) {}

  private get sup() {
    return this.ctx.sup;
  }

  remoteLives(label: string): RelayLive[] {
    return [...this.sup.tasks.values()].filter((l) => l.rec.remote?.label === label);
  }

  /**
   * The task relayed here as `remoteId` on machine `label`. Every push asks, so a found task is kept (checked against
   * the task map on use) instead of scanning every task each time; a push of a task not relayed from here still scans.
   */
  private byRemoteId(label: string, remoteId: string): RelayLive | undefined {
    if (remoteId === "") return undefined;
    const key = `${label}\0${remoteId}`;
    const known = this.byRemote.get(key);
    const r = known?.rec.remote;
    if (known && this.sup.tasks.get(known.rec.taskId) === known && r?.label === label && r.taskId === remoteId)
      return known;
    this.byRemote.delete(key);
    for (const l of this.sup.tasks.values()) {
      const there = l.rec.remote;
      if (there?.label !== label || there.taskId !== remoteId) continue;
      if (this.byRemote.size > this.sup.tasks.size + 64) this.byRemote.clear(); // closed tasks' entries
      this.byRemote.set(key, l);
      return l;
    }
    return undefined;
  }

  /** A cycle runs there and nothing settled it here yet (a closed or settled phase is not running). */
  private open(live: RelayLive): boolean {
    return live.state.phase.name === "running" && !awaitingSpawn(live);
  }

  // ---- what the machine says ----

  /** A `task.followed` push. */
  async onFollowed(label: string, p: unknown): Promise<void> {
    const m = p as { taskId?: unknown; cycle?: unknown; settled?: unknown; bytes?: unknown; result?: unknown };
    if (typeof m?.taskId !== "string") return;
    const live = this.byRemoteId(label, m.taskId);
    if (!live || !this.open(live)) return; // a task of that machine not relayed from here, or settled here already
    if (!Number.isSafeInteger(m.cycle) || typeof m.settled !== "boolean" || !Number.isSafeInteger(m.bytes))
      return this.refuse(live, new RemoteViolation("task.followed", "is not the push the protocol promises"));
    await this.take(live, {
      cycle: m.cycle as number,
      settled: m.settled,
      bytes: m.bytes as number,
      ...(m.result !== undefined ? { result: m.result } : {}),
    });
  }

  /**
   * Ask the machine for the task's current result (task.fetch, paged) and take it: after a reconnect, a spawn or a
   * follow-up. The machine unreachable or slow: the task keeps its last status (and the outage's warning).
   */
  async refresh(live: RelayLive, timeoutMs = REFRESH_TIMEOUT_MS): Promise<void> {
    if (!this.open(live)) return;
    const link = this.ctx.linkOf(live.rec.remote!.label);
    if (link?.state !== "up") return;
    try {
      const f = await fetchPart(link, live.rec.remote!.taskId, "result", REMOTE_RESULT_MAX_BYTES, timeoutMs);
      await this.take(live, { cycle: f.cycle, settled: f.settled, bytes: f.bytes.length, result: parse(f.bytes) });
    } catch (e) {
      await this.failed(live, e, "task.fetch");
    }
  }

  /** The task was read: no re-read pending, and the next failure pauses from the start. */
  private wasRead(live: RelayLive): void {
    const r = this.rereads.get(live);
    if (r === undefined) return;
    this.sup.deps.clock.clearTimer(r.timer);
    this.rereads.delete(live);
  }

  /**
   * A read failed while the link stayed up (a reply that came late, an error there): no push or reconnect need come
   * that would read the task again, and a settle it missed would never reach the owner. Read it again after a pause
   * (RELAY_RETRY_BACKOFF: 0.5-1 s, doubling to 15-30 s) while its cycle runs here; a dropped link is read
   * again by the next "up" instead.
   * Returns the pause when it scheduled one (0: one was due already), undefined when it will not read again.
   */
  private rereadLater(live: RelayLive): number | undefined {
    if (this.ctx.stopped || !this.open(live) || this.ctx.linkOf(live.rec.remote!.label)?.state !== "up")
      return undefined;
    const r = this.rereads.get(live) ?? { failures: 0 };
    this.rereads.set(live, r);
    if (r.timer !== undefined) return 0; // one is due already
    const delay = backoffDelay(r.failures, Math.random(), RELAY_RETRY_BACKOFF);
    r.failures++;
    r.timer = this.sup.deps.clock.setTimer(delay, () => {
      delete r.timer;
      if (this.ctx.stopped) return;
      this.refresh(live).catch((e: unknown) =>
        this.sup.deps.log.warn({ taskId: live.rec.taskId, err: String(e) }, "remote task not read again"),
      );
    });
    return delay;
  }

  /** One piece of news about the task's current cycle: a live status, or its settled result. */
  private async take(live: RelayLive, n: News): Promise<void> {
    if (!this.open(live)) return; // settled here already (a repeat), closed, or not adopted yet
    if (n.cycle !== live.rec.cycle) return this.otherCycle(live, n.cycle);
    let raw = n.result;
    let settled = n.settled;
    try {
      checkSize("result", n.bytes, REMOTE_RESULT_MAX_BYTES);
      if (raw === undefined) {
        if (!settled) return; // a live status too large to travel inline: the settle brings the result
        const link = this.ctx.linkOf(live.rec.remote!.label);
        if (link?.state !== "up") return; // dropped meanwhile: the next "up" reads it
        const f = await fetchPart(link, live.rec.remote!.taskId, "result", REMOTE_RESULT_MAX_BYTES, REFRESH_TIMEOUT_MS);
        if (f.cycle < live.rec.cycle)
          throw wentBack(f.cycle, `the result announced settled in cycle ${live.rec.cycle}`);
        if (f.cycle !== live.rec.cycle) return await this.otherCycle(live, f.cycle); // its failure is caught below
        raw = parse(f.bytes);
        settled = f.settled;
      }
      const result = checkRemoteResult(raw, { remoteTaskId: live.rec.remote!.taskId, settled });
      if (settled) await this.settle(live, result);
      else await this.snapshot(live, result);
      // Only now, and only when taken: a settle that fails after the read (its patch, the local copy), or returns
      // without settling (the link dropped meanwhile), keeps the re-read it has.
      if (!settled || !this.open(live)) this.wasRead(live);
    } catch (e) {
      await this.failed(live, e, "task.fetch");
    }
  }

  /** A request about the task failed: a violation refuses it, a task unknown there is lost, else it waits. */
  private async failed(live: RelayLive, e: unknown, what: string): Promise<void> {
    if (isRemoteViolation(e)) return this.refuse(live, e);
    if (isDshError(e) && e.code === "TASK_NOT_FOUND") return this.lost(live);
    const again = this.rereadLater(live);
    this.sup.deps.log.warn(
      {
        taskId: live.rec.taskId,
        label: live.rec.remote!.label,
        err: String(e),
        ...(again ? { retryInMs: again } : {}),
      },
      `remote ${what} failed; the task keeps its last status${again !== undefined ? " and is read again" : ""}`,
    );
  }

  /** A live (unsettled) status: kept in memory, pushed, written without fsync on a change. */
  async snapshot(live: RelayLive, remote: AgentResult, force = false): Promise<void> {
    if (!this.open(live)) return;
    if (isSettledStatus(remote.status)) return; // not settled yet by the remote's own word: its settle follows
    const result = localize(this.sup, live, remote);
    const changed = force || result.status !== live.result?.status || hadOutage(live);
    live.result = result;
    recordStatus(live.rec, { kind: "result", status: result.status });
    live.rec.updatedAt = this.sup.deps.clock.now();
    if (!changed) return;
    this.sup.notifyStatus(live, result, { settled: false });
    await this.sup.deps.store
      .saveTask(live.rec, result, { sync: false })
      .catch((e: unknown) =>
        this.sup.deps.log.warn({ taskId: live.rec.taskId, err: String(e) }, "remote snapshot not saved"),
      );
  }

  /**
   * The remote's settled result of the current cycle: the patch copied here (paged), then the machine settles the
   * cycle (its settle record first, once per cycle) and records it: result.json and task.json written, the settled
   * status journaled (durable through the commit log, before the owner's outbox record), then the owner hears it.
   * A crash before the record: the next daemon reads it from the machine again; after it: recovery feeds it to
   * delivery again and the delivery id (`<taskId>-c<cycle>-<status>`) drops the repeat.
   */
  private settle(live: RelayLive, remote: AgentResult): Promise<void> {
    if (live.remoteSettling) return live.remoteSettling;
    const p = this.settleOnce(live, remote).finally(() => {
      if (live.remoteSettling === p) delete live.remoteSettling;
    });
    live.remoteSettling = p;
    return p;
  }

  private async settleOnce(live: RelayLive, remote: AgentResult): Promise<void> {
    if (!this.open(live)) return;
    const { store } = this.sup.deps;
    let diffSha256: string | undefined;
    if (remote.diff) {
      const link = this.ctx.linkOf(live.rec.remote!.label);
      if (link?.state !== "up") return; // dropped meanwhile: the next "up" reads the settle again
      const f = await fetchPart(link, live.rec.remote!.taskId, "patch", REMOTE_PATCH_MAX_BYTES, REFRESH_TIMEOUT_MS);
      // The patch served is the machine's current cycle's: one answered there after the result's read is other work,
      // and an older one than the result's cannot be (a machine's cycle never goes back).
      if (f.cycle < live.rec.cycle)
        throw wentBack(f.cycle, `the diff.patch of a result read settled in cycle ${live.rec.cycle}`);
      if (f.cycle !== live.rec.cycle) return await this.otherCycle(live, f.cycle, "the diff.patch of the result");
      if (!f.settled)
        throw new RemoteViolation(
          "task.fetch.settled",
          `is false for the diff.patch of cycle ${f.cycle}, whose result was read settled`,
        );
      // The local copy is what `dsh-herdr diff` reads (localize points diff.patchPath at it); none there, none here.
      const copy = store.taskPaths(live.rec.taskId).diffPatch;
      if (f.exists) {
        await writeAtomic(copy, f.bytes, 0o600, { sync: true });
        diffSha256 = createHash("sha256").update(f.bytes).digest("hex");
      }
    }
    const result = localize(this.sup, live, remote);
    const cycle = live.rec.cycle;
    await this.settleWith(
      live,
      { type: "remote_settled", cycle, status: result.status, journaled: live.settleJournaled === cycle },
      () => result,
      diffSha256,
    );
  }

  /**
   * Settle the current cycle through the machine (`ev`: the remote's settle, or a verdict of this daemon's own) and
   * record the result `build` makes of the settle's reason: the settle record, the settled status record (both
   * awaited until written; the commit log makes them durable before the owner's outbox record that follows), then
   * the owner hears it, then result.json and task.json are written (fsynced, their directory later), as for a local
   * settle: the fsyncs run beside the outbox's, not before it. A crash before result.json is written: the journal
   * says settled, the restarted daemon reads the result from the machine again (or carries out its own journaled
   * verdict) and records it without a second settled record (statusJournaled); the delivery id drops a repeat.
   * `diffSha256`: the local copy of the remote's diff.patch, pinned in the status record (`verify` checks it here).
   */
  async settleWith(
    live: RelayLive,
    ev: CycleEvent,
    build: (reason: SettleReason) => AgentResult,
    diffSha256?: string,
  ): Promise<void> {
    const { store } = this.sup.deps;
    const cycle = live.rec.cycle;
    let settled: string | undefined;
    await stepRemote(this.ctx, live, ev, async (reason, settleRecord) => {
      const result = build(reason);
      settled = result.status;
      live.result = result;
      recordStatus(live.rec, { kind: "result", status: result.status });
      live.rec.updatedAt = this.sup.deps.clock.now();
      live.rec.timing = { ...result.timing };
      if (result.worktree) live.rec.worktree = result.worktree;
      if (result.sessionPath) live.rec.sessionPath = result.sessionPath;
      // The settle record (when the machine left it to us) and the settled status record: one append.
      const records: JournalRecord[] = settleRecord ? [settleRecord] : [];
      if (live.statusJournaled !== cycle)
        records.push({
          type: "status",
          status: result.status,
          cycle,
          settled: true,
          remote: true,
          ...(diffSha256 ? { pin: { remote: true, diffSha256 } } : {}),
        });
      if (records.length > 0) await live.journalWritten(...(records as [JournalRecord, ...JournalRecord[]]));
      // The owner hears it first (its outbox record goes to the commit log ahead of these writes, as for a local
      // settle); the record's write goes on the task's chain in the same tick, so task.wait and task.get answer
      // after it (a caller may read result.json next).
      this.sup.notifyStatus(live, result, { settled: true });
      // Started a turn later, so the owner's outbox write (the commit log starts it on the next turn) gets a head
      // start instead of queuing in the thread pool and the disk behind these two synced rewrites; a local settle
      // writes its record only after reading its digests, so it never raced them (docs/performance.md).
      const saved = new Promise<void>((r) => setImmediate(r)).then(() =>
        store.saveTask(live.rec, result, {
          sync: true,
          dirSyncLater: (done) =>
            void done.catch((e: unknown) =>
              this.sup.deps.log.warn({ taskId: live.rec.taskId, err: String(e) }, "task directory not fsynced"),
            ),
        }),
      );
      live.onChain(() => saved).catch(noop); // what is queued on the task waits for the write
      await saved;
    });
    // The machine keeps the settled status (what abort and respond are asked against).
    if (settled !== undefined) await stepRemote(this.ctx, live, { type: "harvested", cycle, status: settled });
    delete live.settleJournaled;
    delete live.statusJournaled;
  }

  /** The machine sent something that breaks the contract: the cycle settles `failed` with REMOTE_INVALID. */
  async refuse(live: RelayLive, v: RemoteViolation): Promise<void> {
    if (!this.open(live)) return;
    const { label, taskId: remoteId } = live.rec.remote!;
    const message = `machine ${label} sent an invalid result for task ${remoteId} there (${v.field}: ${v.why}); it was refused, nothing of it was taken. Run the same dsh-herdr version on both machines; inspect the task there (\`dsh-herdr logs ${live.rec.taskId}\`), then close it here`;
    this.sup.deps.log.error(
      { taskId: live.rec.taskId, label, remoteTaskId: remoteId, field: v.field, why: v.why },
      "REMOTE_INVALID",
    );
    await this.settleHere(live, { type: "remote_invalid", cycle: live.rec.cycle, field: v.field, message });
  }

  /** The machine no longer knows the task (its home wiped, or gc'd there): the cycle settles `gone`. */
  async lost(live: RelayLive): Promise<void> {
    if (!this.open(live)) return;
    const { label, taskId: remoteId } = live.rec.remote!;
    const message = `machine ${label} no longer knows task ${remoteId} (its home was wiped, or the task was removed there); its work is lost to this daemon: close it here (\`dsh-herdr close ${live.rec.taskId}\`) and spawn it again`;
    this.sup.deps.log.error({ taskId: live.rec.taskId, label, remoteTaskId: remoteId }, "REMOTE_LOST");
    await this.settleHere(live, { type: "remote_lost", cycle: live.rec.cycle, message });
  }

  /**
   * News of another cycle than the one running here: an older one is dropped, as is a newer one this daemon asked
   * for (a follow-up not reconciled here yet; relay-requests.ts adopts it). A newer one while no request of this
   * daemon's is under way was started on that machine: this cycle ended there unread (movedOn).
   */
  private async otherCycle(live: RelayLive, cycle: number, unread = "the result"): Promise<void> {
    if (cycle > live.rec.cycle && !requestUnderWay(live)) await this.movedOn(live, cycle, unread);
  }

  /**
   * The machine moved the task on to a cycle started there, before this daemon read the settle of the cycle it runs:
   * that result cannot be read any more, so the cycle settles `gone` (REMOTE_LOST, naming both cycles), not `running`
   * until someone closes it.
   */
  private async movedOn(live: RelayLive, cycleThere: number, unread: string): Promise<void> {
    if (!this.open(live)) return;
    const { label, taskId: remoteId } = live.rec.remote!;
    const message = `machine ${label} moved task ${remoteId} on to cycle ${cycleThere}, started there and not from here, before this daemon read ${unread} of cycle ${live.rec.cycle}; that result can no longer be read from here. Inspect the task there (\`dsh-herdr logs ${live.rec.taskId}\`), then close it here; answer a relayed task from the machine that spawned it`;
    this.sup.deps.log.error(
      { taskId: live.rec.taskId, label, remoteTaskId: remoteId, cycle: live.rec.cycle, cycleThere },
      "REMOTE_LOST",
    );
    await this.settleHere(live, { type: "remote_lost", cycle: live.rec.cycle, message });
  }

  /**
   * Settle the cycle with a verdict of this daemon's own (the machine's word refused, the task gone there, a request
   * the machine refused), fed to the machine as its event: the machine decides (a cycle not in flight ignores it),
   * the result is the task's own facts with the status and error the settle reason fixes.
   */
  async settleHere(
    live: RelayLive,
    ev: VerdictEvent | Extract<CycleEvent, { type: "settle_recovered" }>,
  ): Promise<void> {
    await this.settleWith(live, ev, (reason) => verdictOf(live, reason, this.sup.deps.clock.now()));
  }

  // ---- link events ----

  /** The link is up: follow the machine's tasks, then read each open one's current result once. */
  async onUp(label: string, timeoutMs = REFRESH_TIMEOUT_MS): Promise<void> {
    const link = this.ctx.linkOf(label);
    if (!link) return;
    try {
      await link.request("task.follow", {}, { timeoutMs });
    } catch (e) {
      // UNKNOWN_METHOD: an older dsh-herdr there (the relay needs the same version on both machines).
      this.sup.deps.log.warn(
        { label, err: String(e), remoteVersion: link.hello?.daemonVersion },
        "remote task.follow failed; its tasks keep their last status (run the same dsh-herdr version on both machines)",
      );
      return;
    }
    await Promise.all(this.remoteLives(label).map((live) => this.refresh(live, timeoutMs)));
  }

  /** A remote task keeps its last status, with a warning, until the link answers again. */
  async onDown(label: string, d: LinkDown): Promise<void> {
    const why = d.error.message.slice(0, 300);
    await Promise.all(this.remoteLives(label).map((live) => this.warnUnreachable(live, d.since, why)));
  }

  /** Add the outage's warning to a running remote task's live result (once per outage). */
  async warnUnreachable(live: RelayLive, since: number, why: string): Promise<void> {
    const ph = live.state.phase.name;
    if (ph === "closed" || ph === "settled" || !live.result) return;
    const prefix = UNREACHABLE_PREFIX(live.rec.remote!.label);
    if (live.result.warnings?.some((w) => w.startsWith(prefix))) return;
    const warning = `${prefix}${new Date(since).toISOString()} (${why})`;
    const result = { ...live.result, warnings: [...(live.result.warnings ?? []), warning] };
    live.result = result;
    this.sup.notifyStatus(live, result, { settled: false });
    await this.sup.deps.store.saveTask(live.rec, result, { sync: false }).catch(() => undefined);
  }
}

const noop = () => undefined;

/** A spawn or follow-up of this daemon's is unanswered, or its refusal is still being settled here. */
function requestUnderWay(live: RelayLive): boolean {
  return live.remoteRequest !== undefined || live.remoteRefusing === true;
}

function parse(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString("utf8")) as unknown;
  } catch {
    throw new RemoteViolation("result", "is not JSON");
  }
}

/**
 * task.fetch served `what` (a part of the settled result of a later cycle) as `cycle`'s: the machine's cycle went
 * back, which no honest machine does. Dropping it as another cycle's news would leave the cycle running here with
 * nothing to read it again; refused instead (REMOTE_INVALID).
 */
function wentBack(cycle: number, what: string): RemoteViolation {
  return new RemoteViolation("task.fetch.cycle", `is ${cycle} for ${what}; a machine's cycle never goes back`);
}

function hadOutage(live: RelayLive): boolean {
  const prefix = UNREACHABLE_PREFIX(live.rec.remote!.label);
  return live.result?.warnings?.some((w) => w.startsWith(prefix)) === true;
}

/** The result of a verdict of this daemon's own (settleHere): the status and error its settle reason fixes. */
function verdictOf(live: RelayLive, reason: SettleReason, now: number): AgentResult {
  const v = settleVerdict(reason);
  return verdictHere(live, v.status ?? "failed", v.error, now);
}

/**
 * A verdict this daemon reaches itself about a relayed task (REMOTE_INVALID, REMOTE_LOST, a spawn the machine
 * refused after a reconnect): the task's own facts, nothing of the remote's last word.
 */
export function verdictHere(
  live: RelayLive,
  status: AgentStatus,
  err: { code: string; message: string } | undefined,
  now: number,
): AgentResult {
  const { rec } = live;
  const last = live.result;
  const settled = isSettledStatus(status);
  return {
    schemaVersion: 1,
    taskId: rec.taskId,
    status,
    role: rec.role,
    agent: {
      name: rec.name,
      kind: rec.kind,
      model: rec.model ?? last?.agent.model ?? "",
      thinking: rec.thinking,
      machine: rec.remote!.label,
      runtime: rec.runtime,
    },
    herdrStatus: "unknown",
    summary: err ? err.message.split("; ")[0]!.slice(0, 300) : "",
    timing: settled ? { ...rec.timing, settledAt: now, elapsedMs: now - rec.createdAt } : { ...rec.timing },
    nextAction: nextActionFor(status),
    cwd: rec.cwd,
    owner: rec.owner,
    ...(rec.brief !== undefined ? { brief: rec.brief } : {}),
    ...(rec.worktree ? { worktree: rec.worktree } : {}),
    ...(err ? { error: { code: err.code, message: err.message } } : {}),
  };
}

export type { MachineLink };
