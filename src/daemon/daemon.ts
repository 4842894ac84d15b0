// The daemon process: lock, config, store, socket server, supervisor, start-up reconciliation, graceful stop.
import { join } from "node:path";
import { pino } from "pino";
import { DshError } from "../core/errors.js";
import type { RuntimeKind } from "../core/types.js";
import { loadConfig, type Config } from "../store/config.js";
import { ensureHome, homePaths } from "../store/home.js";
import { TaskStore } from "../store/task-store.js";
import { acquireDaemonLock } from "./lock.js";
import { createHandlers } from "./methods.js";
import { PROTOCOL_VERSION, ProtocolSchemas, packageRoot } from "./protocol.js";
import { recoverTasks } from "./recover.js";
import { createRuntimes } from "./runtimes.js";
import { startSocketServer, type Logger } from "./server.js";
import { Supervisor } from "./supervisor.js";
import { readFileSync } from "node:fs";

export interface RunDaemonOptions {
  /** Extra env for every child (tests: HOME, PI_CODING_AGENT_DIR, PI_OFFLINE...). */
  childEnv?: Record<string, string>;
  /** Config overrides on top of config.json (tests). */
  config?: Partial<Config>;
  logLevel?: string;
}

export interface RunningDaemon {
  home: string;
  socketPath: string;
  supervisor: Supervisor;
  /** Resolves when the daemon has stopped. */
  done: Promise<void>;
  stop(): Promise<void>;
}

export function daemonVersion(): string {
  return (JSON.parse(readFileSync(join(packageRoot, "package.json"), "utf8")) as { version: string }).version;
}

export async function runDaemon(home: string, opts: RunDaemonOptions = {}): Promise<RunningDaemon> {
  const paths = await ensureHome(home);
  const log: Logger = pino({ level: opts.logLevel ?? process.env.DSH_HERDR_LOG_LEVEL ?? "info", base: { pid: process.pid } }, pino.destination({ dest: paths.log, sync: true, mkdir: true }));
  let stopping: Promise<void> | undefined;
  const lock = await acquireDaemonLock(home, (e) => {
    log.error({ err: e.message }, "daemon lock compromised; stopping");
    void stop();
  });
  let config: Config;
  try {
    config = { ...(await loadConfig(home)), ...(opts.config ?? {}) };
  } catch (e) {
    await lock.release();
    throw e;
  }
  const store = await TaskStore.open(home);
  const runtimes = createRuntimes(() => config);
  const version = daemonVersion();
  const startedAt = Date.now();
  const sup = new Supervisor({
    home,
    store,
    config: () => config,
    runtimeFor: (k: RuntimeKind) => runtimes.get(k),
    socketPath: paths.socket,
    childExtensionPath: join(packageRoot, "dist", "src", "extensions", "child.js"),
    childEnv: opts.childEnv ?? {},
    log,
  });
  // Reconcile every open task before the socket is served.
  await recoverTasks(sup, runtimes);

  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  const server = await startSocketServer({
    socketPath: paths.socket,
    schemas: new ProtocolSchemas(),
    version,
    log,
    authenticateChild: (taskId, token) => sup.authenticate(taskId, token),
    onChildConnected: (conn) => sup.childConnected(conn),
    handlers: createHandlers({
      sup,
      defaultRuntime: () => runtimes.pick(),
      stop: () => void stop(),
      status: () => ({
        pid: process.pid, version, protocol: PROTOCOL_VERSION, home, socketPath: paths.socket, startedAt,
        uptimeMs: Date.now() - startedAt, running: sup.admission.running, queued: sup.admission.queued,
        openTasks: [...sup.tasks.values()].filter((l) => sup.isOpen(l)).length,
        maxParallelAgents: config.maxParallelAgents, maxQueuedAgents: config.maxQueuedAgents,
        runtime: config.runtime, enabled: config.enabled,
      }),
    }),
  });
  log.info({ home, socket: paths.socket, version, tasks: sup.tasks.size }, "daemon started");

  function stop(): Promise<void> {
    stopping ??= (async () => {
      log.info({}, "daemon stopping; open tasks keep running in their runtimes");
      await server.close();
      for (const live of sup.tasks.values()) {
        sup.stopWatching(live);
        await live.chain;
      }
      await lock.release();
      log.info({}, "daemon stopped");
      resolveDone();
    })();
    return stopping;
  }
  return { home, socketPath: homePaths(home).socket, supervisor: sup, done, stop };
}

export function assertNoDaemonError(e: unknown): never {
  throw e instanceof DshError ? e : new DshError("INTERNAL", String(e));
}
