// File primitives for the store: atomic rewrites, fsynced appends, tolerant JSONL reads, and one mapping of
// disk failures (full, read-only, no permission) to HOME_UNWRITABLE.
//
// The small writes here (a journal line, a task.json of a few KiB) are plain synchronous calls on purpose; only
// fsync goes to the thread pool. A write that lands in the page cache takes microseconds, while each promise call
// is a thread-pool round trip with its own JavaScript: with 100 tasks settling at once the open + write + close of
// one journal line cost ~60-150 µs of daemon time and queued behind every other task's calls (~9-20 µs sync; the
// A/B of bench/status-latency in docs/performance.md). The home is a local directory the daemon owns.
import { randomBytes } from "node:crypto";
import {
  closeSync,
  constants,
  fdatasync,
  fstatSync,
  fsync,
  ftruncateSync,
  open as openCb,
  openSync,
  readSync,
  writeSync,
} from "node:fs";
import { rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { promisify } from "node:util";
import { DshError } from "../core/errors.js";

const fdatasyncAsync = promisify(fdatasync);
const openAsync = promisify(openCb);
const fsyncAsync = promisify(fsync);

/**
 * An existing file opened for appending without O_CREAT: a plain lookup, so synchronous is cheap; with O_CREAT the
 * open takes the directory's lock, which a journal commit or a directory fsync can hold (then it waits off-thread).
 */
function openAppend(path: string): number | undefined {
  try {
    return openSync(path, constants.O_RDWR | constants.O_APPEND);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
}

/** A raw descriptor (not a FileHandle, which would close it again when collected). */
const openCreate = (path: string): Promise<number> => openAsync(path, "a+", 0o600);

/** Write every byte (write(2) may take part of them, e.g. on a nearly full disk); throws what write throws. */
function writeAllSync(fd: number, data: string | Buffer): void {
  const buf = typeof data === "string" ? Buffer.from(data) : data;
  for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off, buf.length - off);
}

function closeQuietly(fd: number | undefined): void {
  if (fd === undefined) return;
  try {
    closeSync(fd);
  } catch {
    // already closed or EIO at close: the write's own result decided
  }
}

const UNWRITABLE = new Set(["ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM"]);

/** Turn a filesystem error into a DshError naming what we tried and how to fix it. */
export function fsError(e: unknown, what: string): DshError {
  if (e instanceof DshError) return e;
  const code = (e as NodeJS.ErrnoException | undefined)?.code ?? "";
  const msg = e instanceof Error ? e.message : String(e);
  if (UNWRITABLE.has(code)) {
    const why =
      code === "ENOSPC" || code === "EDQUOT"
        ? "the disk is full"
        : code === "EROFS"
          ? "the filesystem is read-only"
          : "permission denied";
    return new DshError(
      "HOME_UNWRITABLE",
      `cannot ${what}: ${why} (${code}). Free space or fix permissions on the dsh-herdr home, or point DSH_HERDR_HOME at a writable directory.`,
    );
  }
  return new DshError("INTERNAL", `cannot ${what}: ${msg}`);
}

/**
 * Replace `path` atomically (temp file + fsync + rename + directory fsync): readers see the old or the new content,
 * never a mix. Not write-file-atomic: its single fs.write ignores a short write, so on a full disk it renames a
 * truncated file into place; writeAllSync loops until every byte is written or an error is thrown.
 */
export async function writeAtomic(
  path: string,
  data: string | Buffer,
  mode = 0o600,
  opts: SyncOptions = {},
): Promise<void> {
  await writeAtomicMany([{ path, data }], mode, opts);
}

/**
 * Several atomic replacements in one directory with one directory fsync (a harvest writes task.json and
 * result.json together): each file is written to a temp name, synced, then renamed over its target.
 */
export async function writeAtomicMany(
  files: { path: string; data: string | Buffer }[],
  mode = 0o600,
  opts: SyncOptions = {},
): Promise<void> {
  const sync = opts.sync !== false;
  const tmps = files.map((f) =>
    join(dirname(f.path), `.${basename(f.path)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`),
  );
  try {
    // Created and renamed in the thread pool: both take the directory's lock, which a concurrent fsync of that
    // directory or a journal commit can hold for milliseconds (done synchronously they stalled the event loop).
    // Closed synchronously and renamed side by side: a settle's record waited for five thread-pool round trips in a
    // row, each queued behind every other settle's calls in a burst; now three.
    await Promise.all(
      files.map(async (f, i) => {
        const fd = await openAsync(tmps[i]!, "wx", mode);
        try {
          writeAllSync(fd, f.data);
          if (sync) await fdatasyncAsync(fd);
        } catch (e) {
          closeQuietly(fd);
          throw e;
        }
        closeSync(fd);
      }),
    );
    await Promise.all(files.map((f, i) => rename(tmps[i]!, f.path)));
  } catch (e) {
    await Promise.all(tmps.map((t) => unlink(t).catch(() => undefined)));
    throw fsError(e, `write ${files.map((f) => f.path).join(", ")}`);
  }
  if (!sync) return;
  const dirs = (async () => {
    for (const dir of new Set(files.map((f) => dirname(f.path)))) await syncDir(dir);
  })();
  if (opts.dirSyncLater) opts.dirSyncLater(dirs);
  else await dirs;
}

/**
 * `sync: false` skips the fsyncs (about 4-15 ms each on a VM disk). The write is still atomic for readers and
 * survives a daemon crash (it is in the page cache); only a power cut or kernel crash can lose it. For data that is
 * rebuilt from the session file and the journal anyway (live snapshots, records of a task that has not launched).
 */
export interface SyncOptions {
  sync?: boolean;
  /**
   * With `sync`, an atomic rewrite resolves once its files are fsynced and renamed into place (readers see them)
   * and hands the directory fsync that makes the renames survive a power cut to this callback instead of awaiting
   * it: a settle's record rewrite then holds `task.wait` for one fsync, not two in a row.
   */
  dirSyncLater?: (done: Promise<void>) => void;
}

/** fsync a directory so a rename in it survives a power cut; best-effort (some filesystems refuse). */
async function syncDir(dir: string): Promise<void> {
  let fd: number | undefined;
  try {
    fd = openSync(dir, "r");
    await fsyncAsync(fd);
  } catch {
    // best-effort, as documented
  } finally {
    closeQuietly(fd);
  }
}

/**
 * Append one JSON line and fsync it before returning (unless `sync: false`). A torn last line (a crash mid-append) must not swallow this
 * record, so when the file does not end in a newline we start with one (one pread per append; appends are rare).
 */
export async function appendJsonLine(path: string, value: unknown, opts: SyncOptions = {}): Promise<void> {
  await appendJsonLines(path, [value], opts);
}

/**
 * Append several JSON lines in one write and (unless `sync: false`) one fsync: a group commit. All or none stay.
 * Resolves with the file's size after the append (-1 when there was nothing to write).
 */
export async function appendJsonLines(path: string, values: unknown[], opts: SyncOptions = {}): Promise<number> {
  return (await appendJsonLinesAt(path, values, opts)).size;
}

/** appendJsonLines, also saying where the bytes went and what they were (the commit log records both). */
export async function appendJsonLinesAt(
  path: string,
  values: unknown[],
  opts: SyncOptions & {
    /** The file's size, known to end in a newline (its only writer's last append left it so): no stat, no read. */
    knownSize?: number;
  } = {},
): Promise<{ size: number; at: number; text: string }> {
  if (values.length === 0) return { size: -1, at: -1, text: "" };
  let lines = values.map((v) => JSON.stringify(v) + "\n").join("");
  let fd: number | undefined;
  try {
    fd = openAppend(path) ?? (await openCreate(path));
    let size = opts.knownSize;
    if (size === undefined) {
      size = fstatSync(fd).size;
      if (size > 0) {
        const last = Buffer.alloc(1);
        readSync(fd, last, 0, 1, size - 1);
        if (last[0] !== 0x0a) lines = "\n" + lines;
      }
    }
    try {
      writeAllSync(fd, lines);
      if (opts.sync !== false) await fdatasyncAsync(fd);
      return { size: size + Buffer.byteLength(lines), at: size, text: lines };
    } catch (e) {
      // A full disk can take part of the lines: cut it back so no half record stays behind.
      try {
        ftruncateSync(fd, size);
      } catch {
        // the error below names the disk; a torn tail is skipped by every reader
      }
      throw e;
    }
  } catch (e) {
    throw fsError(e, `append to ${path}`);
  } finally {
    closeQuietly(fd);
  }
}

/** What a bounded read refuses: the file is not a regular file, or larger than the bound. */
export interface ReadLimits {
  /** Default STORE_READ_MAX_BYTES. */
  maxBytes?: number;
  /** The error for a refused file; `why` says what it is (`is a FIFO, not a regular file`). Default HOME_UNSAFE. */
  refuse?: (why: string) => DshError;
}

/** A record, journal or index in the home is never this large (a journal of 100,000 events is ~30 MiB). */
export const STORE_READ_MAX_BYTES = 256 * 1024 * 1024;

function kindOf(st: {
  isFIFO(): boolean;
  isCharacterDevice(): boolean;
  isBlockDevice(): boolean;
  isSocket(): boolean;
  isDirectory(): boolean;
}): string {
  if (st.isFIFO()) return "a FIFO";
  if (st.isCharacterDevice()) return "a character device";
  if (st.isBlockDevice()) return "a block device";
  if (st.isSocket()) return "a socket";
  if (st.isDirectory()) return "a directory";
  return "not a regular file";
}

const defaultRefuse = (path: string) => (why: string) =>
  new DshError(
    "HOME_UNSAFE",
    `${path} ${why}; dsh-herdr writes it as a regular file and does not read it otherwise: move it away (or restore it from a backup) and retry.`,
  );

/**
 * Read a whole file the daemon (or CLI) reads, checked first: opened without blocking (O_NONBLOCK: a FIFO nobody
 * writes would hold the open forever), a regular file (a symlink to /dev/zero would never end), within `maxBytes`;
 * else the caller's named error. undefined when the file does not exist. Synchronous, as the rest of this file.
 */
export function readBoundedSync(path: string, limits: ReadLimits = {}): Buffer | undefined {
  const max = limits.maxBytes ?? STORE_READ_MAX_BYTES;
  const refuse = limits.refuse ?? defaultRefuse(path);
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    if (code === "ENXIO") throw refuse("is a socket, not a regular file");
    throw fsError(e, `read ${path}`);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) {
      const kind = kindOf(st);
      throw refuse(kind === "not a regular file" ? "is not a regular file" : `is ${kind}, not a regular file`);
    }
    if (st.size > max) throw refuse(`is ${st.size} bytes, over the ${max}-byte bound`);
    const buf = Buffer.alloc(st.size);
    let got = 0;
    for (let n; got < buf.length && (n = readSync(fd, buf, got, buf.length - got, got)) > 0; ) got += n;
    return got === buf.length ? buf : buf.subarray(0, got);
  } catch (e) {
    throw fsError(e, `read ${path}`);
  } finally {
    closeQuietly(fd);
  }
}

export async function readJsonLines<T = unknown>(path: string, limits: ReadLimits = {}): Promise<T[]> {
  const buf = readBoundedSync(path, limits);
  return buf === undefined ? [] : parseJsonLines<T>(buf.toString("utf8"));
}

/** One value per JSON line; a torn or foreign line is skipped, the records around it are still good. */
export function parseJsonLines<T = unknown>(text: string): T[] {
  const out: T[] = [];
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    try {
      out.push(JSON.parse(line) as T);
    } catch {
      // torn or foreign line: skip
    }
  }
  return out;
}

/**
 * Read a file or return undefined when it does not exist (synchronous: a record or journal, see the header); checked
 * and bounded as readBoundedSync.
 */
export async function readIfExists(path: string, limits: ReadLimits = {}): Promise<string | undefined> {
  return readBoundedSync(path, limits)?.toString("utf8");
}
