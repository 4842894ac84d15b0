// The spawn pipeline of one task: wait for a slot, record the baseline (and the isolated worktree), write
// prompt.md and launch pi in the runtime with the child extension. The readiness barrier (hello + prompt accepted in
// time; no sign of life → the child ended, one retry, then why pi could not start) is the machine's: its readiness
// timer and stall decision live in src/core/lifecycle/task-cycle.ts; this module only launches and diagnoses.
import { DshError } from "../../core/errors.js";
import { classifyPiStartFailure } from "../../core/session/pi-failure.js";
import { launchWanted, type CycleEvent } from "../../core/lifecycle/task-cycle.js";
import { buildPiCommand } from "../../pi/launch.js";
import { unsynced } from "../../store/task-store.js";
import { assertDayBudgetAtStart } from "./budget.js";
import { crashPoint } from "../ports/crash-hook.js";
import type { CreatedWorktree, GitPort } from "../ports/git-port.js";
import { buildPrompt } from "./prompt.js";
import { prepareWorkdir, type SetupPort } from "./workdir-setup.js";
import type { TaskRecord } from "./record.js";
import type { Runner, TaskPort } from "./runner-types.js";
import type { Logger } from "../server/server-types.js";

/** The phase allows no more launching: closed, aborted or otherwise settled meanwhile. */
const launchMoot = (r: Pick<Runner, "state">): boolean =>
  r.state.phase.name === "closed" || r.state.phase.name === "settled";

/**
 * A task admitted at once into a repo found without git: `git worktree add` starts as soon as the task id exists,
 * so the one git process runs while the record, the first result and the spawn reply are written (prepare() awaits
 * it). A daemon that stops before journaling it leaves it to recovery, which drops an unjournaled worktree.
 */
export function startWorktree(
  git: Pick<GitPort, "createWorktree">,
  home: string,
  cwd: string,
  repoRoot: string,
  taskId: string,
): Promise<CreatedWorktree> {
  const wt = git.createWorktree({ repoCwd: cwd, home, taskId, known: { repoRoot } });
  wt.catch(() => undefined); // prepare() reports a failure; a spawn that failed before it drops the worktree
  return wt;
}

/** The spawn failed after its worktree was started: remove it and its branch (nothing ran in it). */
export function dropStartedWorktree(
  git: Pick<GitPort, "removeUnusedWorktree">,
  log: Logger,
  repoRoot: string,
  wt: Promise<CreatedWorktree>,
): void {
  void wt
    .then((w) => git.removeUnusedWorktree(repoRoot, w.path, w.branch))
    .catch((e: unknown) => log.warn({ repo: repoRoot, err: String(e) }, "unused worktree not removed"));
}

/** What the spawn pipeline ends in for the machine: its launch returned (the readiness barrier arms), or it failed. */
export type LaunchEnded = Extract<CycleEvent, { type: "launch_returned" | "launch_failed" }>;
type LaunchFailed = Extract<CycleEvent, { type: "launch_failed" }>;

/** What admission reads and sets of its task: the queue wait, the repository found at the request, the phase. */
export type AdmitPort = TaskPort<"rec" | "state" | "knownRepo" | "stopWatching", "stopped">;

/**
 * The task got its slot: `admitted` for the machine (fed at once by the runner, not awaited, while start() writes
 * its records); nothing when the daemon stopped meanwhile (the next daemon's recovery starts it); launch_failed when
 * waiting for the slot failed.
 */
export async function admit(
  r: AdmitPort,
  slot: Promise<{ queuedMs: number }>,
): Promise<Extract<CycleEvent, { type: "admitted" }> | LaunchFailed | undefined> {
  try {
    const { queuedMs } = await slot;
    if (r.ports.stopped()) return undefined;
    r.rec.timing.queuedMs = queuedMs;
    if (queuedMs > 0) delete r.knownRepo;
    return { type: "admitted" };
  } catch (e) {
    return startFailed(r, e);
  }
}

/** What starting an admitted task reads and writes: its baseline and worktree, prompt.md, the launch and its watches. */
export type StartPort = PreparePort & LaunchPort & TaskPort<"stopWatching", "clock" | "tasks">;

/**
 * After the machine heard `admitted`: the admission's record, the day's budget again, the baseline (and worktree),
 * prompt.md and the first launch. Resolves to what the launch ended in for the machine (nothing when moot).
 */
export async function start(r: StartPort): Promise<LaunchEnded | undefined> {
  const { rec } = r;
  try {
    // Until the launch nothing runs: these records are written but not fsynced (a crash of the daemon keeps them;
    // a power cut can only lose a task that never started). The launch itself is journaled durably.
    await r.journal(unsynced({ type: "admitted", queuedMs: rec.timing.queuedMs ?? 0 }));
    // budget.perDay again at the start: a task that waited in the queue may find its owner's day spent meanwhile.
    const { config, store, clock } = r.ports;
    assertDayBudgetAtStart({ config, store, tasks: r.ports.tasks(), now: clock.now() }, rec.owner, rec.taskId);
    await prepare(r);
    return await launchOnce(r, 1);
  } catch (e) {
    return startFailed(r, e);
  }
}

/** What judging a failed start reads of its task: the phase, the daemon's stop, and the watches it ends. */
export type StartFailedPort = TaskPort<"state" | "stopWatching", "stopped">;

/** A start that threw: the launch_failed the machine hears (any error reads as LAUNCH_FAILED), or nothing when moot. */
export function startFailed(r: StartFailedPort, e: unknown): LaunchFailed | undefined {
  if (launchMoot(r)) return undefined; // aborted or closed meanwhile: already harvested
  if (r.ports.stopped()) return undefined; // the next daemon's recovery starts or re-attaches it
  const err = e instanceof DshError ? e : new DshError("LAUNCH_FAILED", String((e as Error)?.message ?? e));
  // Logged once as "task failed" (daemon-log.ts logTaskFailures) when the failed status is out.
  r.stopWatching();
  return { type: "launch_failed", code: err.code, message: err.message };
}

/**
 * The machine's `relaunch`: pi starts again on the task's session file, so the conversation goes on (a parked
 * task's follow-up), or once more after a stall (attempt 2). Resolves to what the launch ended in for the machine.
 */
export async function launch(
  r: LaunchPort & Pick<Runner, "startWatching" | "stopWatching">,
  attempt: number,
): Promise<LaunchEnded | undefined> {
  try {
    r.startWatching();
    return await launchOnce(r, attempt);
  } catch (e) {
    return startFailed(r, e);
  }
}

/** What diagnosing a start that stalled reads of its task: its runtime's last words, and the watches it ends. */
export type DiagnosePort = TaskPort<
  "rec" | "stalledOutput" | "stalledHerdrWord" | "runtimeState" | "stopWatching",
  "runtimeFor" | "stopped" | "store"
>;

/**
 * The machine's `diagnose_start`: the launch stalled twice. pi may have said why it could not start (e.g. `Model "x"
 * not found`): that, in pi's words; else AGENT_STALLED with its last output. Resolves to the launch_failed the
 * machine hears (nothing once the daemon is stopping).
 */
export async function diagnoseStart(r: DiagnosePort, why: string): Promise<LaunchFailed | undefined> {
  const { rec } = r;
  const runtime = r.ports.runtimeFor(rec.runtime);
  const tail =
    r.stalledOutput || (rec.handle ? await runtime.readOutput(rec.handle, { lines: 5 }).catch(() => "") : "");
  const herdr = rec.runtime === "herdr" ? herdrSaid(r.stalledHerdrWord ?? r.runtimeState) : "";
  if (r.ports.stopped()) return undefined;
  const said = classifyPiStartFailure(tail);
  const err = said
    ? new DshError(said.code, `pi could not start the child: ${said.line}`)
    : new DshError(
        "AGENT_STALLED",
        `the child showed no sign of life twice (${why}); ${herdr}check the model (${rec.model ?? "pi's default"}), pi's install and ${r.ports.store.taskPaths(rec.taskId).dir}${tail ? `; last output: ${tail.slice(-300)}` : ""}`,
      );
  r.stopWatching();
  return { type: "launch_failed", code: err.code, message: err.message };
}

/**
 * What Herdr said of the stalled child's pane (read before the pane closed, else the last word it pushed), for the
 * failure: its detection is known to err, so it decided nothing, but it is what the user sees in Herdr.
 */
function herdrSaid(word: string | undefined): string {
  if (word === undefined) return "";
  if (word === "missing") return "Herdr's pane or the child in it was gone; ";
  return `Herdr read the pane's agent as ${word.slice(0, 40)}; `;
}

/** The spawn warning of a task that shares a repository with uncommitted changes: the child edits beside them. */
function sharedDirty(cwd: string, dirty: string[]): string {
  const paths = dirty.slice(0, 3).map((l) => (/^.. /.test(l) ? l.slice(3) : l)); // porcelain "XY path" lines
  const some = paths.join(", ") + (dirty.length > 3 ? ", ..." : "");
  return `not isolated: ${cwd} has ${dirty.length} uncommitted change(s) (${some}) and the child edits that working tree beside them; commit or stash first, or spawn isolated (--isolated, or isolated: true in the subagent definition)`;
}

/** Dirty paths journaled with the baseline; past this many only the count is (the diff then warns after a crash). */
const DIRTY_JOURNAL_MAX = 2000;

/** What preparing the launch writes: the baseline and worktree, the repository's setup, prompt.md, the file watch. */
type PreparePort = SetupPort & TaskPort<"knownRepo" | "journal" | "promptWrite" | "prompt" | "startWatching", "git">;

async function prepare(r: PreparePort): Promise<void> {
  const { rec } = r;
  const { store, git } = r.ports;
  const { home } = r.ports.env;
  const known = r.knownRepo;
  delete r.knownRepo;
  let repoRoot: string | undefined;
  if (rec.isolated && known && known.head === undefined) {
    repoRoot = known.root;
    // The request found the repo without git: the worktree is the one git call, and its branch gives the baseline.
    const { head, ...wt } = await (known.worktree ??
      git.createWorktree({ repoCwd: rec.cwd, home, taskId: rec.taskId, known: { repoRoot: known.root } }));
    rec.baseline = { isRepo: true, head, dirtyAtStart: [], warnings: [] };
    rec.worktree = wt;
    rec.workdir = wt.path;
    await r.journal(unsynced({ type: "worktree", path: wt.path, branch: wt.branch }));
  } else {
    const base = await git.captureBaseline(rec.cwd, {
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
      const { head: _head, ...wt } = await git.createWorktree({
        repoCwd: rec.cwd,
        home,
        taskId: rec.taskId,
        ...(base.repoRoot ? { known: { repoRoot: base.repoRoot, head: base.baselineHead } } : {}),
      });
      rec.worktree = wt;
      rec.workdir = wt.path;
      // The fresh worktree is the diff's subject: same HEAD, nothing dirty yet.
      rec.baseline = { ...rec.baseline, dirtyAtStart: [] };
      await r.journal(unsynced({ type: "worktree", path: wt.path, branch: wt.branch }));
    }
  }
  // The repository's settings (checks, include, setup); an isolated worktree made ready: the baseline is taken after.
  await prepareWorkdir(r, repoRoot);
  // The dirty list itself (up to a bound), so a recovery that finds task.json older than this record loses nothing.
  const dirty = rec.baseline.dirtyAtStart;
  await r.journal(
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
  r.promptWrite = written;
  r.prompt = { cycle: 1, text };
  r.startWatching();
}

/** What one launch reads and writes: the runtime's handle and watch, the prompt being written, the journal. */
type LaunchPort = TaskPort<
  "rec" | "state" | "promptWrite" | "runtimeState" | "childEnded" | "journal" | "watchRuntime" | "unwatchRuntime",
  "config" | "env" | "log" | "runtimeFor" | "stopped" | "store"
>;

/**
 * One launch of pi for the current cycle (attempt 1, or 2 after a stall): the runtime starts the child, the launch
 * is journaled with its handle, and it resolves to launch_returned for the machine (which arms the readiness
 * barrier); nothing when the launch became moot.
 */
async function launchOnce(r: LaunchPort, attempt: number): Promise<LaunchEnded | undefined> {
  const { rec } = r;
  if (launchMoot(r) || r.ports.stopped()) return undefined;
  r.unwatchRuntime(); // a relaunch: the old child is ended, its watch is moot
  const runtime = r.ports.runtimeFor(rec.runtime);
  const argv = buildPiCommand({
    mode: rec.runtime === "headless" ? "rpc" : "interactive",
    model: rec.model,
    thinking: rec.thinking,
    sessionPath: rec.sessionPath,
    extensionPaths: [r.ports.env.childExtensionPath],
    cwd: rec.workdir,
    env: { ...process.env, ...r.ports.env.childEnv },
  }).argv;
  const env = childEnv(r, rec);
  // The env's names only: its values may be API keys (docs/reliability.md, secrets).
  r.ports.log.debug(
    { taskId: rec.taskId, attempt, runtime: rec.runtime, argv, cwd: rec.workdir, envKeys: Object.keys(env) },
    "launching child",
  );
  const handle = await runtime.launch({
    taskId: rec.taskId,
    name: rec.name,
    argv,
    cwd: rec.workdir,
    taskDir: r.ports.store.taskPaths(rec.taskId).dir,
    env,
    ...(rec.worktree ? { repoName: rec.worktree.repo.split("/").pop()! } : { repoName: rec.cwd.split("/").pop()! }),
    ...(rec.ownerPaneId ? { ownerPaneId: rec.ownerPaneId } : {}),
    ...(rec.machine ? { machine: rec.machine } : {}),
  });
  crashPoint("launch_returned"); // crash tests only: the child runs, its handle is not journaled yet
  const prompt = r.promptWrite;
  delete r.promptWrite;
  if (prompt)
    await prompt.catch(async (e: unknown) => {
      await runtime.close(handle).catch(() => undefined);
      throw e;
    });
  rec.handle = handle;
  delete r.runtimeState;
  delete r.childEnded;
  await r.journal({ type: "launched", attempt, runtime: rec.runtime, handle });
  if (r.ports.stopped()) return undefined; // stopped mid-launch: the journal has the handle, the next daemon re-attaches
  if (!launchWanted(r.state.phase)) {
    // Closed or aborted while the launch call ran: that close could not reach this child, so end it here.
    await runtime.close(handle).catch(() => undefined);
    return undefined;
  }
  r.watchRuntime(runtime);
  return { type: "launch_returned" };
}

function childEnv(r: TaskPort<never, "config" | "env">, rec: TaskRecord): Record<string, string> {
  return {
    ...r.ports.env.childEnv,
    DSH_HERDR_SOCKET: r.ports.env.socketPath,
    DSH_HERDR_TASK_ID: rec.taskId,
    DSH_HERDR_TASK_TOKEN: rec.token,
    DSH_HERDR_RESULT_PATH: rec.resultPath,
    // An idle child that loses its daemon for this long ends itself (the daemon parks idle children after it too).
    DSH_HERDR_IDLE_MS: String(r.ports.config().idleChildMs),
  };
}
