// The child's stdin is a named FIFO in the task dir, so any daemon (also one started after a crash) can write
// to it. Writes never block the daemon: open non-blocking (ENXIO = nobody reads: the child is gone) and retry
// a full pipe briefly.
import { constants } from "node:fs";
import { lstat, open } from "node:fs/promises";
import { execa } from "execa";
import { DshError } from "../../core/errors.js";

export async function ensureFifo(path: string): Promise<void> {
  const st = await lstat(path).catch(() => null);
  if (st?.isFIFO()) return;
  if (st) throw new DshError("LAUNCH_FAILED", `${path} exists and is not a FIFO: remove it and launch again`);
  const r = await execa("mkfifo", ["-m", "600", path], { reject: false });
  if (r.exitCode !== 0)
    throw new DshError(
      "LAUNCH_FAILED",
      `mkfifo ${path} failed (${String(r.stderr) || r.shortMessage}): check the task directory is writable`,
    );
}

const queues = new Map<string, Promise<void>>();

/** Appends `data` to the FIFO; concurrent writers in this process are serialized so lines never interleave. */
export function writeFifo(path: string, data: string, timeoutMs = 10_000): Promise<void> {
  const prev = queues.get(path) ?? Promise.resolve();
  const next = prev.catch(() => undefined).then(() => writeNow(path, Buffer.from(data, "utf8"), timeoutMs));
  queues.set(path, next);
  void next
    .finally(() => {
      if (queues.get(path) === next) queues.delete(path);
    })
    .catch(() => undefined);
  return next;
}

async function writeNow(path: string, buf: Buffer, timeoutMs: number): Promise<void> {
  let fh;
  try {
    fh = await open(path, constants.O_WRONLY | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENXIO" || code === "ENOENT") {
      throw new DshError(
        "PANE_GONE",
        `the headless child no longer reads ${path}: it has exited; read its output or start the task again`,
      );
    }
    throw e;
  }
  try {
    const deadline = Date.now() + timeoutMs;
    let off = 0;
    while (off < buf.length) {
      try {
        off += (await fh.write(buf, off, buf.length - off)).bytesWritten;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EAGAIN") throw e;
        if (Date.now() > deadline)
          throw new DshError(
            "TIMEOUT",
            `the headless child did not read its stdin (${path}) for ${timeoutMs} ms: it may be stuck; abort or close the task`,
          );
        await new Promise((r) => setTimeout(r, 10));
      }
    }
  } finally {
    await fh.close();
  }
}
