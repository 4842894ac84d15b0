// task.check and task.land: the task's checks run again on demand (receipts journaled and put in its AgentResult),
// landability measured, and the work landed on its base branch (measured with settle-checks.ts, as a settle does).
import { isInFlight } from "../../core/lifecycle/cycle-phase.js";
import { type LandingOutcome, verifiedOf } from "../../core/result/check-receipts.js";
import { DshError } from "../../core/errors.js";
import type { JournalRecord } from "../../core/lifecycle/journal-record.js";
import { KeyedQueue } from "../../core/keyed-queue.js";
import type { AgentResult, CheckReceipt, Landing } from "../../core/types.js";
import { dirname, join } from "node:path";
import { appendFile } from "node:fs/promises";
import {
  dryLand,
  landTask,
  type LandOutcome,
  type LandStrategy,
  CHECK_PGIDS,
  childIdentity,
} from "../ports/git-port.js";
import { crashPoint } from "../ports/crash-hook.js";
import { clearIntent, landedEvent, settleIntent, writeIntent } from "./land-intent.js";
import { recordClosedLanding } from "../task/land-record.js";
import type { TaskStore } from "../../store/task-store.js";
import type { Runner } from "../task/runner-types.js";
import type { MethodContext } from "./method-context.js";
import type { TaskRecord } from "../task/record.js";

export { landFieldsOf } from "../task/record.js";
import type { HandlerTable } from "../server/server.js";
import type { Supervisor } from "../task/supervisor-types.js";
import { journaled, landingJournal, runChecksOf, withLanded } from "../task/settle-checks.js";

/**
 * The task a method acts on: live (settled, not relayed) or closed (from its files). The method reads `rec` and
 * `result` and hands what it found or made to `record`, the task's one writer: its runner for a live task
 * (land-record.ts), its files for a closed one. Nothing here assigns to a task's state.
 */
interface Target {
  readonly rec: TaskRecord;
  readonly result: AgentResult;
  /** Apply `outcome` (record, result, task.json, journal, owners told); answers the new result. */
  record(outcome: LandingOutcome, event: JournalRecord): Promise<AgentResult>;
}

/** The landings being run, each with its requester's cancel: the daemon's stop abandons them. */
const inFlight = new Map<AbortController, Promise<unknown>>();

/**
 * Abandon every landing in flight (the daemon stops): each ends its git processes and puts the checkout back; the
 * stop waits for that (a landing past its branch move finishes), up to `waitMs`.
 */
export async function abandonLandings(waitMs = 8000): Promise<void> {
  for (const c of inFlight.keys()) c.abort(new Error("the daemon is stopping"));
  const all = Promise.allSettled([...inFlight.values()]);
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([all, new Promise((r) => (timer = setTimeout(r, waitMs)))]);
  clearTimeout(timer);
}

/** Closed tasks have no chain: their on-demand work is serialized here, per task. */
const closedQueue = new KeyedQueue();
/** One landing at a time per repository: two would race for its checkout. */
const repoQueue = new KeyedQueue();

function elsewhere(taskId: string, rec: TaskRecord): void {
  if (rec.remote)
    throw new DshError(
      "BAD_STATE",
      `task ${taskId} runs on machine ${rec.remote.label}; run this there (its worktree is on that machine)`,
    );
}

/** A closed task's target: its files are its state, written by recordClosedLanding. */
function closedTarget(store: TaskStore, rec0: TaskRecord, result0: AgentResult): Target {
  let rec = rec0;
  let result = result0;
  return {
    get rec() {
      return rec;
    },
    get result() {
      return result;
    },
    async record(outcome, event) {
      const next = await recordClosedLanding(store, rec, result, outcome, event);
      rec = next.rec;
      result = next.result;
      return result;
    },
  };
}

/** A live task's target: its runner holds its record and result and applies what the method found. */
function liveTarget(live: Pick<Runner, "rec" | "recordLanding">, result0: AgentResult): Target {
  let result = result0;
  return {
    get rec() {
      return live.rec;
    },
    get result() {
      return result;
    },
    async record(outcome, event) {
      result = await live.recordLanding(result, outcome, event);
      return result;
    },
  };
}

function withTarget<T>(sup: Supervisor, taskId: string, op: (t: Target) => Promise<T>): Promise<T> {
  const live = sup.tasks.get(taskId);
  const { store } = sup.deps;
  if (!live)
    return closedQueue.run(taskId, async () => {
      const rec = await store.readTask<TaskRecord>(taskId);
      elsewhere(taskId, rec); // closed too: its worktree path names a directory on that machine
      const result = await store.readResult(taskId);
      if (!result) throw new DshError("BAD_STATE", `task ${taskId} has no result yet; wait for it`);
      return op(closedTarget(store, rec, result));
    });
  elsewhere(taskId, live.rec);
  // Behind the task's harvests, and ahead of a follow-up: task.respond waits for the chain, so no check runs while
  // the child works.
  return live.onChain(async () => {
    const ph = live.state.phase;
    if (isInFlight(ph) || ph.name === "queued")
      throw new DshError(
        "BAD_STATE",
        `task ${taskId} is still working (cycle ${live.rec.cycle}); wait for it (dsh-herdr wait ${taskId}), then try again`,
      );
    const result = live.result ?? (await store.readResult(taskId));
    if (!result) throw new DshError("BAD_STATE", `task ${taskId} has no result yet; wait for it`);
    return op(liveTarget(live, result));
  });
}

function needsWorktree(rec: TaskRecord): NonNullable<TaskRecord["worktree"]> {
  if (!rec.worktree)
    throw new DshError(
      "BAD_STATE",
      `task ${rec.taskId} did not work in an isolated worktree, so there is no branch to land; its changes are already in ${rec.cwd}`,
    );
  return rec.worktree;
}

export async function checkTask(sup: Supervisor, taskId: string) {
  return withTarget(sup, taskId, async (t) => {
    const { rec } = t; // read only: what changes goes through t.record
    if (!rec.checks?.length)
      throw new DshError(
        "BAD_STATE",
        `task ${taskId} has no checks; spawn with --check CMD (e.g. --check "npm test") to have the daemon run them`,
      );
    const receipts = await runChecksOf(sup.deps.store, rec, rec.workdir, "worktree");
    const checkRun = { cycle: rec.cycle, at: sup.deps.clock.now(), receipts };
    const verified = verifiedOf(receipts)!;
    const result = await t.record(
      { checkRun },
      {
        type: "checks",
        cycle: rec.cycle,
        onDemand: true,
        verified,
        receipts: receipts.map(journaled),
      },
    );
    return {
      taskId,
      checks: receipts,
      verified,
      warnings: (result.warnings ?? []).filter((w) => w.startsWith("check `")),
    };
  });
}

export interface LandParams {
  taskIds: string[];
  strategy?: LandStrategy;
  check?: boolean;
  dryRun?: boolean;
}

type LandReply = Omit<LandOutcome, "committed"> & { committed?: string; dryRun?: boolean; checks?: CheckReceipt[] };

async function landOne(sup: Supervisor, taskId: string, p: LandParams, signal?: AbortSignal): Promise<LandReply> {
  return withTarget(sup, taskId, async (t) => {
    const wt = needsWorktree(t.rec);
    const author = childIdentity(t.rec.name, t.rec.taskId);
    const store = sup.deps.store;
    const timeoutMs = sup.deps.config().land?.timeoutMs;
    const bounds = { ...(timeoutMs !== undefined ? { timeoutMs } : {}), ...(signal ? { signal } : {}) };
    const setup = t.rec.setupCommit ? { setup: t.rec.setupCommit } : {};
    const now = () => sup.deps.clock.now();
    return repoQueue.run(wt.repo, async () => {
      // Behind another landing in the same repository: a requester gone meanwhile abandons this one, never later.
      if (signal?.aborted)
        throw new DshError(
          "LAND_CANCELLED",
          `the landing of task ${taskId} was abandoned before it started (its requester went away); nothing was landed`,
        );
      // A landing the daemon died in: decided from git first (landedAs recorded once, never a second merge).
      await settleIntent(
        store,
        taskId,
        (landedAs) => t.rec.landing?.landedAs === landedAs,
        async (landing, committed) => {
          await t.record({ landing }, landedEvent(t.rec, landing, committed, true));
        },
        timeoutMs,
      );
      // A refusal that measured the landing (conflicts, a failed check, paths in the way) leaves the record saying it.
      const recordRefusal = async (e: unknown) => {
        const found = e instanceof DshError ? (e.details?.["landing"] as Landing | undefined) : undefined;
        if (found) {
          const landing = withLanded(found, t.rec.landing);
          await t.record({ landing }, { type: "landability", cycle: t.rec.cycle, ...landingJournal(landing) });
        }
        throw e;
      };
      if (p.dryRun) {
        const l = await dryLand({ taskId, worktree: wt, author, ...setup, ...bounds }).catch(recordRefusal);
        const landing = withLanded(l, t.rec.landing);
        await t.record({ landing }, { type: "landability", cycle: t.rec.cycle, ...landingJournal(landing) });
        const said = l.clean
          ? `lands cleanly on ${l.baseBranch} (${l.baseHead.slice(0, 12)})`
          : `conflicts with ${l.baseBranch} (${l.baseHead.slice(0, 12)}) in: ${l.conflicts.join(", ")}`;
        return { taskId, already: false, dryRun: true, landing, said };
      }
      if (p.check && !t.rec.checks?.length)
        throw new DshError(
          "BAD_STATE",
          `task ${taskId} has no checks for --check; spawn with --check CMD, or land without --check`,
        );
      let checks: CheckReceipt[] | undefined;
      let intended = false;
      // A failure after the intent record: git says whether the landing happened (it is then recorded and answered
      // as done) or not (the checkout's landing paths are as they were; the intent goes).
      const afterIntent = async (e: unknown): Promise<LandOutcome> => {
        if (!intended) throw e;
        let landed: LandOutcome | undefined;
        await settleIntent(
          store,
          taskId,
          (landedAs) => t.rec.landing?.landedAs === landedAs,
          async (landing) => {
            landed = { taskId, already: false, landing, said: `landed as ${landing.landedAs?.slice(0, 12)}` };
          },
          timeoutMs,
        ).catch(() => undefined); // undecided: the intent stays for the next try or the next daemon
        if (landed) return landed;
        throw e;
      };
      const out = await landTask({
        taskId,
        worktree: wt,
        author,
        message: messageOf(t.result),
        ...setup,
        ...bounds,
        ...(p.strategy ? { strategy: p.strategy } : {}),
        ...(t.rec.landing ? { previous: t.rec.landing } : {}),
        onIntent: async (i) => {
          await writeIntent(store, i);
          intended = true;
        },
        progress: (step) => crashPoint(`land_${step}`),
        ...(p.check
          ? {
              check: async (dir: string) => {
                checks = await runChecksOf(store, t.rec, dir, "merged", {
                  ...(signal ? { signal } : {}),
                  // Beside the scratch tree: a later daemon ends a check a killed one left running (land-scratch.ts).
                  onSpawn: (pgid) =>
                    void appendFile(join(dirname(dir), CHECK_PGIDS), `${pgid}\n`).then(() => crashPoint("land_check")),
                });
                if (signal?.aborted)
                  throw new DshError(
                    "LAND_CANCELLED",
                    `the landing of task ${taskId} was abandoned during its checks (its requester went away); nothing was landed`,
                  );
                const bad = checks.find((c) => c.exitCode !== 0 || c.cutOff !== undefined);
                if (bad) {
                  const checkRun = { cycle: t.rec.cycle, at: now(), receipts: checks };
                  await t.record(
                    { checkRun },
                    {
                      type: "checks",
                      cycle: t.rec.cycle,
                      on: "merged",
                      verified: false,
                      receipts: checks.map(journaled),
                    },
                  );
                  const how = bad.cutOff ? `cut off (${bad.cutOff})` : `exit ${bad.exitCode ?? bad.signal}`;
                  throw new DshError(
                    "CHECK_FAILED",
                    `check \`${bad.command}\` failed on the merged tree of task ${taskId} and ${wt.baseBranch ?? "its base"} (${how}); nothing was landed; its output: ${bad.logPath}`,
                    { receipt: bad },
                  );
                }
              },
            }
          : {}),
      })
        .catch(afterIntent)
        .catch(recordRefusal);
      if (!out.already) {
        const checkRun = checks ? { checkRun: { cycle: t.rec.cycle, at: now(), receipts: checks } } : {};
        await t.record({ landing: out.landing, ...checkRun }, landedEvent(t.rec, out.landing, out.committed));
        await clearIntent(store, taskId);
      }
      return { ...out, ...(checks ? { checks } : {}) };
    });
  });
}

/** The commit message of the child's work: its summary, then where it came from. */
function messageOf(result: AgentResult): string {
  const subject = (result.summary || result.brief || `work of task ${result.taskId}`).split("\n")[0]!.slice(0, 200);
  return `${subject}\n\ndsh-herdr task ${result.taskId} (${result.agent.name}, ${result.agent.model})`;
}

export async function landTasks(sup: Supervisor, p: LandParams, signal?: AbortSignal) {
  const results: LandReply[] = [];
  for (const taskId of p.taskIds) {
    try {
      results.push(await landOne(sup, taskId, p, signal));
    } catch (e) {
      if (results.length === 0 || !(e instanceof DshError)) throw e;
      // Tasks before it stay landed: say so in the refusal.
      const done = results.map((r) => r.taskId).join(", ");
      throw new DshError(e.code, `${e.message} (landed before it: ${done}; the rest were not tried)`, e.details);
    }
  }
  return { results };
}

/** An owner connection's task.land: allowed by config owner.mayLand, for tasks of that owner only. */
async function mayOwnerLand(sup: Supervisor, taskIds: string[], ownerId: string): Promise<void> {
  if (sup.deps.config().owner?.mayLand !== true)
    throw new DshError(
      "FORBIDDEN",
      "an owner may land its subagents' work only when the person allows it: `dsh-herdr config set owner.mayLand true` (then /reload the owner pi); until then land with `dsh-herdr land ID`",
    );
  for (const id of taskIds) {
    const owner = sup.tasks.get(id)?.rec.owner ?? (await sup.deps.store.readTask<TaskRecord>(id)).owner;
    if (owner !== ownerId)
      throw new DshError(
        "NOT_OWNER",
        `task ${id} belongs to owner ${owner}; an owner lands only its own subagents' work`,
      );
  }
}

export function createLandHandlers(ctx: MethodContext): Pick<HandlerTable, "task.check" | "task.land"> {
  const { sup } = ctx;
  return {
    "task.check": (p, conn) => {
      const live = sup.tasks.get(p.taskId);
      if (live && conn.kind === "owner" && live.rec.owner !== conn.ownerId)
        throw new DshError(
          "NOT_OWNER",
          `task ${p.taskId} belongs to owner ${live.rec.owner}; only its owner (or the CLI) may check it`,
        );
      return checkTask(sup, p.taskId);
    },
    "task.land": async (p, conn) => {
      // The person lands; an owner (crew_land) only its own tasks, and only when the person allowed it in config.
      if (conn.kind === "owner") await mayOwnerLand(sup, p.taskIds, conn.ownerId!);
      else if (conn.kind !== "cli")
        throw new DshError("FORBIDDEN", "task.land is for the CLI (a person): `dsh-herdr land ID`");
      // Owned by its requester: the connection closing (Ctrl+C, a killed CLI, the daemon stopping) abandons the
      // landing, with its git processes and checks; one that was queued never runs.
      const requester = new AbortController();
      const gone = () => requester.abort(new Error("its requester's connection closed"));
      if (conn.closed) gone();
      else conn.onClose(gone);
      const run = landTasks(sup, p, requester.signal);
      inFlight.set(requester, run);
      try {
        return await run;
      } finally {
        inFlight.delete(requester);
      }
    },
  };
}
