// Reading files a child controls (result.md): never through a symlink (a child could point it at ~/.ssh or a
// FIFO), only regular files, and never more than the size bound into memory. Synchronous calls: the file is in the
// page cache and a few KiB (see src/store/fsio.ts for why that beats the thread pool here); O_NONBLOCK keeps the
// open of a FIFO planted under the name from blocking.
import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";

export type BoundedRead = { text: string; truncated: boolean } | { refused: string } | { missing: true };

export async function readChildFile(path: string, maxBytes: number): Promise<BoundedRead> {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return { missing: true };
    if (code === "ELOOP")
      return { refused: `${path} is a symlink; it was not followed. Write result.md as a regular file` };
    return { refused: `${path} could not be read (${code ?? String(e)})` };
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return { refused: `${path} is not a regular file; write result.md as a regular file` };
    // One byte past the bound tells the parser the file was longer (it truncates and warns).
    const want = Math.min(st.size, maxBytes + 1);
    const buf = Buffer.alloc(want);
    let got = 0;
    for (let n; got < want && (n = readSync(fd, buf, got, want - got, got)) > 0; ) got += n;
    return { text: buf.subarray(0, got).toString("utf8"), truncated: st.size > maxBytes };
  } finally {
    closeSync(fd);
  }
}
