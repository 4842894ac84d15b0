// A real daemon process for the benches: runDaemon on a temp home, serving its real Unix socket, with one change:
// every runtime is a stub (RunDaemonOptions.runtimeFactories) whose launch only records the call (pi's own start is
// not what we measure). The record, <taskDir>/launch.json, carries the launch time and the child's task token so the driver can play the child.
// Usage: node dist/bench/_daemon.js <home> [configJson]
import { renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runDaemon } from "../src/daemon/daemon.js";
import type { Runtime, RuntimeHandle, LaunchSpec } from "../src/runtime/types.js";
import type { RuntimeKind } from "../src/core/types.js";
import { epochMs } from "./_util.js";

export function stubRuntime(kind: RuntimeKind): Runtime {
  return {
    kind,
    async launch(spec: LaunchSpec): Promise<RuntimeHandle> {
      const at = epochMs();
      const file = join(spec.taskDir, "launch.json");
      writeFileSync(
        file + ".tmp",
        JSON.stringify({ at, taskId: spec.taskId, token: spec.env.DSH_HERDR_TASK_TOKEN, argv: spec.argv }),
      );
      renameSync(file + ".tmp", file);
      return { runtime: kind, pid: process.pid };
    },
    isAlive: async () => true,
    exitStatus: async () => null,
    readOutput: async () => "",
    sendText: async () => undefined,
    sendKeys: async () => undefined,
    close: async () => undefined,
    // Push-style: the stub child never exits, so there is nothing to report (and no liveness poll runs).
    watch: () => () => undefined,
  };
}

async function main(): Promise<void> {
  const home = process.argv[2];
  if (!home) throw new Error("usage: _daemon.js <home> [configJson]");
  const config = process.argv[3] ? (JSON.parse(process.argv[3]) as Record<string, unknown>) : {};
  const d = await runDaemon(home, {
    config: { runtime: "headless", ...config },
    logLevel: "warn",
    runtimeFactories: {
      herdr: () => stubRuntime("herdr"),
      tmux: () => stubRuntime("tmux"),
      headless: () => stubRuntime("headless"),
    },
  });
  process.once("SIGTERM", () => void d.stop());
  process.stdout.write(JSON.stringify({ ready: true, pid: process.pid, socket: d.socketPath }) + "\n");
  await d.done;
  process.exit(0);
}

if (process.argv[1]?.endsWith("_daemon.js")) {
  main().catch((e: unknown) => {
    process.stderr.write(`bench daemon: ${String((e as Error)?.stack ?? e)}\n`);
    process.exit(1);
  });
}
