// Reads the output of `git diff -z --numstat -p …` in one pass: the numstat block (NUL-separated, ended by an
// extra NUL) is parsed; the patch after it streams into a file, cut at a file boundary once it passes the cap.
import { spawn } from "node:child_process";
import { open, type FileHandle } from "node:fs/promises";
import { DshError } from "../core/errors.js";

export interface NumstatEntry {
  /** null for binary files (git prints `-`). */
  added: number | null;
  deleted: number | null;
  path: string;
  /** Set for renames and copies. */
  from?: string;
}

export interface StreamedDiff {
  numstat: NumstatEntry[];
  /** Patch bytes written before any truncation note. */
  patchBytes: number;
  truncated: boolean;
}

const HEADER = Buffer.from("\ndiff --git ");
const SEPARATOR = Buffer.from([0, 0]);

/**
 * Run git with `args` in cwd, parse the numstat head and write the patch to `file` (created/truncated). When the
 * patch exceeds `capBytes`, git is stopped and the file is cut back to the last `diff --git` header at or below the
 * cap, so it holds whole file patches only.
 */
export async function streamDiff(cwd: string, args: string[], env: Record<string, string>, file: string, capBytes: number): Promise<StreamedDiff> {
  // Open first: between spawn and the read loop there must be no await, or node drains an unread stdout on exit.
  const fh = await open(file, "w", 0o600);
  const child = spawn("git", args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d: string) => {
    if (stderr.length < 4096) stderr += d;
  });
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => resolve(code));
  });

  let head: Buffer | undefined = Buffer.alloc(0);
  let written = 0; // patch bytes in the file
  let carry = Buffer.from("\n"); // the patch's first header is at offset 0: pretend a newline precedes it
  let lastHeaderAtOrBelowCap = 0;
  let truncated = false;
  let numstat: NumstatEntry[] = [];
  try {
    for await (const raw of child.stdout as AsyncIterable<Buffer>) {
      let chunk = raw;
      if (head !== undefined) {
        const buf = Buffer.concat([head, chunk]);
        const sep = buf.indexOf(SEPARATOR);
        if (sep < 0) {
          head = buf;
          continue;
        }
        numstat = parseNumstat(buf.subarray(0, sep + 1));
        head = undefined;
        chunk = buf.subarray(sep + 2);
      }
      // Find headers in this chunk (with the previous bytes as context, so a header split across chunks counts).
      const scan = Buffer.concat([carry, chunk]);
      for (let i = scan.indexOf(HEADER); i >= 0; i = scan.indexOf(HEADER, i + 1)) {
        const at = written - carry.length + i + 1;
        if (at <= capBytes) lastHeaderAtOrBelowCap = at;
      }
      carry = Buffer.from(scan.subarray(Math.max(0, scan.length - (HEADER.length - 1))));
      if (written + chunk.length > capBytes) {
        if (lastHeaderAtOrBelowCap > written) await writeAll(fh, chunk.subarray(0, lastHeaderAtOrBelowCap - written));
        await fh.truncate(lastHeaderAtOrBelowCap);
        written = lastHeaderAtOrBelowCap;
        truncated = true;
        break;
      }
      await writeAll(fh, chunk);
      written += chunk.length;
    }
    if (head !== undefined && head.length > 0) numstat = parseNumstat(head); // numstat but no patch
    if (!truncated) await fh.sync();
  } finally {
    await fh.close();
    if (truncated) child.kill();
  }
  const code = await exited;
  if (!truncated && code !== 0) {
    throw new DshError("GIT_FAILED", `git ${args.join(" ")} failed in ${cwd} (exit ${code}): ${stderr.trim()}`);
  }
  return { numstat, patchBytes: written, truncated };
}

/** Parse `--numstat -z` records: `A\tD\tpath\0`, or `A\tD\t\0from\0to\0` for a rename/copy. */
export function parseNumstat(buf: Buffer): NumstatEntry[] {
  const fields = buf.toString("utf8").split("\0");
  const out: NumstatEntry[] = [];
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i]!;
    if (f === "") continue;
    const [a, d, path] = f.split("\t", 3) as [string, string | undefined, string | undefined];
    const entry: NumstatEntry = { added: a === "-" ? null : Number(a), deleted: d === "-" || d === undefined ? null : Number(d), path: path ?? "" };
    if (path === "" || path === undefined) {
      entry.from = fields[++i] ?? "";
      entry.path = fields[++i] ?? "";
    }
    out.push(entry);
  }
  return out;
}

/** git's `--shortstat` line (diff.c print_stat_summary), e.g. " 2 files changed, 40 insertions(+), 7 deletions(-)". */
export function shortstat(entries: NumstatEntry[]): string {
  const files = entries.length;
  if (files === 0) return " 0 files changed";
  let ins = 0;
  let del = 0;
  for (const e of entries) {
    ins += e.added ?? 0;
    del += e.deleted ?? 0;
  }
  let s = files === 1 ? ` ${files} file changed` : ` ${files} files changed`;
  if (ins !== 0 || del === 0) s += `, ${ins} insertion${ins === 1 ? "" : "s"}(+)`;
  if (del !== 0 || ins === 0) s += `, ${del} deletion${del === 1 ? "" : "s"}(-)`;
  return s;
}

/** write() may write less than asked (a nearly full disk); loop so a short write becomes the next call's error. */
async function writeAll(fh: FileHandle, buf: Buffer): Promise<void> {
  for (let off = 0; off < buf.length; ) off += (await fh.write(buf, off, buf.length - off)).bytesWritten;
}
