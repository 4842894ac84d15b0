// The daemon process: lock, config, store, socket server, supervisor, start-up reconciliation, graceful stop.
import { useGitLauncher, gitEnv } from "./ports/git-port.js";
import { join } from "node:path";
import type { Clock } from "../core/clock.js";
import { DshError } from "../core/errors.js";
import type { HerdrStatus, RuntimeKind } from "../core/types.js";
import { deriveStatus } from "../core/result/derive.js";
import { HerdrClient, createTransport, herdrPing } from "../runtime/herdr/index.js";
import { configFileDigest, loadConfig, type Config } from "../store/config.js";
import { watchConfig } from "./config-watch.js";
import { collectOwnerDir, collectOwnerDirs, type OwnerGcDeps } from "./delivery/owner-gc.js";
import { OwnerAuth } from "./delivery/owner-auth.js";
import { ensureHome, homePaths } from "../store/home.js";
import { TaskStore } from "../store/task-store.js";
import { acquireDaemonLock } from "./lock.js";
import { crashHookFromEnv, withCrashHook } from "./ports/crash-hook.js";
import { createHandlers } from "./methods/methods.js";
import { taskOwnerOf } from "./delivery/owner-view.js";
import { DeliveryService } from "./delivery/delivery.js";
import { createOwnerHandlers } from "./methods/delivery-methods.js";
import { PROTOCOL_VERSION, type Result } from "../protocol/methods.js";
import type { HandlerTable } from "./server/server.js";

/** The methods the daemon serves through handlers (the server answers hello and frame.page itself). */
type ServedHandlers = Omit<HandlerTable, "hello" | "frame.page">;
import { ProtocolSchemas, packageRoot } from "../protocol/schemas.js";
import { recoverTasks } from "./recover/recover.js";
import { recoverLandings } from "./methods/land-intent.js";
import { abandonLandings } from "./methods/land-methods.js";
import { createRuntimes, type RuntimeFactories } from "./ports/runtimes.js";
import { startSocketServer, type ConnectionLimits } from "./server/server.js";
import { flushSnapshot } from "./task/persist.js";
import { Supervisor } from "./supervisor.js";
import { Relay } from "./relay/relay.js";
import type { TaskRecord } from "./task/record.js";
import { readFileSync } from "node:fs";
import { logTaskFailures, openDaemonLog } from "./daemon-log.js";
import { daemonEnvFacts, type AppliedEnvFile } from "./daemon-env.js";
import { NotifyService } from "../notify/service.js";
import { startDaemonBoard } from "../board/start.js";
import { watchStatusLatency } from "./delivery/status-latency.js";

export interface RunDaemonOptions {
  /** Extra env for every child (tests: HOME, PI_CODING_AGENT_DIR, PI_OFFLINE...). */
  childEnv?: Record<string, string>;
  /** Config overrides on top of config.json (tests). */
  config?: Partial<Config>;
  logLevel?: string;
  /** Build these runtime kinds with other factories (benches: a stub runtime that only records the launch). */
  runtimeFactories?: RuntimeFactories;
  /** Per-connection bounds of the socket server (tests lower them; defaults in server.ts DEFAULT_LIMITS). */
  limits?: Partial<ConnectionLimits>;
  /** The home's env file as main.ts applied it to process.env at start (daemon.status reports its keys). */
  envFile?: AppliedEnvFile;
  /** The clock the task runners time with (tests: a fake one they move by hand). */
  clock?: Clock;
}

export interface RunningDaemon {
  home: string;
  socketPath: string;
  supervisor: Supervisor;
  /** Tasks on other machines (tests reach its links to cut them). */
  relay: Relay;
  /** Resolves when the daemon has stopped. */
  done: Promise<void>;
  stop(): Promise<void>;
}

export function daemonVersion(): string {
  return (JSON.parse(readFileSync(join(packageRoot, "package.json"), "utf8")) as { version: string }).version;
}

export async function runDaemon(home: string, opts: RunDaemonOptions = {}): Promise<RunningDaemon> {
  const paths = await ensureHome(home);
  const { log, dest: logDest } = openDaemonLog(paths.log, opts.logLevel ?? process.env.DSH_HERDR_LOG_LEVEL ?? "info");
  let stopping: Promise<void> | undefined;
  const lock = await acquireDaemonLock(home, (e) => {
    log.error({ err: e.message }, "daemon lock compromised; stopping");
    void stop();
  }).catch((e: unknown) => {
    logDest.close();
    throw e;
  });
  let config: Config;
  let loadedDigest: string;
  try {
    loadedDigest = await configFileDigest(home);
    config = { ...(await loadConfig(home)), ...(opts.config ?? {}) };
  } catch (e) {
    await lock.release();
    logDest.close();
    throw e;
  }
  const store = await TaskStore.open(home);
  // git runs from a launcher shell while the daemon runs (src/git/launcher.ts: node's fork held the event loop).
  const releaseGitLauncher = useGitLauncher(() => gitEnv());
  // Inert unless DSH_HERDR_CRASH_AT is set (crash tests only; see crash-hook.ts).
  const crashHook = crashHookFromEnv();
  if (crashHook) {
    // After a durable record is durable; after a settle's record is written (its fsync runs alongside the harvest).
    store.appendEvent = withCrashHook(crashHook, store.appendEvent.bind(store));
    store.appendEventsWritten = withCrashHook(crashHook, store.appendEventsWritten.bind(store));
  }
  const runtimes = createRuntimes(() => config, {
    log,
    ...(opts.runtimeFactories ? { factories: opts.runtimeFactories } : {}),
  });
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
    ...(opts.clock ? { clock: opts.clock } : {}),
  });
  // Owner delivery watches settles from the start, so a cycle recovery settles is queued, never dropped.
  const durable = store.durable;
  const ownerGc: OwnerGcDeps = {
    home,
    log,
    hasOpenTask: (owner) => [...sup.tasks.values()].some((l) => l.rec.owner === owner && l.rec.status !== "closed"),
    holds: (owner) => delivery.holds(owner) || ownerAuth.connected(owner),
  };
  const collectIdle = (owner: string) =>
    void collectOwnerDir(ownerGc, owner).catch((e: unknown) =>
      log.warn({ owner, err: (e as Error).message }, "cannot remove an idle owner directory; kept"),
    );
  // Owners prove their id on every hello (src/daemon/delivery/owner-auth.ts).
  const ownerAuth = new OwnerAuth({ home, log, onIdle: collectIdle });
  const delivery = new DeliveryService({
    home,
    log,
    reportOf: (l) => sup.tasks.get(l.rec.taskId)?.reportOf(),
    ...(durable ? { durable } : {}),
    onOwnerLeft: collectIdle,
  });
  delivery.watch(sup);
  const latency = watchStatusLatency(sup); // settle → announcement, the last hour, for the board (after delivery's listener)
  logTaskFailures(sup, log); // from the start too: a failure recovery settles is logged like any other
  // Webhooks and notify commands (src/notify): queued durably from each settle, sent in the background.
  const notify = new NotifyService({
    home,
    log,
    config: () => config.notify,
    userAgent: `dsh-herdr/${version}`,
    ...(durable ? { durable } : {}),
  });
  await notify.start();
  notify.watch(sup);
  // Tasks on other machines go through their links (src/daemon/relay/relay.ts).
  const relay = new Relay(sup, { version, forwardDir: paths.links });
  // A landing a killed daemon left between its intent record and its record of the result: decided from git first.
  await recoverLandings(store, homePaths(home).tasks, log, config.land?.timeoutMs);
  // Reconcile every open task before the socket is served (remote ones: reattached to their machines).
  await recoverTasks(sup, runtimes, relay);
  await collectOwnerDirs(ownerGc);
  const configWatch = await watchConfig(home, {
    initialDigest: loadedDigest,
    overrides: opts.config ?? {},
    apply: (c) => {
      config = c;
      void relay.machinesChanged(); // `machine set`: a changed machine is linked again with its new entry
    },
    log,
  });
  // What every child gets and which pi runs it (names only): `doctor` compares these with the CLI's own.
  const childEnvAll = { ...process.env, ...(opts.childEnv ?? {}) };
  const envFacts = () => daemonEnvFacts(childEnvAll, opts.envFile);

  let handlers!: Parameters<typeof startDaemonBoard>[0]["handlers"];
  // One instance for the socket and the board: the schema files are read once per start.
  const schemas = new ProtocolSchemas();
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  const server = await startSocketServer({
    socketPath: paths.socket,
    ...(opts.limits ? { limits: opts.limits } : {}),
    schemas,
    version,
    log,
    authenticateChild: (taskId, token) => sup.authenticate(taskId, token),
    authenticateOwner: (conn, ownerId, secret) => ownerAuth.hello(conn, ownerId, secret),
    onChildConnected: (conn) => sup.childConnected(conn),
    taskOwner: (taskId) => taskOwnerOf(sup, taskId),
    // Every method but the server's own (hello, frame.page): a method without a handler fails to compile here.
    handlers: (handlers = {
      ...createOwnerHandlers(sup, delivery),
      ...createHandlers({
        sup,
        defaultRuntime: () => runtimes.pick(),
        stop: () => void stop(),
        relay,
        externalAgents: () => externalAgents(sup, config),
        status: () => ({
          pid: process.pid,
          version,
          protocol: PROTOCOL_VERSION,
          home,
          socketPath: paths.socket,
          startedAt,
          uptimeMs: Date.now() - startedAt,
          running: sup.admission.running,
          queued: sup.admission.queued,
          openTasks: [...sup.tasks.values()].filter((l) => sup.isOpen(l)).length,
          maxParallelAgents: config.maxParallelAgents,
          maxQueuedAgents: config.maxQueuedAgents,
          runtime: config.runtime,
          enabled: config.enabled,
          configDigest: configWatch.digest(),
          env: envFacts(),
        }),
      }),
    } satisfies ServedHandlers),
  });
  // The browser board (src/board): served by the same handlers; a board that cannot listen is logged, not fatal.
  const board = await startDaemonBoard({ home, handlers, schemas, config: () => config, log, latency });
  log.info({ home, socket: paths.socket, version, tasks: sup.tasks.size }, "daemon started");

  function stop(): Promise<void> {
    stopping ??= (async () => {
      log.info({}, "daemon stopping; open tasks keep running in their runtimes");
      sup.stopped = true;
      await abandonLandings(); // each ends its git processes and puts the checkout back
      configWatch.close();
      delivery.stop();
      notify.stop();
      await board?.close();
      await server.close();
      await relay.stop(); // remote tasks keep running there; the next daemon reattaches
      sup.admission.stop();
      for (const live of sup.tasks.values()) {
        // Its watches and timers end (a launch waiting for readiness is left to the next daemon's recovery).
        live.stop();
        await live.setupRun?.ended.catch(() => undefined); // its processes end before the daemon does
        // An event's effects still running (a close whose record is journaled, its closed result not yet written)
        // finish before the store closes: else the journal says closed and result.json the status before it.
        await live.effectsDone?.catch(() => undefined);
        await flushSnapshot(live);
      }
      await notify.idle(); // its records go through the commit log
      await store.close();
      await releaseGitLauncher();
      await lock.release();
      log.info({}, "daemon stopped");
      logDest.close();
      resolveDone();
    })();
    return stopping;
  }
  return { home, socketPath: homePaths(home).socket, supervisor: sup, relay, done, stop };
}

/** Herdr agents the daemon did not spawn, derived observationally (contract: idle/done → idle, ...); never touched. */
async function externalAgents(sup: Supervisor, config: Config): Promise<NonNullable<Result<"task.list">["external"]>> {
  const opts = {
    ...(config.herdrSocketPath ? { socketPath: config.herdrSocketPath } : {}),
    ...(config.herdrSession ? { session: config.herdrSession } : {}),
  };
  if (!(await herdrPing(opts)).ok) return [];
  // Ours = every pane any task of this home ever ran in, closed ones included (their panes may stay).
  const ours = new Set<string>();
  for (const row of sup.deps.store.listTasks({})) {
    const rec =
      sup.tasks.get(row.taskId)?.rec ?? (await sup.deps.store.readTask<TaskRecord>(row.taskId).catch(() => undefined));
    if (rec?.handle?.paneId) ours.add(rec.handle.paneId);
  }
  const r = await new HerdrClient(createTransport(opts)).call("agent.list", {});
  const agents = Array.isArray(r.agents) ? (r.agents as Record<string, unknown>[]) : [];
  return agents
    .filter((a) => typeof a.pane_id === "string" && !ours.has(a.pane_id))
    .map((a) => {
      const st = String(a.agent_status ?? "unknown");
      const herdrStatus: HerdrStatus =
        (["idle", "working", "blocked", "done"] as const).find((x) => x === st) ?? "unknown";
      return {
        external: true as const,
        name: String(a.name ?? ""),
        paneId: String(a.pane_id),
        herdrStatus,
        status: deriveStatus({ external: true, runtime: herdrStatus, sessionError: false }),
        ...(typeof a.cwd === "string" ? { cwd: a.cwd } : {}),
        ...(typeof a.agent === "string" ? { kind: a.agent } : {}),
      };
    });
}

export function assertNoDaemonError(e: unknown): never {
  throw e instanceof DshError ? e : new DshError("INTERNAL", String(e));
}
