// A task's checks, one after another, in one directory (its worktree, or the merged tree of `land --check`): a
// receipt each, the logs under tasks/<taskId>/checks/. The next check runs even when one fails, so every receipt says
// what it saw.
import { mkdir } from "node:fs/promises";
import { basename, join } from "node:path";
import type { CheckReceipt, CheckTree } from "../core/types.js";
import { type CheckLimits, DEFAULT_CHECK_LIMITS, runCheck } from "./run-check.js";

export interface TaskChecksOptions {
  commands: readonly string[];
  cwd: string;
  /** tasks/<taskId>: the logs go to its checks/ folder. */
  taskDir: string;
  /** Names this run's logs: e.g. `c2-1760000000000` (the cycle and the start). */
  runTag: string;
  limits?: Partial<CheckLimits>;
  on?: CheckTree;
  env?: NodeJS.ProcessEnv;
  /** Aborted: the running check's process group is ended and no further check starts. */
  signal?: AbortSignal;
  /** Told each check's process group id as it starts. */
  onSpawn?: (pgid: number) => void;
}

/** Whitespace-only or empty commands are refused before anything runs. */
export function normalizeChecks(commands: readonly unknown[] | undefined): string[] {
  return (commands ?? []).filter((c): c is string => typeof c === "string" && c.trim() !== "").map((c) => c.trim());
}

export async function runTaskChecks(opts: TaskChecksOptions): Promise<CheckReceipt[]> {
  const dir = join(opts.taskDir, "checks");
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const limits = { ...DEFAULT_CHECK_LIMITS, ...opts.limits };
  const receipts: CheckReceipt[] = [];
  let i = 0;
  for (const command of opts.commands) {
    if (opts.signal?.aborted) break;
    i++;
    receipts.push(
      await runCheck({
        command,
        cwd: opts.cwd,
        logPath: join(dir, `${opts.runTag}-${i}.log`),
        ...limits,
        scopeName: `check-${basename(opts.taskDir)}`,
        ...(opts.on !== undefined ? { on: opts.on } : {}),
        ...(opts.env !== undefined ? { env: opts.env } : {}),
        ...(opts.signal ? { signal: opts.signal } : {}),
        ...(opts.onSpawn ? { onSpawn: opts.onSpawn } : {}),
      }),
    );
  }
  return receipts;
}
