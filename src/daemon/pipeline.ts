// The spawn pipeline of one task: wait for a slot, record the baseline (and the isolated worktree), write
// prompt.md, launch pi in the runtime with the child extension, and hold the readiness barrier (hello + prompt
// accepted; no sign of life → kill, one retry, then AGENT_STALLED).
import { DshError } from "../core/errors.js";
import { classifyPiStartFailure } from "../core/pi-failure.js";
import { captureBaseline } from "../git/baseline.js";
import { createWorktree, removeUnusedWorktree, type CreatedWorktree } from "../git/worktree.js";
import { buildPiCommand } from "../pi/launch.js";
import { unsynced } from "../store/task-store.js";
import { crashPoint } from "./crash-hook.js";
import { buildPrompt } from "./prompt.js";
import { prepareWorkdir } from "./workdir-setup.js";
import type { TaskRecord } from "./record.js";
import type { Live } from "./live.js";
import type { Supervisor } from "./supervisor-types.js";

/** The phase allows no more launching: closed, aborted or otherwise settled meanwhile. */
const launchMoot = (live: Live): boolean => live.state.phase.name === "closed" || live.state.phase.name === "settled";

/**
 * A task admitted at once into a repo found without git: `git worktree add` starts as soon as the task id exists,
 * so the one git process runs while the record, the first result and the spawn reply are written (prepare() awaits
 * it). A daemon that stops before journaling it leaves it to recovery, which drops an unjournaled worktree.
 */
export function startWorktree(
  sup: Supervisor,
  cwd: string,
  repoRoot: string,
  taskId: string,
): Promise<CreatedWorktree> {
  const wt = createWorktree({ repoCwd: cwd, home: sup.deps.home, taskId, known: { repoRoot } });
  wt.catch(() => undefined); // prepare() reports a failure; a spawn that failed before it drops the worktree
  return wt;
}

/** The spawn failed after its worktree was started: remove it and its branch (nothing ran in it). */
export function dropStartedWorktree(sup: Supervisor, repoRoot: string, wt: Promise<CreatedWorktree>): void {
  void wt
    .then((w) => removeUnusedWorktree(repoRoot, w.path, w.branch))
    .catch((e: unknown) => sup.deps.log.warn({ repo: repoRoot, err: String(e) }, "unused worktree not removed"));
}

export async function runPipeline(sup: Supervisor, live: Live, slot: Promise<{ queuedMs: number }>): Promise<void> {
  const { rec } = live;
  try {
    const { queuedMs } = await slot;
    if (sup.stopped) return; // admitted as the daemon stopped: the next daemon's recovery starts it
    rec.timing.queuedMs = queuedMs;
    if (queuedMs > 0) delete live.knownRepo;
    void sup.dispatch(live, { type: "admitted" });
    // Until the launch nothing runs: these records are written but not fsynced (a crash of the daemon keeps them;
    // a power cut can only lose a task that never started). The launch itself is journaled durably.
    await sup.journal(live, unsynced({ type: "admitted", queuedMs }));
    await prepare(sup, live);
    await launchWithRetry(sup, live);
  } catch (e) {
    await startFailed(sup, live, e);
  }
}

async function startFailed(sup: Supervisor, live: Live, e: unknown): Promise<void> {
  if (launchMoot(live)) return; // aborted or closed meanwhile: already harvested
  if (sup.stopped) return; // the next daemon's recovery starts or re-attaches it
  const err = e instanceof DshError ? e : new DshError("LAUNCH_FAILED", String((e as Error)?.message ?? e));
  live.rec.error = { code: err.code, message: err.message };
  // Logged once as "task failed" (daemon-log.ts logTaskFailures) when the failed status is out.
  sup.stopWatching(live);
  await sup.dispatch(live, { type: "launch_failed", code: err.code, message: err.message });
}

/** A parked task's follow-up: pi starts again on the task's session file, so the conversation goes on. */
export async function relaunch(sup: Supervisor, live: Live): Promise<void> {
  try {
    sup.startWatching(live);
    await launchWithRetry(sup, live);
  } catch (e) {
    await startFailed(sup, live, e);
  }
}

/** The spawn warning of a task that shares a repository with uncommitted changes: the child edits beside them. */
function sharedDirty(cwd: string, dirty: string[]): string {
  const paths = dirty.slice(0, 3).map((l) => (/^.. /.test(l) ? l.slice(3) : l)); // porcelain "XY path" lines
  const some = paths.join(", ") + (dirty.length > 3 ? ", ..." : "");
  return `not isolated: ${cwd} has ${dirty.length} uncommitted change(s) (${some}) and the child edits that working tree beside them; commit or stash first, or spawn isolated (--isolated, or isolated: true in the subagent definition)`;
}

/** Dirty paths journaled with the baseline; past this many only the count is (the diff then warns after a crash). */
const DIRTY_JOURNAL_MAX = 2000;

async function prepare(sup: Supervisor, live: Live): Promise<void> {
  const { rec } = live;
  const { store, home } = sup.deps;
  const known = live.knownRepo;
  delete live.knownRepo;
  let repoRoot: string | undefined;
  if (rec.isolated && known && known.head === undefined) {
    repoRoot = known.root;
    // The request found the repo without git: the worktree is the one git call, and its branch gives the baseline.
    const { head, ...wt } = await (known.worktree ??
      createWorktree({ repoCwd: rec.cwd, home, taskId: rec.taskId, known: { repoRoot: known.root } }));
    rec.baseline = { isRepo: true, head, dirtyAtStart: [], warnings: [] };
    rec.worktree = wt;
    rec.workdir = wt.path;
    await sup.journal(live, unsynced({ type: "worktree", path: wt.path, branch: wt.branch }));
  } else {
    const base = await captureBaseline(rec.cwd, {
      dirty: !rec.isolated,
      ...(known?.head !== undefined ? { known: { root: known.root, head: known.head } } : {}),
    });
    repoRoot = base.repoRoot ?? undefined;
    rec.baseline = {
      isRepo: base.isRepo,
      head: base.baselineHead,
      dirtyAtStart: base.dirtyAtStart,
      ...(base.dirtyHashes ? { dirtyHashes: base.dirtyHashes } : {}),
      warnings: base.warnings,
    };
    if (base.warnings.length) rec.warnings = [...(rec.warnings ?? []), ...base.warnings];
    if (!rec.isolated && base.dirtyAtStart.length > 0)
      rec.warnings = [...(rec.warnings ?? []), sharedDirty(rec.cwd, base.dirtyAtStart)];
    if (rec.isolated) {
      const { head: _head, ...wt } = await createWorktree({
        repoCwd: rec.cwd,
        home,
        taskId: rec.taskId,
        ...(base.repoRoot ? { known: { repoRoot: base.repoRoot, head: base.baselineHead } } : {}),
      });
      rec.worktree = wt;
      rec.workdir = wt.path;
      // The fresh worktree is the diff's subject: same HEAD, nothing dirty yet.
      rec.baseline = { ...rec.baseline, dirtyAtStart: [] };
      await sup.journal(live, unsynced({ type: "worktree", path: wt.path, branch: wt.branch }));
    }
  }
  // The repository's settings (checks, include, setup); an isolated worktree made ready: the baseline is taken after.
  await prepareWorkdir(sup, live, repoRoot);
  // The dirty list itself (up to a bound), so a recovery that finds task.json older than this record loses nothing.
  const dirty = rec.baseline.dirtyAtStart;
  await sup.journal(
    live,
    unsynced({
      type: "baseline",
      head: rec.baseline.head,
      dirty: dirty.length,
      ...(dirty.length <= DIRTY_JOURNAL_MAX ? { dirtyAtStart: dirty } : {}),
    }),
  );
  const text = buildPrompt({
    taskId: rec.taskId,
    role: rec.role,
    resultPath: rec.resultPath,
    cwd: rec.workdir,
    ...(rec.brief !== undefined ? { brief: rec.brief } : {}),
    ...(rec.prompt !== undefined ? { prompt: rec.prompt } : {}),
    ...(rec.task !== undefined ? { task: rec.task } : {}),
  });
  // Written while the runtime launches (the child gets its prompt over the socket); done before `launched` is
  // journaled, since recovery of a launched task reads it.
  const written = store.writePrompt(rec.taskId, text, { sync: false });
  written.catch(() => undefined);
  live.promptWrite = written;
  live.prompt = { cycle: 1, text };
  sup.startWatching(live);
}

function unwatchRuntime(live: Live): void {
  live.unwatch?.();
  delete live.unwatch;
}

async function launchWithRetry(sup: Supervisor, live: Live): Promise<void> {
  const { rec } = live;
  const cfg = sup.deps.config();
  const runtime = sup.deps.runtimeFor(rec.runtime);
  let lastErr: Error | undefined;
  for (let attempt = 1; attempt <= 2; attempt++) {
    if (launchMoot(live) || sup.stopped) return;
    unwatchRuntime(live); // a relaunch (a parked child's follow-up): the old child is ended, its watch is moot
    const argv = buildPiCommand({
      mode: rec.runtime === "headless" ? "rpc" : "interactive",
      model: rec.model,
      thinking: rec.thinking,
      sessionPath: rec.sessionPath,
      extensionPaths: [sup.deps.childExtensionPath],
      cwd: rec.workdir,
      env: { ...process.env, ...sup.deps.childEnv },
    }).argv;
    const env = childEnv(sup, rec);
    // The env's names only: its values may be API keys (docs/reliability.md, secrets).
    sup.deps.log.debug(
      { taskId: rec.taskId, attempt, runtime: rec.runtime, argv, cwd: rec.workdir, envKeys: Object.keys(env) },
      "launching child",
    );
    const handle = await runtime.launch({
      taskId: rec.taskId,
      name: rec.name,
      argv,
      cwd: rec.workdir,
      taskDir: sup.deps.store.taskPaths(rec.taskId).dir,
      env,
      ...(rec.worktree ? { repoName: rec.worktree.repo.split("/").pop()! } : { repoName: rec.cwd.split("/").pop()! }),
      ...(rec.ownerPaneId ? { ownerPaneId: rec.ownerPaneId } : {}),
      ...(rec.machine ? { machine: rec.machine } : {}),
    });
    crashPoint("launch_returned"); // crash tests only: the child runs, its handle is not journaled yet
    const prompt = live.promptWrite;
    delete live.promptWrite;
    if (prompt)
      await prompt.catch(async (e: unknown) => {
        await runtime.close(handle).catch(() => undefined);
        throw e;
      });
    rec.handle = handle;
    delete live.runtimeState;
    delete live.childEnded;
    await sup.journal(live, { type: "launched", attempt, runtime: rec.runtime, handle });
    if (sup.stopped) return; // stopped mid-launch: the journal has the handle, the next daemon re-attaches
    if (
      live.state.phase.name === "closed" ||
      (live.state.phase.name === "settled" && live.state.phase.reason.kind === "owner_abort")
    ) {
      // Closed or aborted while the launch call ran: that close could not reach this child, so end it here.
      await runtime.close(handle).catch(() => undefined);
      return;
    }
    sup.watchRuntime(live, runtime);
    await sup.dispatch(live, { type: "launch_returned" });
    const ph = live.state.phase.name;
    if (ph === "running" || ph === "settled") {
      // A fast child said hello and took its prompt (perhaps even finished its cycle) while the launch was being
      // journaled, before the barrier below exists: it is ready. Waiting would mark it stalled and launch a second
      // child; a settled cycle gets no timeout (the machine arms one only for a running cycle).
      await sup.refresh(live);
      return;
    }
    try {
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(
          () =>
            sup.stopped ||
            reject(
              new DshError(
                "AGENT_STALLED",
                `no hello and prompt acceptance within readinessTimeoutMs (${cfg.readinessTimeoutMs} ms)`,
              ),
            ),
          cfg.readinessTimeoutMs,
        );
        // A stopped daemon neither fails nor retries the launch: the journal says `launched`, and the next
        // daemon's recovery re-attaches the child. So abandon leaves this promise pending, with no timer.
        live.readiness = {
          resolve: () => (clearTimeout(t), resolve()),
          reject: (e) => (clearTimeout(t), reject(e)),
          abandon: () => clearTimeout(t),
        };
        if (live.child) sup.sendPrompt(live);
      });
      await sup.refresh(live);
      return;
    } catch (e) {
      lastErr = e as Error;
      delete live.readiness;
      if (launchMoot(live)) return; // settled meanwhile (a prompt pi refused, an abort): not a stall
      unwatchRuntime(live);
      await sup.journal(live, { type: "stalled", attempt, error: lastErr.message });
      await runtime.close(handle).catch(() => undefined);
      live.child?.push("child.abort", { reason: "stalled" });
    }
  }
  const tail = rec.handle ? await runtime.readOutput(rec.handle, { lines: 5 }).catch(() => "") : "";
  // pi said why it could not start (e.g. `Model "x" not found`): that, in pi's words, not a stall.
  const said = classifyPiStartFailure(tail);
  if (said) throw new DshError(said.code, `pi could not start the child: ${said.line}`);
  throw new DshError(
    "AGENT_STALLED",
    `the child showed no sign of life twice (${lastErr?.message ?? "stalled"}); check the model (${rec.model ?? "pi's default"}), pi's install and ${sup.deps.store.taskPaths(rec.taskId).dir}${tail ? `; last output: ${tail.slice(-300)}` : ""}`,
  );
}

function childEnv(sup: Supervisor, rec: TaskRecord): Record<string, string> {
  return {
    ...sup.deps.childEnv,
    DSH_HERDR_SOCKET: sup.deps.socketPath,
    DSH_HERDR_TASK_ID: rec.taskId,
    DSH_HERDR_TASK_TOKEN: rec.token,
    DSH_HERDR_RESULT_PATH: rec.resultPath,
    // An idle child that loses its daemon for this long ends itself (the daemon parks idle children after it too).
    DSH_HERDR_IDLE_MS: String(sup.deps.config().idleChildMs),
  };
}
