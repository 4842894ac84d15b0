// A task dir read for verify (src/core/lifecycle/verify.ts does the rebuild and the comparison): result.json, the journal,
// task.json, result.md's pinned copies, diff.patch's digest and the session up to the pinned offset. Bounded: files are
// read in chunks and a file over VERIFY_MAX_FILE_BYTES gets the task a "too large" verdict without being read, so one
// huge file cannot end a `verify --all` for the others; a task dir or file that is a symlink is not followed (it could
// lead out of the home). Used by `dsh-herdr verify`, by `show`, and by the daemon before it serves a stored result:
// a result.json that disagrees with its task dir is named tampered (tamperedView) rather than shown as written.
import { createHash } from "node:crypto";
import { closeSync, constants, fstatSync, lstatSync, openSync, readSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { SessionReader, type SessionFacts } from "../core/session/session-reader.js";
import { type ParseYaml, YAML_OPTIONS } from "../core/result/result-md-read.js";
import type { AgentResult } from "../core/types.js";
import { parseJournalRecord, type JournalRecord } from "../core/lifecycle/journal-record.js";
import { checkTask, journalVerdict, type Difference, type VerifyRecord } from "../core/lifecycle/verify.js";

/** The largest file verify reads (the journal, result.json, task.json, a pinned result.md): larger is "too large". */
export const VERIFY_MAX_FILE_BYTES = 256 * 1024 * 1024;
const CHUNK = 1024 * 1024;

export interface TaskVerification {
  taskId: string;
  ok: boolean;
  /** Why the task was not checked (no result.json yet, a cycle still running). */
  skipped?: string;
  /** Why the task dir could not be verified (a file too large, a symlink, an unreadable file): not ok. */
  refused?: string;
  differences: Difference[];
  /** What the task dir did not let verify check (a dir from before harvests were pinned, a relayed task). */
  unchecked?: string[];
}

/** A file verify will not read: the task gets a "not verified" verdict naming it. */
class Refusal extends Error {}

/**
 * Rebuild the task's result from its dir and compare it with `result` (default: the dir's result.json). Never throws:
 * a file it cannot or will not read is the task's own verdict (`refused`).
 */
export function verifyTaskDir(
  dir: string,
  taskId: string,
  opts: { result?: AgentResult; maxFileBytes?: number } = {},
): TaskVerification {
  try {
    return verifyOrRefuse(dir, taskId, opts.result, opts.maxFileBytes ?? VERIFY_MAX_FILE_BYTES);
  } catch (e) {
    const why = e instanceof Refusal ? e.message : `reading it failed: ${(e as Error).message ?? String(e)}`;
    return { taskId, ok: false, refused: why, differences: [] };
  }
}

function verifyOrRefuse(dir: string, taskId: string, given: AgentResult | undefined, max: number): TaskVerification {
  const skip = (why: string): TaskVerification => ({ taskId, ok: true, skipped: why, differences: [] });
  const st = lstatOrUndefined(dir);
  if (!st) return skip("no task dir");
  if (st.isSymbolicLink())
    throw new Refusal(
      `the task dir ${dir} is a symlink; verify reads only task dirs inside the home, not through links`,
    );
  if (!st.isDirectory()) throw new Refusal(`${dir} is not a directory`);
  const files = new TaskFiles(dir, max);
  let result = given;
  if (!result) {
    const text = files.whole("result.json");
    if (!text) return skip("no result.json yet");
    try {
      result = JSON.parse(text.toString("utf8")) as AgentResult;
    } catch (e) {
      const why = `result.json is not JSON (${(e as Error).message})`;
      return {
        taskId,
        ok: false,
        differences: [{ field: "result.json", stored: why, expected: "JSON", source: "the file" }],
      };
    }
  }
  const events = files.journal("events.jsonl");
  const j = journalVerdict(events);
  if (
    j.lastStatus === undefined ||
    !["completed", "failed", "gone", "interrupted", "blocked", "closed"].includes(j.lastStatus)
  )
    return skip(`not settled yet (${j.lastStatus ?? result.status})`);
  const record = parseRecord(files.whole("task.json"));
  const patch = files.digest("diff.patch");
  const { differences, unchecked } = checkTask({
    events,
    result,
    ...(record ? { record } : {}),
    sessionUpTo: (offset) => files.sessionFactsUpTo("session.jsonl", offset),
    readPinned: (name) => {
      if (!/^result\.c\d+\.md$/.test(name)) return undefined; // only the copies the daemon writes
      const buf = files.whole(name);
      return buf ? { text: buf.toString("utf8"), sha256: sha256(buf) } : undefined;
    },
    ...(patch ? { patch } : {}),
    parseYaml: lazyParseYaml,
  });
  return {
    taskId,
    ok: differences.length === 0,
    differences,
    ...(unchecked.length ? { unchecked } : {}),
  };
}

/**
 * A stored result as it may be shown: itself when its task dir agrees (or cannot say), else without the fields a
 * rewrite could forge into a pass (`verified`) and with a warning naming the first difference. `tampered` is set then.
 */
export function tamperedView(dir: string, result: AgentResult): { result: AgentResult; tampered?: string } {
  const v = verifyTaskDir(dir, result.taskId, { result });
  if (v.ok || v.refused !== undefined || v.differences.length === 0) return { result };
  const fields = [...new Set(v.differences.map((d) => d.field))].join(", ");
  const tampered = `tampered: result.json disagrees with its task dir (${fields}): it was changed after the daemon wrote it, so its fields are not to be trusted; \`dsh-herdr verify ${result.taskId}\` names each difference`;
  const { verified: _forged, ...rest } = result;
  return { result: { ...rest, warnings: [...(result.warnings ?? []), tampered] }, tampered };
}

let yaml: typeof import("yaml") | undefined;
/**
 * yaml's parse, loaded the first time a pinned result.md's frontmatter is more than plain `key: value` lines (the
 * library costs `show` about 45 ms of CPU to load; crew_report writes plain lines). yaml is CommonJS: require loads it.
 */
const lazyParseYaml: ParseYaml = (text) => {
  yaml ??= createRequire(import.meta.url)("yaml") as typeof import("yaml");
  return yaml.parse(text, YAML_OPTIONS);
};

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

function lstatOrUndefined(path: string) {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

/** The files of one task dir, each opened without following a symlink and read in bounded chunks. */
class TaskFiles {
  constructor(
    private readonly dir: string,
    private readonly max: number,
  ) {}

  /** A regular file's descriptor and size, or undefined when missing; a symlink or a special file is refused. */
  private open(name: string): { fd: number; size: number } | undefined {
    let fd: number;
    try {
      // O_NOFOLLOW: a link out of the home is not read; O_NONBLOCK: a FIFO must not hold verify in open(2).
      fd = openSync(join(this.dir, name), constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return undefined;
      if (code === "ELOOP") throw new Refusal(`${name} is a symlink; verify does not follow links out of the task dir`);
      throw new Refusal(`${name} could not be opened (${code ?? String(e)})`);
    }
    const st = fstatSync(fd);
    if (!st.isFile()) {
      closeSync(fd);
      throw new Refusal(`${name} is not a regular file`);
    }
    return { fd, size: st.size };
  }

  private tooLarge(name: string, size: number): Refusal {
    return new Refusal(
      `${name} is too large to verify (${size} bytes, over the ${Math.round(this.max / (1024 * 1024))} MiB verify reads)`,
    );
  }

  /** Each chunk of the file in order (the last may be short); a fresh buffer per chunk. */
  private *chunks(fd: number, upTo: number): Generator<Buffer> {
    for (let at = 0; at < upTo; ) {
      const buf = Buffer.allocUnsafe(Math.min(CHUNK, upTo - at));
      const n = readSync(fd, buf, 0, buf.length, at);
      if (n === 0) return;
      yield buf.subarray(0, n);
      at += n;
    }
  }

  /** A file's bytes, whole (at most the bound), or undefined when it is not there. */
  whole(name: string): Buffer | undefined {
    const f = this.open(name);
    if (!f) return undefined;
    try {
      if (f.size > this.max) throw this.tooLarge(name, f.size);
      return Buffer.concat([...this.chunks(f.fd, f.size)]);
    } finally {
      closeSync(f.fd);
    }
  }

  /**
   * The journal's records, parsed line by line from chunks (lines that are not JSON, and records of kinds or shapes
   * the daemon does not know, left out: as the daemon's own reader does).
   */
  journal(name: string): JournalRecord[] {
    const f = this.open(name);
    if (!f) return [];
    const out: JournalRecord[] = [];
    const take = (line: string) => {
      if (!line.trim()) return;
      try {
        const e = parseJournalRecord(JSON.parse(line));
        if (e) out.push(e);
      } catch {
        /* a torn last line: the journal's reader skips it too */
      }
    };
    try {
      if (f.size > this.max) throw this.tooLarge(name, f.size);
      let rest: Buffer = Buffer.alloc(0);
      for (const chunk of this.chunks(f.fd, f.size)) {
        let buf = rest.length ? Buffer.concat([rest, chunk]) : chunk;
        for (let nl = buf.indexOf(10); nl >= 0; nl = buf.indexOf(10)) {
          take(buf.subarray(0, nl).toString("utf8"));
          buf = buf.subarray(nl + 1);
        }
        rest = Buffer.from(buf);
      }
      take(rest.toString("utf8"));
    } finally {
      closeSync(f.fd);
    }
    return out;
  }

  /** A file's size and sha256, hashed in chunks (no bound: nothing of it is held). */
  digest(name: string): { bytes: number; sha256: string } | undefined {
    const f = this.open(name);
    if (!f) return undefined;
    try {
      const h = createHash("sha256");
      let bytes = 0;
      for (const chunk of this.chunks(f.fd, f.size)) {
        h.update(chunk);
        bytes += chunk.length;
      }
      return { bytes, sha256: h.digest("hex") };
    } finally {
      closeSync(f.fd);
    }
  }

  /** The session's facts from its first `offset` bytes (what the harvest had read), in chunks. */
  sessionFactsUpTo(name: string, offset: number): SessionFacts | undefined {
    const f = this.open(name);
    if (!f) return undefined;
    const reader = new SessionReader();
    try {
      // The reader keeps a partial line by reference: chunks() gives a fresh buffer each time.
      for (const chunk of this.chunks(f.fd, offset)) reader.push(chunk);
    } finally {
      closeSync(f.fd);
    }
    return reader.facts();
  }
}

function parseRecord(buf: Buffer | undefined): VerifyRecord | undefined {
  if (!buf) return undefined;
  try {
    const r = JSON.parse(buf.toString("utf8")) as VerifyRecord;
    return typeof r === "object" && r !== null && typeof r.taskId === "string" ? r : undefined;
  } catch {
    return undefined;
  }
}
