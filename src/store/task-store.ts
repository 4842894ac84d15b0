// Task records on disk: tasks/<taskId>/{task.json, events.jsonl, prompt.md, result.json, diff.patch}.
// Every id from outside is validated before it becomes a path; every rewrite is atomic; the journal is fsynced.
import { randomBytes } from "node:crypto";
import { statSync, type Stats } from "node:fs";
import { mkdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { DshError } from "../core/errors.js";
import { assertTaskId, newTaskId } from "../core/ids.js";
import { parseJournal, type JournalRecord } from "../core/lifecycle/journal-record.js";
import { KeyedQueue } from "../core/keyed-queue.js";
import type { AgentResult } from "../core/types.js";
import { CommitLog } from "./commit-log.js";
import {
  appendJsonLinesAt,
  fsError,
  readIfExists,
  readJsonLines,
  writeAtomic,
  writeAtomicMany,
  type SyncOptions,
} from "./fsio.js";
import { ensureHome, type HomePaths } from "./home.js";
import { rowOf, summarize, TaskIndex, type TaskFilter, type TaskRecordBase, type TaskSummary } from "./task-index.js";
export type { TaskRecordBase } from "./task-index.js";
import { taskPathsIn, UNSYNCED, unsynced, type TaskPaths } from "./task-layout.js";
export { UNSYNCED, unsynced, type TaskPaths } from "./task-layout.js";

export interface StoreOptions {
  /**
   * Durable journal records go through one daemon-wide commit log (src/store/commit-log.ts) instead of an fsync
   * of each task's journal; default true. Only one process may use it: the daemon, under its lock.
   */
  groupCommit?: boolean;
}

/** How many tasks' paths taskPaths keeps (about 2.5 KB each, 2.5 MB in all; the open tasks of a busy daemon fit). */
const PATHS_CACHED = 1024;

export class TaskStore {
  /** Journal appends per task, one after another: the commit log records each one's byte offset. */
  private readonly appends = new KeyedQueue();
  /** Task directories seen to exist (knownTask). */
  private readonly knownDirs = new Set<string>();
  /** Each journal's size after this process's last append to it. */
  private readonly journalEnds = new Map<string, number>();
  /** Recent tasks' paths (taskPaths), oldest first. */
  private readonly pathsCache = new Map<string, TaskPaths>();

  private constructor(
    readonly paths: HomePaths,
    private readonly index: TaskIndex,
    private readonly log: CommitLog | undefined,
  ) {}

  /** Create/check the home (see ensureHome), repair the task journals from the commit log, load the task index. */
  static async open(home: string, opts: StoreOptions = {}): Promise<TaskStore> {
    const paths = await ensureHome(home);
    const log = opts.groupCommit === false ? undefined : await CommitLog.open(paths.home);
    return new TaskStore(paths, await TaskIndex.load(paths.tasks), log);
  }

  /** A clean stop: the commit log is emptied once the journals it covers are fsynced (nothing to replay next start). */
  async close(): Promise<void> {
    await this.appends.idle();
    await this.log?.close();
  }

  /** Make bytes already appended to another of the home's files durable through the commit log (the outbox). */
  get durable(): ((path: string, at: number, text: string) => Promise<void>) | undefined {
    const log = this.log;
    return log ? (path, at, text) => log.commit(path, at, text) : undefined;
  }

  /** Commit-log writes and the records they carried (undefined without group commit). */
  get commitStats(): { writes: number; records: number } | undefined {
    return this.log?.stats;
  }

  /**
   * Paths of one task; throws BAD_TASK_ID for anything that is not a task id (`../x`, `/etc`, empty, long). Kept for
   * the most recent tasks: every journal append, record write and read asks for them, and building the seven joined
   * paths each time was a tenth of what the daemon allocated in a settle burst (docs/performance.md).
   */
  taskPaths(taskId: unknown): TaskPaths {
    const known = typeof taskId === "string" ? this.pathsCache.get(taskId) : undefined;
    if (known) return known;
    const p = Object.freeze(taskPathsIn(this.paths.tasks, taskId));
    if (this.pathsCache.size >= PATHS_CACHED) this.pathsCache.delete(this.pathsCache.keys().next().value!);
    this.pathsCache.set(taskId as string, p);
    return p;
  }

  /** A fresh task id whose directory now exists (mkdir without recursive, so a collision is detected, not shared). */
  async allocateTaskId(nowMs: number = Date.now()): Promise<string> {
    for (let attempt = 0; attempt < 32; attempt++) {
      const id = newTaskId(nowMs, randomBytes(3));
      try {
        await mkdir(join(this.paths.tasks, id), { mode: 0o700 });
        return id;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw fsError(e, `create the task directory ${id}`);
      }
    }
    throw new DshError("INTERNAL", "could not allocate a unique task id after 32 tries; check the clock and tasks/.");
  }

  /**
   * Allocate an id, write the first task.json built from it, and journal `created`. `allocated` hears the id as soon
   * as its directory exists (the spawn starts its worktree then).
   */
  async createTask<T extends TaskRecordBase>(
    build: (taskId: string) => T,
    nowMs: number = Date.now(),
    opts: SyncOptions = {},
    allocated?: (taskId: string) => void,
  ): Promise<T> {
    const taskId = await this.allocateTaskId(nowMs);
    try {
      allocated?.(taskId);
      const rec = build(taskId);
      if (rec.taskId !== taskId)
        throw new DshError("INTERNAL", "createTask: the built record must keep the allocated taskId.");
      await this.writeTask(rec, opts);
      const created: JournalRecord = { type: "created", status: rec.status };
      await this.appendEvent(taskId, opts.sync === false ? unsynced(created) : created);
      return rec;
    } catch (e) {
      // A full or read-only disk mid-create: leave no half-written task behind (nothing ran for it yet).
      this.index.forget(taskId);
      await rm(join(this.paths.tasks, taskId), { recursive: true, force: true }).catch(() => undefined);
      throw e;
    }
  }

  /** Remove a task that never ran (a relayed spawn the other machine refused): its directory and index line. */
  async discardTask(taskId: unknown): Promise<void> {
    const p = await this.knownTask(taskId);
    this.index.forget(String(taskId));
    await rm(p.dir, { recursive: true, force: true });
  }

  async writeTask<T extends TaskRecordBase>(rec: T, opts: SyncOptions = {}): Promise<void> {
    const p = await this.knownTask(rec.taskId);
    await this.inTask(rec.taskId, () => writeAtomic(p.taskJson, JSON.stringify(rec, null, 2) + "\n", 0o600, opts));
    const st = await stat(p.taskJson).catch(() => undefined);
    await this.index.update(summarize(rec as unknown as Record<string, unknown>, st?.mtimeMs ?? 0), { sync: false });
  }

  /** task.json and result.json of one harvest, and one index line carrying the task's listing row. */
  /** `extra`: more files of the task dir written in the same atomic batch (a harvest's pinned result.md copy). */
  async saveTask<T extends TaskRecordBase>(
    rec: T,
    result: AgentResult,
    opts: SyncOptions & { extra?: { name: string; data: string }[] } = {},
  ): Promise<void> {
    const p = await this.knownTask(rec.taskId);
    const { extra, ...sync } = opts;
    await this.inTask(rec.taskId, () =>
      writeAtomicMany(
        [
          ...(extra ?? []).map((f) => ({ path: join(p.dir, f.name), data: f.data })),
          { path: p.taskJson, data: JSON.stringify(rec, null, 2) + "\n" },
          { path: p.resultJson, data: JSON.stringify(result, null, 2) + "\n" },
        ],
        0o600,
        sync,
      ),
    );
    let st: Stats | undefined;
    try {
      st = statSync(p.taskJson);
    } catch {
      st = undefined; // removed meanwhile (a close): the index line carries mtime 0 and start-up repairs it
    }
    // Never fsynced: start-up repairs any index line whose task.json mtime it does not match.
    await this.index.update(summarize(rec as unknown as Record<string, unknown>, st?.mtimeMs ?? 0, rowOf(result)), {
      sync: false,
    });
  }

  // The reads stat the task directory only when the file is missing (to say TASK_NOT_FOUND): recovery reads three
  // files of each of 1,000 tasks, and a stat before each read was a fifth of its file calls.
  async readTask<T extends TaskRecordBase = TaskRecordBase>(taskId: unknown): Promise<T> {
    const p = this.taskPaths(taskId);
    const text = await readIfExists(p.taskJson);
    if (text === undefined) throw notFound(String(taskId), this.paths.tasks);
    try {
      return JSON.parse(text) as T;
    } catch (e) {
      throw new DshError(
        "INTERNAL",
        `${p.taskJson} is not valid JSON (${(e as Error).message}); inspect or remove that task directory.`,
      );
    }
  }

  async hasTask(taskId: unknown): Promise<boolean> {
    const p = this.taskPaths(taskId);
    return (await stat(p.taskJson).catch(() => undefined)) !== undefined;
  }

  /**
   * Append one journal line; `ts` defaults to now. Durable (unless marked with unsynced()) when it resolves: in the
   * commit log, whose one fsync is shared by every task's record written meanwhile, or fsynced in the journal itself.
   * Either way the line is in the task's journal before this resolves, so a daemon crash loses nothing.
   */
  async appendEvent(taskId: unknown, event: JournalRecord): Promise<void> {
    await (await this.writeEvents(taskId, [event])).durable;
  }

  /**
   * appendEvent in two steps, for one record or several in one append (one write: a crash keeps all of them or a
   * prefix, as one after another would): resolves once the lines are in the task's journal (a daemon crash keeps
   * them), with `durable` resolving once a power cut cannot lose them either. A settle uses it to make its record
   * durable while the harvest and the owner's outbox write go on; the owner's push waits for both. A relayed settle
   * writes its settle record and its settled status record together, as nothing comes between them.
   */
  appendEventsWritten(taskId: unknown, events: JournalRecord[]): Promise<{ durable: Promise<void> }> {
    return this.writeEvents(taskId, events);
  }

  // Every append in one place; kept apart from the public ones so a crash hook wraps each record exactly once.
  private async writeEvents(taskId: unknown, events: JournalRecord[]): Promise<{ durable: Promise<void> }> {
    const p = await this.knownTask(taskId);
    const durable = events.every((e) => (e as { [UNSYNCED]?: boolean })[UNSYNCED] !== true);
    const ts = Date.now();
    const lines = events.map((event) => ({ ts, ...event }));
    const written = this.appends.run(p.events, () =>
      this.inTask(taskId, async () => {
        // The daemon is the journal's only writer: after its first append here it knows where the file ends.
        const known = this.journalEnds.get(p.events);
        try {
          const r = await appendJsonLinesAt(p.events, lines, {
            sync: durable && !this.log,
            ...(known !== undefined ? { knownSize: known } : {}),
          });
          this.journalEnds.set(p.events, r.size);
          return r;
        } catch (e) {
          this.journalEnds.delete(p.events);
          throw e;
        }
      }),
    );
    const { at, text } = await written;
    return { durable: durable && this.log ? this.log.commit(p.events, at, text) : Promise.resolve() };
  }

  /** The journal's records in order; a torn last line (crash mid-append) and records of unknown kinds are skipped. */
  async readEvents(taskId: unknown): Promise<JournalRecord[]> {
    return (await this.readJournal(taskId)).records;
  }

  /**
   * The journal read back: its records of known kinds, in order (a torn last line skipped), and how many records were
   * left out as of a kind or shape this daemon does not know (an older or newer daemon's).
   */
  async readJournal(taskId: unknown): Promise<{ records: JournalRecord[]; unknown: number }> {
    const p = this.taskPaths(taskId);
    const lines = await readJsonLines<unknown>(p.events);
    if (lines.length === 0) await this.existing(taskId);
    return parseJournal(lines);
  }

  async writePrompt(taskId: unknown, text: string, opts: SyncOptions = {}): Promise<string> {
    const p = await this.existing(taskId);
    await writeAtomic(p.prompt, text, 0o600, opts);
    return p.prompt;
  }

  async readPrompt(taskId: unknown): Promise<string | undefined> {
    return readIfExists((await this.existing(taskId)).prompt);
  }

  async writeResult(taskId: unknown, result: AgentResult, opts: SyncOptions = {}): Promise<void> {
    const p = await this.existing(taskId);
    await writeAtomic(p.resultJson, JSON.stringify(result, null, 2) + "\n", 0o600, opts);
  }

  async readResult(taskId: unknown): Promise<AgentResult | undefined> {
    const text = await readIfExists(this.taskPaths(taskId).resultJson);
    if (text === undefined) await this.existing(taskId);
    return text === undefined ? undefined : (JSON.parse(text) as AgentResult);
  }

  /** From the in-memory index: no task.json is parsed per call. */
  listTasks(filter: TaskFilter = {}): TaskSummary[] {
    return this.index.list(filter);
  }

  getSummary(taskId: unknown): TaskSummary | undefined {
    return this.index.get(assertTaskId(taskId));
  }

  compactIndex(): Promise<void> {
    return this.index.compact();
  }

  /**
   * existing() once per task: the hot writers (journal, harvest records) skip the stat after the first call, and
   * inTask() turns a failure in a directory that has gone since into TASK_NOT_FOUND as existing() would.
   */
  private async knownTask(taskId: unknown): Promise<TaskPaths> {
    const p = this.taskPaths(taskId);
    if (this.knownDirs.has(p.dir)) return p;
    await this.existing(taskId);
    this.knownDirs.add(p.dir);
    return p;
  }

  private async inTask<R>(taskId: unknown, op: () => Promise<R>): Promise<R> {
    try {
      return await op();
    } catch (e) {
      const p = this.taskPaths(taskId);
      this.knownDirs.delete(p.dir);
      this.journalEnds.delete(p.events);
      await this.existing(taskId); // throws TASK_NOT_FOUND when the directory is gone
      throw e;
    }
  }

  /** Paths of a task whose directory exists; TASK_NOT_FOUND otherwise. */
  private async existing(taskId: unknown): Promise<TaskPaths> {
    const p = this.taskPaths(taskId);
    // A path stat, synchronous like the store's other small calls (src/store/fsio.ts).
    let st: Stats | undefined;
    try {
      st = statSync(p.dir);
    } catch {
      st = undefined; // missing, or not reachable as a directory: not found either way
    }
    if (st === undefined || !st.isDirectory()) throw notFound(String(taskId), this.paths.tasks);
    return p;
  }
}

function notFound(taskId: string, tasksDir: string): DshError {
  return new DshError("TASK_NOT_FOUND", `no task ${taskId} in ${tasksDir}; list tasks with \`dsh-herdr list\`.`);
}
