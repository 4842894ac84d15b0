// Start-up reconciliation: every task that is not closed is taken back under supervision before the socket is
// served. task.json is rewritten only when a status is harvested, so the journal (events.jsonl, fsynced before
// each effect's next step) is replayed to learn what was in flight at the crash: a launch, a prompt, a follow-up,
// a settle, an abort, a close. Effects the journal shows are never repeated (a sent prompt is not sent again);
// effects it does not show are done now (a prompt never sent is sent; a task never launched starts again). A launch
// the daemon died in before journaling it is asked of the runtime (find): a child it left running is adopted.
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { planRecovery } from "../core/recovery-plan.js";
import type { TaskSummary } from "../store/task-index.js";
import { readFile } from "node:fs/promises";
import { DshError } from "../core/errors.js";
import { isSettledStatus } from "../core/derive.js";
import type { Runtime, RuntimeHandle } from "../runtime/types.js";
import type { TaskEvent } from "../store/task-store.js";
import { branchFor, worktreePathFor } from "../git/worktree.js";
import { gitMaybe } from "../git/run.js";
import type { Runtimes } from "./runtimes.js";
import { followUpPath, type TaskRecord } from "./record.js";
import type { Live, Supervisor } from "./supervisor.js";
import type { Relay } from "../remote/relay.js";

/** What the journal says happened to a task, beyond its last task.json. */
export interface Replay {
  /** The last launched handle (task.json may predate it). */
  handle?: RuntimeHandle;
  /** Cycle → when its prompt went out (prompt_sent: journaled just before the push or the typing). */
  prompted: Map<number, number>;
  /** Cycles whose prompt the child confirmed (prompt_accepted), or that were typed into the runtime. */
  accepted: Set<number>;
  /** Highest cycle the journal knows of (respond / prompt_sent). */
  cycle: number;
  /** Cycles whose settle was journaled (harvest may not have run). */
  settling: Set<number>;
  /** Cycles whose settled status was journaled (harvested). */
  settled: Set<number>;
  interrupted?: { code?: string };
  closed?: { closePane: boolean };
  worktree?: string;
  worktreeBranch?: string;
  /** The baseline record; its dirty list when it was short enough to journal, else only the count. */
  baseline?: { head: string | null; dirty: number; dirtyAtStart?: string[] };
  /** Launch attempts that stalled (the next launch is attempt stalled + 1). */
  stalled: number;
  /** The last launch stalled and no launch was journaled after it: any handle task.json holds is that dead one. */
  handleStalled?: boolean;
}

export function replayJournal(events: TaskEvent[]): Replay {
  const r: Replay = {
    prompted: new Map(),
    accepted: new Set(),
    cycle: 1,
    settling: new Set(),
    settled: new Set(),
    stalled: 0,
  };
  for (const e of events) {
    const cycle = typeof e.cycle === "number" ? e.cycle : undefined;
    if (e.type === "launched" && e.handle) {
      r.handle = e.handle as RuntimeHandle;
      delete r.handleStalled;
    } else if (e.type === "worktree" && typeof e.path === "string") {
      r.worktree = e.path;
      if (typeof e.branch === "string") r.worktreeBranch = e.branch;
    } else if (e.type === "baseline" && (typeof e.head === "string" || e.head === null)) {
      const list =
        Array.isArray(e.dirtyAtStart) && e.dirtyAtStart.every((x) => typeof x === "string")
          ? (e.dirtyAtStart as string[])
          : undefined;
      r.baseline = {
        head: e.head,
        dirty: typeof e.dirty === "number" ? e.dirty : 0,
        ...(list ? { dirtyAtStart: list } : {}),
      };
    } else if (e.type === "stalled") {
      r.stalled++;
      delete r.handle; // that launch's child was closed; a later launch may not have been journaled
      r.handleStalled = true;
    } else if (e.type === "prompt_sent" && cycle !== undefined) {
      if (!r.prompted.has(cycle)) r.prompted.set(cycle, typeof e.ts === "number" ? e.ts : Date.now());
      r.cycle = Math.max(r.cycle, cycle);
      // Typed into a runtime: nothing would recognise it a second time, so it counts as taken.
      if (e.via === "runtime") r.accepted.add(cycle);
    } else if (e.type === "prompt_accepted" && cycle !== undefined) r.accepted.add(cycle);
    else if (e.type === "respond" && cycle !== undefined) {
      // Journaled before the follow-up goes out: a respond without a prompt_sent never reached the child.
      r.cycle = Math.max(r.cycle, cycle);
    } else if (e.type === "settle" && cycle !== undefined) r.settling.add(cycle);
    else if (e.type === "status" && e.settled === true && cycle !== undefined) r.settled.add(cycle);
    else if (e.type === "interrupted") r.interrupted = typeof e.code === "string" ? { code: e.code } : {};
    else if (e.type === "closed") r.closed = { closePane: e.closePane === true };
  }
  return r;
}

/** Open tasks recovered at once: each waits mostly on its own reads and journal records, not on the CPU. */
const RECOVER_CONCURRENCY = 16;

export async function recoverTasks(sup: Supervisor, runtimes: Runtimes, relay?: Relay): Promise<void> {
  const rows = sup.deps.store.listTasks({}).filter((row) => row.status !== "closed");
  // A few at a time instead of one by one: 1,000 open tasks took 12 s to recover in sequence (bench/live-tasks).
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(RECOVER_CONCURRENCY, rows.length) }, async () => {
      while (next < rows.length) await recoverRow(sup, runtimes, rows[next++]!, relay);
    }),
  );
  // Before serving: every machine with open remote tasks is reattached (bounded wait per machine).
  await relay?.reattach();
}

async function recoverRow(
  sup: Supervisor,
  runtimes: Runtimes,
  row: ReturnType<Supervisor["deps"]["store"]["listTasks"]>[number],
  relay?: Relay,
): Promise<void> {
  const { store, log } = sup.deps;
  try {
    // A task relayed to another machine: its record and settled cycles only; the machine's daemon recovers the rest.
    const rec = relay ? await store.readTask<TaskRecord>(row.taskId).catch(() => undefined) : undefined;
    if (rec?.remote && rec.lifecycle === undefined) {
      await relay!.recover(rec, replayJournal(await store.readEvents(row.taskId)).settled);
      return;
    }
    await recoverOne(sup, runtimes, row.taskId);
  } catch (e) {
    const lost = sup.tasks.get(row.taskId) === undefined && !(await validRecord(sup, row.taskId));
    log.warn(
      { taskId: row.taskId, err: String(e), lost },
      lost ? "task record lost; failing the task" : "task not recovered",
    );
    if (lost)
      await recoverLost(sup, runtimes, row, e).catch((err: unknown) =>
        log.error({ taskId: row.taskId, err: String(err) }, "lost task not settled"),
      );
  }
}

async function recoverOne(sup: Supervisor, runtimes: Runtimes, taskId: string): Promise<void> {
  const { store } = sup.deps;
  const rec = await store.readTask<TaskRecord>(taskId);
  if (rec.lifecycle !== undefined || rec.token === undefined) return;
  const j = replayJournal(await store.readEvents(taskId));
  if (j.handleStalled) delete rec.handle; // a retry's child may run unjournaled: find it below, never reuse the dead one
  rec.handle ??= j.handle;
  const runtime = runtimes.get(rec.runtime);
  const live = sup.register(rec);
  await restoreResult(sup, live);

  if (j.closed) {
    // Closed by its owner; the crash came before the record said so. Finish the close, do not supervise.
    await sup.close(live, j.closed.closePane);
    sup.tasks.delete(taskId);
    return;
  }
  // Adopted before an abort is finished too, so the abort ends that child instead of leaving it running.
  const adopted = rec.handle === undefined ? await adopt(sup, runtime, rec, j.worktree) : false;
  if (adopted)
    await sup.journal(live, {
      type: "launched",
      attempt: j.stalled + 1,
      runtime: rec.runtime,
      handle: rec.handle,
      adopted: true,
    });
  if (rec.handle !== undefined) await restorePrelaunch(rec, j);
  // A follow-up journaled after the last task.json: its cycle is the current one.
  if (j.cycle > rec.cycle && rec.handle !== undefined) {
    rec.cycle = j.cycle;
    delete rec.timing.settledAt;
    rec.status = "working";
  }
  const promptedAt = j.prompted.get(rec.cycle) ?? (rec.cycle === 1 ? rec.timing.promptedAt : undefined);
  if (promptedAt !== undefined && rec.timing.promptedAt === undefined) rec.timing.promptedAt = promptedAt;
  if (rec.handle !== undefined && !j.interrupted) {
    await sup.resume(live);
    live.promptSentAt = promptedAt ?? rec.timing.promptedAt ?? 0;
  }
  const alive = rec.handle !== undefined ? await runtime.isAlive(rec.handle).catch(() => false) : false;
  const f = live.files?.facts();
  const plan = planRecovery({
    cycle: rec.cycle,
    harvested: j.settled.has(rec.cycle) && isSettledStatus(rec.status),
    ...(j.interrupted ? { interrupted: j.interrupted } : {}),
    launched: rec.handle !== undefined,
    alive,
    prompted: promptedAt !== undefined,
    accepted: j.accepted.has(rec.cycle),
    settling: j.settling.has(rec.cycle),
    endedMeanwhile:
      promptedAt !== undefined &&
      f?.cycleSettled === true &&
      !f.retryMayFollow &&
      (f.lastTimestampMs ?? 0) >= promptedAt - 1000,
  });
  await sup.journal(live, {
    type: "recovered",
    plan: plan.kind,
    alive,
    status: rec.status,
    cycle: rec.cycle,
    ...(adopted ? { action: "adopt the child launched before the crash" } : {}),
  });

  switch (plan.kind) {
    case "finish_close":
      return; // handled above (the close needs no evidence)
    case "finish_abort":
      await sup.resume(live);
      live.state = { ...live.state, phase: { name: "running", cycle: rec.cycle } };
      if (plan.timeout) await sup.dispatch(live, { type: "timeout_fired", ms: rec.timeoutMs });
      else await sup.dispatch(live, { type: "abort" });
      await live.chain;
      return;
    case "start_again":
      // Never launched: no child ever saw this task. A worktree created before the crash held no work yet; it is
      // removed so the pipeline can create it afresh.
      await dropUnusedWorktree(sup, rec, j.worktree);
      rec.workdir = rec.cwd;
      delete rec.worktree;
      rec.status = "starting";
      await sup.refresh(live); // listed and waitable before the socket serves
      void sup.run(live, sup.admission.acquire(taskId));
      return;
    case "keep_settled":
      live.state = { ...live.state, phase: plan.phase };
      if (alive) sup.watchRuntime(live, runtime);
      else live.childEnded = true;
      if (!live.result) await sup.refresh(live);
      return;
    case "failed_before_prompt":
      rec.error = {
        code: "AGENT_STALLED",
        message: "the child ended before it took its prompt while the daemon was down; spawn the task again",
      };
      live.state = { ...live.state, phase: { name: "awaiting_prompt", cycle: rec.cycle } };
      live.childEnded = true;
      await sup.dispatch(live, { type: "launch_failed", code: "AGENT_STALLED", message: rec.error.message });
      await live.chain;
      return;
    case "push_prompt": {
      const text =
        rec.cycle > 1
          ? await readFile(followUpPath(store.taskPaths(taskId).dir, rec.cycle), "utf8").catch(() => "")
          : ((await store.readPrompt(taskId)) ?? "");
      live.prompt = { cycle: rec.cycle, text };
      live.state = { ...live.state, phase: plan.phase };
      holdSlot(sup, taskId);
      sup.watchRuntime(live, runtime);
      sup.armTimeout(live);
      await sup.refresh(live);
      return;
    }
    case "settle":
      live.state = { ...live.state, phase: plan.phase };
      holdSlot(sup, taskId);
      if (alive) sup.watchRuntime(live, runtime);
      await sup.dispatch(live, { type: "settle_recovered", reason: plan.reason });
      await live.chain;
      return;
    case "gone":
      live.state = { ...live.state, phase: plan.phase };
      holdSlot(sup, taskId);
      await sup.markGone(live);
      await live.chain;
      return;
    case "resume_running":
      live.state = { ...live.state, phase: plan.phase };
      holdSlot(sup, taskId);
      sup.armTimeout(live);
      sup.watchRuntime(live, runtime);
      await sup.refresh(live);
      return;
  }
}

/**
 * task.json is gone or unreadable (deleted, corrupted) while the daemon was down. The child cannot prove itself
 * any more (its token lived there), so the task cannot go on: its child (from the journal, or found in the
 * runtime) is ended and the task settles failed with RECORD_LOST, rebuilt from result.json and the index, so
 * its owner hears it and `wait` ends.
 */
async function recoverLost(sup: Supervisor, runtimes: Runtimes, row: TaskSummary, cause: unknown): Promise<void> {
  const { store } = sup.deps;
  const taskId = row.taskId;
  const paths = store.taskPaths(taskId);
  const stored = await store.readResult(taskId).catch(() => undefined);
  const j = replayJournal(await store.readEvents(taskId).catch(() => []));
  const agent = stored?.agent ?? row.row?.agent;
  const createdAt = stored?.timing.createdAt ?? row.createdAt;
  const runtime = (agent?.runtime ?? "headless") as TaskRecord["runtime"];
  const cwd = stored?.cwd ?? row.cwd ?? paths.dir;
  const rec: TaskRecord = {
    taskId,
    owner: row.owner || stored?.owner || "cli",
    status: "running",
    createdAt,
    cwd,
    kind: "pi",
    role: stored?.role ?? row.row?.role ?? "worker",
    model: agent?.model ?? "unknown",
    thinking: agent?.thinking ?? "off",
    isolated: stored?.worktree !== undefined,
    timeoutMs: sup.deps.config().defaultTimeoutMs,
    runtime,
    name: agent?.name ?? taskId,
    token: randomBytes(24).toString("hex"),
    workdir: stored?.worktree?.path ?? cwd,
    sessionPath: join(paths.dir, "session.jsonl"),
    resultPath: paths.resultMd,
    cycle: Math.max(j.cycle, 1),
    timing: { ...(stored?.timing ?? {}), createdAt },
    ...((stored?.brief ?? row.brief) ? { brief: stored?.brief ?? row.brief } : {}),
    ...(stored?.worktree ? { worktree: stored.worktree } : {}),
    ...(j.handle ? { handle: j.handle } : {}),
  };
  delete rec.timing.settledAt;
  const live = sup.register(rec);
  if (stored?.diff) live.diff = stored.diff;
  live.state = { ...live.state, phase: { name: "running", cycle: rec.cycle } };
  const rt = runtimes.get(runtime);
  rec.handle ??= await adopt(sup, rt, rec, undefined).then((ok) => (ok ? rec.handle : undefined));
  await sup.resume(live);
  const why = cause instanceof Error ? cause.message : String(cause);
  await sup.journal(live, { type: "recovered", plan: "record_lost", error: why });
  await sup.dispatch(live, {
    type: "record_lost",
    message: `task.json of task ${taskId} was lost or unreadable while the daemon was down (${why.slice(0, 200)}); its child was ended. Inspect ${paths.dir}, then spawn the task again`,
  });
  await live.chain;
}

/**
 * The daemon died after runtime.launch and before journaling its handle: the runtime may still hold that child.
 * It is adopted (its worktree kept: the child works in it), never started a second time.
 */
async function adopt(
  sup: Supervisor,
  runtime: Runtime,
  rec: TaskRecord,
  worktree: string | undefined,
): Promise<boolean> {
  if (!runtime.find) return false;
  // The child runs in the worktree journaled before the launch, even when task.json predates that record.
  const where = {
    taskId: rec.taskId,
    taskDir: sup.deps.store.taskPaths(rec.taskId).dir,
    name: rec.name,
    cwd: worktree ?? rec.workdir,
  };
  const found = await runtime.find(where).catch((e: unknown) => {
    sup.deps.log.warn(
      { taskId: rec.taskId, err: String(e) },
      "could not ask the runtime for a child launched before the crash",
    );
    return undefined;
  });
  if (!found) return false;
  rec.handle = found;
  return true;
}

/**
 * task.json is rewritten only at a harvest, so for a child launched just before the crash it may predate the
 * worktree and baseline the pipeline journaled before the launch; without them the harvest would diff nothing.
 */
async function restorePrelaunch(rec: TaskRecord, j: Replay): Promise<void> {
  const needWorktree = !rec.worktree && j.worktree !== undefined && j.worktreeBranch !== undefined;
  const needBaseline = !rec.baseline && j.baseline !== undefined;
  if (!needWorktree && !needBaseline) return; // the common case: no git process per recovered task
  const repo = (await gitMaybe(rec.cwd, ["rev-parse", "--show-toplevel"]))?.trim();
  if (needWorktree && repo && j.worktree && j.worktreeBranch) {
    rec.worktree = { path: j.worktree, branch: j.worktreeBranch, repo, base: "HEAD" };
    rec.workdir = j.worktree;
  }
  if (needBaseline && j.baseline) {
    // An isolated worktree starts clean; a shared cwd's dirty list is journaled unless it was very long.
    const known = j.baseline.dirtyAtStart;
    const warnings =
      j.baseline.dirty === 0 || !repo || known
        ? []
        : [
            `the ${j.baseline.dirty} files dirty before the task are not known after the daemon's crash: the diff may include them`,
          ];
    rec.baseline = { isRepo: repo !== undefined, head: j.baseline.head, dirtyAtStart: known ?? [], warnings };
    if (warnings.length) rec.warnings = [...(rec.warnings ?? []), ...warnings];
  }
}

/** A running or pending cycle holds a slot again (over the cap if the config shrank meanwhile: it already runs). */
function holdSlot(sup: Supervisor, taskId: string): void {
  try {
    void sup.admission.acquire(taskId).catch(() => undefined);
  } catch {
    /* queue full: the cycle runs anyway */
  }
}

async function dropUnusedWorktree(sup: Supervisor, rec: TaskRecord, journaled?: string): Promise<void> {
  const repo = (await gitMaybe(rec.cwd, ["rev-parse", "--show-toplevel"]))?.trim();
  if (!repo) return;
  const path = rec.worktree?.path ?? journaled ?? worktreePathFor(sup.deps.home, repo, rec.taskId);
  if (existsSync(path)) {
    const removed = await gitMaybe(repo, ["worktree", "remove", "--force", path]);
    if (removed === undefined)
      throw new DshError(
        "GIT_FAILED",
        `could not remove the unused worktree ${path}; remove it with \`git worktree remove --force ${path}\``,
      );
  }
  await gitMaybe(repo, ["worktree", "prune"]);
  await gitMaybe(repo, ["branch", "-D", branchFor(rec.taskId)]);
}

export type { Live };

/**
 * The last harvested result and diff live in memory between settles; after a restart they come back from
 * result.json, or the next live result (and the close) would drop the diff of a cycle that settled before the
 * crash, and a settled cycle would be judged again.
 */
async function restoreResult(sup: Supervisor, live: Live): Promise<void> {
  const stored = await sup.deps.store.readResult(live.rec.taskId).catch(() => undefined);
  if (stored?.diff && !live.diff) live.diff = stored.diff;
  if (stored && stored.status === live.rec.status) live.result = stored;
}

/** task.json exists and parses (the task failed to recover for another reason). */
async function validRecord(sup: Supervisor, taskId: string): Promise<boolean> {
  return sup.deps.store.readTask(taskId).then(
    (r) => typeof (r as { token?: unknown }).token === "string",
    () => false,
  );
}
