// The CLI with its stdout already closed by the reader (`dsh-herdr show ID | head` once head has had its lines).
import { spawn } from "node:child_process";
import { dshBin } from "./cli.js";

export function runWithClosedStdout(
  args: string[],
  env: NodeJS.ProcessEnv,
  cwd?: string,
): Promise<{ code: number | null; signal: string | null; err: string }> {
  const c = spawn(process.execPath, [dshBin, ...args], { env, cwd, stdio: ["ignore", "pipe", "pipe"] });
  c.stdout.destroy(); // the read end is gone before the CLI writes a byte: its first write meets EPIPE
  let err = "";
  c.stderr.on("data", (d) => (err += d));
  return new Promise((resolve) => c.on("close", (code, signal) => resolve({ code, signal, err })));
}
