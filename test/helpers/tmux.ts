// Test helper: a private tmux server (`tmux -L <random>`, no config file) that is killed at the end.
// Never touches the user's tmux server.
import { execa } from "execa";
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { until } from "./wait.js";

export interface PrivateTmux {
  socketName: string;
  /** Runs `tmux -L <socket> -f /dev/null ...args`; resolves stdout, rejects on failure. */
  run(args: string[]): Promise<string>;
  /** kill-server and remove the socket file (tmux 3.3 leaves it); fine when the server already exited. */
  kill(): Promise<void>;
}

export async function tmuxInstalled(): Promise<boolean> {
  const r = await execa("tmux", ["-V"], { reject: false });
  return r.exitCode === 0;
}

export function privateTmux(prefix = "dsh-test"): PrivateTmux {
  const socketName = `${prefix}-${process.pid}-${randomBytes(4).toString("hex")}`;
  const base = ["-L", socketName, "-f", "/dev/null"];
  return {
    socketName,
    async run(args) {
      const r = await execa("tmux", [...base, ...args], { env: { TMUX: undefined } });
      return String(r.stdout);
    },
    async kill() {
      await execa("tmux", [...base, "kill-server"], { reject: false });
      const uid = process.getuid?.() ?? 0;
      rmSync(join(process.env.TMUX_TMPDIR ?? "/tmp", `tmux-${uid}`, socketName), { force: true });
    },
  };
}

/** `until` (./wait.ts) with the pane tests' pace: 20 s, every 50 ms. */
export const waitFor = <T>(
  what: string,
  check: () => Promise<T | undefined | null | false>,
  timeoutMs = 20_000,
  everyMs = 50,
): Promise<T> => until(what, check, timeoutMs, everyMs);
