// Reads the output of `git diff -z --raw -p …` in one pass: the raw block (NUL-separated, ended by an extra NUL)
// names the changed files; the patch after it streams into a file, cut at a file boundary once it passes the cap,
// while its +/- lines are counted for the stat (one diff pass instead of a second `--numstat` run).
import { spawn } from "node:child_process";
import { open, type FileHandle } from "node:fs/promises";
import { DshError } from "../core/errors.js";
import { launchGitStream } from "./launcher.js";

export interface RawEntry {
  /** git's status letter: A, M, D, R, C, T, U. */
  status: string;
  path: string;
  /** Set for renames and copies. */
  from?: string;
}

export interface StreamedDiff {
  entries: RawEntry[];
  insertions: number;
  deletions: number;
  /** Patch bytes kept in the file (before any truncation note). */
  patchBytes: number;
  truncated: boolean;
}

const HEADER = Buffer.from("\ndiff --git ");
const SEPARATOR = Buffer.from([0, 0]);
const NL = 0x0a;
const PLUS = 0x2b;
const MINUS = 0x2d;

/** Counts hunk lines across chunk boundaries: `+`/`-` lines after an `@@` and before the next `diff --git`. */
class LineCounter {
  insertions = 0;
  deletions = 0;
  private inHunk = false;
  // The first bytes (enough to tell "diff --git ") of a line cut by a chunk boundary.
  private pending: Buffer | undefined;

  feed(buf: Buffer): void {
    let pos = 0;
    if (this.pending !== undefined) {
      const nl = buf.indexOf(NL);
      const end = nl < 0 ? buf.length : nl;
      if (this.pending.length < 11)
        this.pending = Buffer.concat([this.pending, buf.subarray(0, Math.min(end, 11 - this.pending.length))]);
      if (nl < 0) return;
      this.classify(this.pending);
      this.pending = undefined;
      pos = nl + 1;
    }
    while (pos < buf.length) {
      const nl = buf.indexOf(NL, pos);
      if (nl < 0) {
        this.pending = Buffer.from(buf.subarray(pos, Math.min(buf.length, pos + 11)));
        return;
      }
      this.classify(buf.subarray(pos, nl));
      pos = nl + 1;
    }
  }

  private classify(line: Buffer): void {
    const c = line[0];
    if (this.inHunk) {
      if (c === PLUS) this.insertions++;
      else if (c === MINUS) this.deletions++;
      else if (c === 0x64 && line.subarray(0, 11).toString("latin1") === "diff --git ") this.inHunk = false;
    } else if (c === 0x40 && line[1] === 0x40) {
      this.inHunk = true;
    }
  }
}

/**
 * Run git with `args` in cwd, parse the raw head and write the patch to `file` (created/truncated). Past
 * `capBytes` the file is cut back to the last `diff --git` header at or below the cap, so it holds whole file
 * patches only; git's output is still read to the end so the stat counts every line.
 */
export async function streamDiff(
  cwd: string,
  args: string[],
  env: Record<string, string>,
  file: string,
  capBytes: number,
): Promise<StreamedDiff> {
  // Open first: between spawn and the read loop there must be no await, or node drains an unread stdout on exit.
  const fh = await open(file, "w", 0o600);
  const git = startGit(cwd, args, env);
  let head: Buffer | undefined = Buffer.alloc(0);
  let written = 0; // patch bytes in the file
  let carry = Buffer.from("\n"); // the patch's first header is at offset 0: pretend a newline precedes it
  let lastHeaderAtOrBelowCap = 0;
  let truncated = false;
  let entries: RawEntry[] = [];
  const counter = new LineCounter();
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  const flush = async (): Promise<void> => {
    if (pendingBytes === 0) return;
    const buf = pending.length === 1 ? pending[0]! : Buffer.concat(pending, pendingBytes);
    pending = [];
    pendingBytes = 0;
    await writeAll(fh, buf);
  };
  try {
    for await (const raw of git.stdout) {
      let chunk = raw;
      if (head !== undefined) {
        const buf: Buffer = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
        const sep = buf.indexOf(SEPARATOR);
        if (sep < 0) {
          head = buf;
          continue;
        }
        entries = parseRaw(buf.subarray(0, sep + 1));
        head = undefined;
        chunk = buf.subarray(sep + 2);
      }
      counter.feed(chunk);
      if (truncated) continue;
      // Headers in this chunk, with the previous bytes as context so a header split across chunks counts.
      const scan = Buffer.concat([carry, chunk]);
      for (let i = scan.indexOf(HEADER); i >= 0; i = scan.indexOf(HEADER, i + 1)) {
        const at = written - carry.length + i + 1;
        if (at <= capBytes) lastHeaderAtOrBelowCap = at;
      }
      carry = Buffer.from(scan.subarray(Math.max(0, scan.length - (HEADER.length - 1))));
      if (written + chunk.length > capBytes) {
        await flush();
        if (lastHeaderAtOrBelowCap > written) await writeAll(fh, chunk.subarray(0, lastHeaderAtOrBelowCap - written));
        await fh.truncate(lastHeaderAtOrBelowCap);
        written = lastHeaderAtOrBelowCap;
        truncated = true;
        continue;
      }
      // Pipe reads come in small pieces; batching them saves one thread-pool write per piece.
      pending.push(chunk);
      pendingBytes += chunk.length;
      written += chunk.length;
      if (pendingBytes >= 1 << 20) await flush();
    }
    await flush();
    if (head !== undefined && head.length > 0) entries = parseRaw(head); // a raw block without a patch
    await fh.sync();
  } finally {
    await fh.close();
  }
  const { code, stderr, spawnError } = await git.exit;
  if (code === null)
    throw new DshError("GIT_FAILED", `git ${args.join(" ")} could not start in ${cwd}: ${spawnError ?? stderr.trim()}`);
  if (code !== 0)
    throw new DshError("GIT_FAILED", `git ${args.join(" ")} failed in ${cwd} (exit ${code}): ${stderr.trim()}`);
  return { entries, insertions: counter.insertions, deletions: counter.deletions, patchBytes: written, truncated };
}

interface StartedGit {
  stdout: AsyncIterable<Buffer>;
  /** code null: git did not start (`spawnError` says why); stderr is its first 4 KB. */
  exit: Promise<{ code: number | null; stderr: string; spawnError?: string }>;
}

/**
 * git with its stdout read as it comes: through the daemon's launcher shell when one runs (a FIFO; node's own spawn
 * holds the event loop for the fork, launcher.ts), else spawned here.
 */
function startGit(cwd: string, args: string[], env: Record<string, string>): StartedGit {
  const launched = launchGitStream({ cwd, args, env });
  if (launched) {
    const exit = launched.exit.then(({ code, stderr, spawnError }) => ({
      code,
      stderr: stderr.slice(0, 4096),
      ...(spawnError !== undefined ? { spawnError } : {}),
    }));
    exit.catch(() => undefined); // the stream fails with the same error first
    return { stdout: launched.stdout, exit };
  }
  const child = spawn("git", args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d: string) => {
    if (stderr.length < 4096) stderr += d;
  });
  const exit = new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stderr }));
  });
  return { stdout: child.stdout as AsyncIterable<Buffer>, exit };
}

/** write() may write less than asked (a nearly full disk); loop so a short write becomes the next call's error. */
async function writeAll(fh: FileHandle, buf: Buffer): Promise<void> {
  for (let off = 0; off < buf.length; ) off += (await fh.write(buf, off, buf.length - off)).bytesWritten;
}

/** Parse `--raw -z` records: `:modes shas STATUS\0path\0`, or `…R100\0from\0to\0` for a rename/copy. */
export function parseRaw(buf: Buffer): RawEntry[] {
  const fields = buf.toString("utf8").split("\0");
  const out: RawEntry[] = [];
  for (let i = 0; i < fields.length; i++) {
    const meta = fields[i]!;
    if (!meta.startsWith(":")) continue;
    const status = meta.slice(meta.lastIndexOf(" ") + 1, meta.lastIndexOf(" ") + 2);
    if (status === "R" || status === "C") {
      const from = fields[++i] ?? "";
      out.push({ status, from, path: fields[++i] ?? "" });
    } else {
      out.push({ status, path: fields[++i] ?? "" });
    }
  }
  return out;
}

/** git's `--shortstat` line (diff.c print_stat_summary), e.g. " 2 files changed, 40 insertions(+), 7 deletions(-)". */
export function shortstat(files: number, ins: number, del: number): string {
  if (files === 0) return " 0 files changed";
  let s = files === 1 ? ` ${files} file changed` : ` ${files} files changed`;
  if (ins !== 0 || del === 0) s += `, ${ins} insertion${ins === 1 ? "" : "s"}(+)`;
  if (del !== 0 || ins === 0) s += `, ${del} deletion${del === 1 ? "" : "s"}(-)`;
  return s;
}
