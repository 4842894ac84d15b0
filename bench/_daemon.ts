// A real daemon process for the benches: runDaemon on a temp home, serving its real Unix socket, with one change:
// every runtime is a stub (RunDaemonOptions.runtimeFactories) whose launch only records the call (pi's own start is
// not what we measure). The record, <taskDir>/launch.json, carries the launch time and the child's task token so the driver can play the child.
// Usage: node dist/bench/_daemon.js <home> [configJson]
import { appendFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { constants, PerformanceObserver, performance } from "node:perf_hooks";
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

/**
 * BENCH_TRACE=<file>: one JSON line per stage a settle passes in this daemon (bench/remote-status's per-stage
 * trace), stamped with epochMs (comparable across processes): `settled` when the supervisor's listeners hear a
 * settled result (with the remote task id when the task is relayed), `link.push` when a relayed task's settled
 * `task.followed` push arrives over its link. Listeners only: nothing on the measured path changes.
 */
function traceStages(d: Awaited<ReturnType<typeof runDaemon>>, file: string): void {
  // Kept in memory as bare tuples and serialized at exit: no file write, no object or JSON built on the measured
  // path. A relayed settle passes three stamps (the machine's `settled`, `link.push`, this daemon's `settled`) where
  // a local one passes one, so a costly stamp would weigh on the remote side of remote / local alone.
  const stamps: [stage: string, taskId: string | undefined, remoteTaskId: string | undefined, at: number][] = [];
  const flush = () =>
    appendFileSync(
      file,
      stamps
        .splice(0)
        .map(([stage, taskId, remoteTaskId, at]) => `${JSON.stringify({ stage, taskId, remoteTaskId, at })}\n`)
        .join(""),
    );
  process.once("SIGTERM", flush);
  process.once("exit", flush);
  d.supervisor.onStatus((live, _result, info) => {
    if (info.settled) stamps.push(["settled", live.rec.taskId, live.rec.remote?.taskId, epochMs()]);
  });
  // Links are made on first use: listen to each one once it exists (a driver-side poll, off the measured path).
  const seen = new Set<string>();
  const t = setInterval(() => {
    for (const label of Object.keys(d.supervisor.deps.config().machines ?? {})) {
      const link = d.relay.linkOf(label);
      if (!link || seen.has(label)) continue;
      seen.add(label);
      link.on("push", (method, p) => {
        const q = p as { taskId?: string; settled?: boolean };
        if (method === "task.followed" && q.settled) stamps.push(["link.push", undefined, q.taskId, epochMs()]);
      });
    }
  }, 20);
  t.unref();
}

/**
 * BENCH_GC=<file>: one JSON line per garbage collection of this daemon ({at: epoch ms of its start, ms, kind}),
 * written at exit like the trace. A settle that meets a collection waits it out on the one JS thread, so the
 * collections that fall inside a burst are the first suspect for its tail (bench/status-latency prints them).
 */
function traceGc(file: string): void {
  const lines: string[] = [];
  const kinds: Record<number, string> = {
    [constants.NODE_PERFORMANCE_GC_MINOR]: "minor",
    [constants.NODE_PERFORMANCE_GC_MAJOR]: "major",
    [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: "incremental",
    [constants.NODE_PERFORMANCE_GC_WEAKCB]: "weak",
  };
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = (e.detail as { kind?: number } | undefined)?.kind;
      lines.push(
        JSON.stringify({
          at: performance.timeOrigin + e.startTime,
          ms: e.duration,
          kind: kinds[kind ?? -1] ?? "other",
        }),
      );
    }
  });
  observer.observe({ entryTypes: ["gc"] });
  const flush = () =>
    appendFileSync(
      file,
      lines
        .splice(0)
        .map((l) => `${l}\n`)
        .join(""),
    );
  process.once("SIGTERM", flush);
  process.once("exit", flush);
}

/**
 * With BENCH_LINKS=<file>: how each machine's link carried its frames at exit (`forward` or `bridge`, and why not
 * forward), so a remote bench can print it.
 */
function traceLinks(d: Awaited<ReturnType<typeof runDaemon>>, labels: string[], file: string): void {
  const flush = () => {
    const seen: Record<string, { transport: string; forwardError?: string }> = {};
    for (const label of labels) {
      const link = d.relay.linkOf(label);
      if (!link) continue;
      const why = link.forwardFailure;
      seen[label] = { transport: link.transport ?? link.state, ...(why ? { forwardError: why.message } : {}) };
    }
    writeFileSync(file, JSON.stringify(seen));
  };
  process.once("SIGTERM", flush);
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
  if (process.env.BENCH_TRACE) traceStages(d, process.env.BENCH_TRACE);
  if (process.env.BENCH_GC) traceGc(process.env.BENCH_GC);
  if (process.env.BENCH_LINKS)
    traceLinks(d, Object.keys((config["machines"] as object | undefined) ?? {}), process.env.BENCH_LINKS);
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
