// The real bin/dsh-herdr as a subprocess: its exit code and both streams, whole (nothing trimmed).
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { execa } from "execa";
import { repoRoot } from "./pi.js";

export const dshBin = join(repoRoot, "bin", "dsh-herdr");

export interface CliRun {
  code: number;
  out: string;
  err: string;
}

export interface CliRunOptions {
  env: NodeJS.ProcessEnv;
  cwd?: string;
  timeoutMs?: number;
}

/** Runs the CLI and waits for it (code -1: killed, e.g. by the timeout). stdin is closed unless `input` is given. */
export async function runCli(args: string[], opts: CliRunOptions & { input?: string }): Promise<CliRun> {
  const r = await execa(process.execPath, [dshBin, ...args], {
    env: opts.env,
    ...(opts.cwd !== undefined ? { cwd: opts.cwd } : {}),
    reject: false,
    stripFinalNewline: false,
    timeout: opts.timeoutMs ?? 120_000,
    ...(opts.input !== undefined ? { input: opts.input } : { stdin: "ignore" }),
  });
  return { code: r.exitCode ?? -1, out: String(r.stdout), err: String(r.stderr) };
}

/** The same, blocking: for the commands that need no daemon (code null: killed, e.g. by the timeout). */
export function runCliSync(args: string[], opts: CliRunOptions): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, [dshBin, ...args], {
    encoding: "utf8",
    env: opts.env,
    ...(opts.cwd !== undefined ? { cwd: opts.cwd } : {}),
    timeout: opts.timeoutMs ?? 60_000,
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}
