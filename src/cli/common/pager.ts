// Long text through $PAGER (default `less -R`) on a terminal; straight to stdout otherwise.
import { spawn } from "node:child_process";
import type { CliIo } from "./io.js";

export async function pageText(io: CliIo, text: string): Promise<void> {
  const pager = io.env["DSH_HERDR_PAGER"] ?? io.env["PAGER"] ?? "less -R";
  if (!io.isTTY || pager === "" || pager === "cat") return io.out(text);
  await new Promise<void>((resolve) => {
    // The pager is a user setting that may carry flags, so it goes through the shell like git's.
    const child = spawn(pager, { shell: true, stdio: ["pipe", "inherit", "inherit"], env: { LESS: "FRX", ...io.env } });
    child.on("error", () => {
      io.out(text);
      resolve();
    });
    child.on("close", () => resolve());
    child.stdin.on("error", () => {}); // the user quit the pager early
    child.stdin.end(text);
  });
}
