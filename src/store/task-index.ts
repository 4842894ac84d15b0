// A cheap listing of many tasks: tasks/index.jsonl holds one summary line per task change, loaded into memory once
// at open and compacted when it grows; start-up repairs it from task.json files whose mtime it did not record.
import { statSync, type Stats } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { isValidTaskId } from "../core/ids.js";
import type { AgentResult } from "../core/types.js";
import { appendJsonLine, fsError, readBoundedSync, readJsonLines, writeAtomic, type SyncOptions } from "./fsio.js";

/**
 * What a listing shows of a task: a valid AgentResult without the bulky parts (session, diff, report). Its usage (a
 * few numbers) stays: `list --wide` shows the cost and `dsh-herdr usage` totals it from the index.
 */
export type TaskRow = Pick<
  AgentResult,
  "schemaVersion" | "taskId" | "status" | "role" | "agent" | "herdrStatus" | "summary" | "timing" | "nextAction"
> &
  Partial<Pick<AgentResult, "brief" | "cwd" | "owner" | "worktree" | "error" | "usage" | "verified" | "landing">>;

export function rowOf(r: AgentResult): TaskRow {
  const row: TaskRow = {
    schemaVersion: r.schemaVersion,
    taskId: r.taskId,
    status: r.status,
    role: r.role,
    agent: r.agent,
    herdrStatus: r.herdrStatus,
    summary: r.summary,
    timing: r.timing,
    nextAction: r.nextAction,
  };
  if (r.brief !== undefined) row.brief = r.brief;
  if (r.cwd !== undefined) row.cwd = r.cwd;
  if (r.owner !== undefined) row.owner = r.owner;
  if (r.worktree !== undefined) row.worktree = r.worktree;
  if (r.error !== undefined) row.error = r.error;
  if (r.usage !== undefined) row.usage = r.usage;
  // The checks' verdict, so `list` and `watch` can say a check failed without reading the result.
  if (r.verified !== undefined) row.verified = r.verified;
  // Where the work landed, so `list` (offline too) and `watch` can say `landed`.
  if (r.landing !== undefined) row.landing = r.landing;
  return row;
}

/** The fields the store needs; the supervisor's record extends this with whatever else it keeps. */
export interface TaskRecordBase {
  taskId: string;
  owner: string;
  status: string;
  createdAt: number;
  updatedAt?: number;
  brief?: string;
  cwd?: string;
}

/** One index line: the record's listing fields plus what keeps the index honest. */
export interface TaskSummary extends TaskRecordBase {
  /** task.json's mtime when this line was written; a mismatch at load means the line is stale. */
  mtimeMs: number;
  /** The task's listing row as of its last harvest (absent for lines written before it had one). */
  row?: TaskRow;
  /** A task relayed to another machine: its id there (ids typed from that machine's agent name find it). */
  remoteTaskId?: string;
}

export interface TaskFilter {
  owner?: string;
  status?: string | string[];
  /** Only tasks created at or after this epoch ms. */
  since?: number;
  limit?: number;
  /** Only tasks older than this id (ids are time-ordered): the next page after a previous page's last id. */
  before?: string;
}

export function summarize(rec: Record<string, unknown>, mtimeMs: number, row?: TaskRow): TaskSummary {
  const s: TaskSummary = {
    taskId: String(rec.taskId),
    owner: typeof rec.owner === "string" ? rec.owner : "",
    status: typeof rec.status === "string" ? rec.status : "unknown",
    createdAt: typeof rec.createdAt === "number" ? rec.createdAt : 0,
    mtimeMs,
  };
  if (typeof rec.updatedAt === "number") s.updatedAt = rec.updatedAt;
  if (typeof rec.brief === "string") s.brief = rec.brief.slice(0, 200);
  if (typeof rec.cwd === "string") s.cwd = rec.cwd;
  const remote = rec.remote as { taskId?: unknown } | undefined;
  if (typeof remote?.taskId === "string") s.remoteTaskId = remote.taskId;
  if (row !== undefined && row.taskId === s.taskId) s.row = row;
  return s;
}

/** A row from a result.json read back from disk, or undefined when it does not look like an AgentResult. */
function readTextIfExists(path: string): string | undefined {
  try {
    return readBoundedSync(path)?.toString("utf8"); // a regular file, bounded (fsio.ts)
  } catch {
    return undefined;
  }
}

function statIfExists(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

export function storedResultRow(r: unknown): TaskRow | undefined {
  const o = r as Partial<AgentResult> | null;
  if (
    typeof o !== "object" ||
    o === null ||
    o.schemaVersion !== 1 ||
    typeof o.taskId !== "string" ||
    typeof o.status !== "string"
  )
    return undefined;
  if (
    typeof o.agent !== "object" ||
    typeof o.timing !== "object" ||
    typeof o.summary !== "string" ||
    typeof o.role !== "string"
  )
    return undefined;
  if (typeof o.herdrStatus !== "string" || typeof o.nextAction !== "string") return undefined;
  return rowOf(o as AgentResult);
}

/** The listing row of a task's result.json, for a repaired index line (once, at start-up). */
function storedRow(path: string): TaskRow | undefined {
  try {
    const text = readTextIfExists(path);
    return text === undefined ? undefined : storedResultRow(JSON.parse(text));
  } catch {
    return undefined; // listed from task.json alone; task.list reads result.json for it
  }
}

export class TaskIndex {
  private readonly byId = new Map<string, TaskSummary>();
  private lines = 0;
  // Appends and compaction run one at a time so a compaction never drops a concurrent append.
  private chain: Promise<unknown> = Promise.resolve();

  private constructor(private readonly tasksDir: string) {}

  get path(): string {
    return join(this.tasksDir, "index.jsonl");
  }

  static async load(tasksDir: string): Promise<TaskIndex> {
    const idx = new TaskIndex(tasksDir);
    const lines = await readJsonLines<TaskSummary>(idx.path);
    idx.lines = lines.length;
    for (const l of lines) if (isValidTaskId(l?.taskId)) idx.byId.set(l.taskId, l);
    let names: string[];
    try {
      names = await readdir(tasksDir);
    } catch (e) {
      throw fsError(e, `list ${tasksDir}`);
    }
    const present = new Set(names.filter((n) => isValidTaskId(n)));
    let repaired = false;
    for (const id of idx.byId.keys()) {
      if (!present.has(id)) {
        idx.byId.delete(id);
        repaired = true;
      }
    }
    // Synchronous on purpose: this runs once, before the socket is served, over every task directory. A stat
    // through the thread pool costs a round trip each (10,000 tasks: 0.4-0.5 s); statSync about a quarter of it.
    for (const id of present) {
      const file = join(tasksDir, id, "task.json");
      const st = statIfExists(file);
      if (st === undefined) continue; // allocated but never written
      const known = idx.byId.get(id);
      if (known !== undefined && known.mtimeMs === st.mtimeMs) continue;
      const text = readTextIfExists(file);
      if (text === undefined) continue;
      try {
        idx.byId.set(
          id,
          summarize(
            JSON.parse(text) as Record<string, unknown>,
            st.mtimeMs,
            storedRow(join(tasksDir, id, "result.json")),
          ),
        );
        repaired = true;
      } catch {
        // an unreadable task.json stays out of the listing; readTask reports it
      }
    }
    if (repaired || idx.lines > 2 * idx.byId.size + 100) await idx.compact();
    return idx;
  }

  update(s: TaskSummary, opts: SyncOptions = {}): Promise<void> {
    // A line without a row (a task.json rewrite that had no result at hand) keeps the row it had.
    const known = this.byId.get(s.taskId);
    if (s.row === undefined && known?.row !== undefined && known.row.status === s.status) s = { ...s, row: known.row };
    this.byId.set(s.taskId, s);
    return this.serial(async () => {
      await appendJsonLine(this.path, s, opts);
      this.lines++;
      if (this.lines > 2 * this.byId.size + 100) await this.rewrite();
    });
  }

  /** Drop a task from memory (one whose creation failed); a line already on disk is dropped at load (no directory). */
  forget(taskId: string): void {
    this.byId.delete(taskId);
  }

  compact(): Promise<void> {
    return this.serial(() => this.rewrite());
  }

  get(taskId: string): TaskSummary | undefined {
    return this.byId.get(taskId);
  }

  get size(): number {
    return this.byId.size;
  }

  /** Newest first (task ids are time-ordered). */
  list(filter: TaskFilter = {}): TaskSummary[] {
    const statuses = filter.status === undefined ? undefined : new Set([filter.status].flat());
    const out: TaskSummary[] = [];
    for (const s of this.byId.values()) {
      if (filter.owner !== undefined && s.owner !== filter.owner) continue;
      if (statuses !== undefined && !statuses.has(s.status)) continue;
      if (filter.since !== undefined && s.createdAt < filter.since) continue;
      if (filter.before !== undefined && s.taskId >= filter.before) continue;
      out.push(s);
    }
    out.sort((a, b) => (a.taskId < b.taskId ? 1 : a.taskId > b.taskId ? -1 : 0));
    return filter.limit === undefined ? out : out.slice(0, Math.max(0, filter.limit));
  }

  private async rewrite(): Promise<void> {
    const body = [...this.byId.values()].map((s) => JSON.stringify(s) + "\n").join("");
    await writeAtomic(this.path, body);
    this.lines = this.byId.size;
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.chain.then(fn, fn);
    this.chain = next.catch(() => undefined);
    return next;
  }
}
