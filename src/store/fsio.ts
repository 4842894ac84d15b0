// File primitives for the store: atomic rewrites, fsynced appends, tolerant JSONL reads, and one mapping of
// disk failures (full, read-only, no permission) to HOME_UNWRITABLE.
import { randomBytes } from "node:crypto";
import { open, readFile, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { DshError } from "../core/errors.js";

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
 * truncated file into place; FileHandle.writeFile loops until every byte is written or an error is thrown.
 */
export async function writeAtomic(
  path: string,
  data: string | Buffer,
  mode = 0o600,
  opts: SyncOptions = {},
): Promise<void> {
  const sync = opts.sync !== false;
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  try {
    const fh = await open(tmp, "wx", mode);
    try {
      await fh.writeFile(data);
      if (sync) await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  } catch (e) {
    await unlink(tmp).catch(() => undefined);
    throw fsError(e, `write ${path}`);
  }
  if (sync) await syncDir(dirname(path));
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
    await Promise.all(
      files.map(async (f, i) => {
        const fh = await open(tmps[i]!, "wx", mode);
        try {
          await fh.writeFile(f.data);
          if (sync) await fh.datasync();
        } finally {
          await fh.close();
        }
      }),
    );
    for (let i = 0; i < files.length; i++) await rename(tmps[i]!, files[i]!.path);
  } catch (e) {
    await Promise.all(tmps.map((t) => unlink(t).catch(() => undefined)));
    throw fsError(e, `write ${files.map((f) => f.path).join(", ")}`);
  }
  if (sync) for (const dir of new Set(files.map((f) => dirname(f.path)))) await syncDir(dir);
}

/**
 * `sync: false` skips the fsyncs (about 4-15 ms each on a VM disk). The write is still atomic for readers and
 * survives a daemon crash (it is in the page cache); only a power cut or kernel crash can lose it. For data that is
 * rebuilt from the session file and the journal anyway (live snapshots, records of a task that has not launched).
 */
export interface SyncOptions {
  sync?: boolean;
}

/** fsync a directory so a rename in it survives a power cut; best-effort (some filesystems refuse). */
async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, "r").catch(() => undefined);
  await fh?.sync().catch(() => undefined);
  await fh?.close().catch(() => undefined);
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
  let fh;
  try {
    fh = await open(path, "a+", 0o600);
    let size = opts.knownSize;
    if (size === undefined) {
      size = (await fh.stat()).size;
      if (size > 0) {
        const last = Buffer.alloc(1);
        await fh.read(last, 0, 1, size - 1);
        if (last[0] !== 0x0a) lines = "\n" + lines;
      }
    }
    try {
      await fh.appendFile(lines); // loops over short writes; a plain write() would not
      if (opts.sync !== false) await fh.datasync();
      return { size: size + Buffer.byteLength(lines), at: size, text: lines };
    } catch (e) {
      // A full disk can take part of the lines: cut it back so no half record stays behind.
      await fh.truncate(size).catch(() => undefined);
      throw e;
    }
  } catch (e) {
    throw fsError(e, `append to ${path}`);
  } finally {
    await fh?.close().catch(() => undefined);
  }
}

export async function readJsonLines<T = unknown>(path: string): Promise<T[]> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return [];
    throw fsError(e, `read ${path}`);
  }
  return parseJsonLines<T>(text);
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

/** Read a file or return undefined when it does not exist. */
export async function readIfExists(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw fsError(e, `read ${path}`);
  }
}
