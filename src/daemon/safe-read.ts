// Reading files a child controls (result.md): never through a symlink (a child could point it at ~/.ssh or a
// FIFO), only regular files, and never more than the size bound into memory.
import { constants } from "node:fs";
import { open } from "node:fs/promises";

export type BoundedRead = { text: string; truncated: boolean } | { refused: string } | { missing: true };

export async function readChildFile(path: string, maxBytes: number): Promise<BoundedRead> {
  let fh;
  try {
    fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return { missing: true };
    if (code === "ELOOP")
      return { refused: `${path} is a symlink; it was not followed. Write result.md as a regular file` };
    return { refused: `${path} could not be read (${code ?? String(e)})` };
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) return { refused: `${path} is not a regular file; write result.md as a regular file` };
    // One byte past the bound tells the parser the file was longer (it truncates and warns).
    const want = Math.min(st.size, maxBytes + 1);
    const buf = Buffer.alloc(want);
    const { bytesRead } = await fh.read(buf, 0, want, 0);
    return { text: buf.subarray(0, bytesRead).toString("utf8"), truncated: st.size > maxBytes };
  } finally {
    await fh.close();
  }
}
