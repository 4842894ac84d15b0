// One link per machine: `ssh ... <command> daemon connect` carries the daemon protocol to that machine's daemon
// (which `daemon connect` starts when none runs). The link says hello like the CLI does, reconnects with backoff
// when ssh or the remote daemon goes away, and reports up/down. A failure to connect is MACHINE_UNREACHABLE with
// ssh's own error line. Relaying tasks over it is not wired yet (docs/architecture.md, "Other machines").
import { EventEmitter } from "node:events";
import { Duplex } from "node:stream";
import { execa, type ResultPromise } from "execa";
import { clientOver, type DaemonClient, type HelloResult } from "../client/index.js";
import { DshError, isDshError } from "../core/errors.js";
import {
  backoffDelay,
  DEFAULT_BACKOFF,
  machineTarget,
  sshArgv,
  sshErrorLine,
  type BackoffPolicy,
  type MachineSpec,
  type SshOptions,
} from "../core/machines.js";
import { expandHome } from "../store/home.js";

export interface LinkOptions {
  /** The machine's label in config.json. */
  label: string;
  machine: MachineSpec;
  /** Our version, sent in hello. */
  version?: string;
  /** Environment for ssh (its HOME finds ~/.ssh); default process.env. */
  env?: NodeJS.ProcessEnv;
  /** The ssh client binary; default `ssh` on PATH. */
  sshBin?: string;
  ssh?: SshOptions;
  /** Reconnect after a drop or a failed attempt (default true); false makes a one-shot link. */
  reconnect?: boolean;
  backoff?: BackoffPolicy;
  /** For the hello, which waits for the remote daemon to start when it was down (default 60 s). */
  helloTimeoutMs?: number;
  /** Default per-request timeout (default 30 s). */
  requestTimeoutMs?: number;
  /** Jitter source in [0, 1) (tests pin it). */
  random?: () => number;
}

export type LinkState = "connecting" | "up" | "down" | "closed";

export interface LinkUp {
  hello: HelloResult;
  /** The ssh process carrying this connection. */
  sshPid: number | undefined;
}

export interface LinkDown {
  error: DshError;
  /** Epoch ms since when the machine has been unreachable (the first failure of this outage). */
  since: number;
  /** Delay until the next attempt; undefined when the link does not reconnect. */
  retryInMs: number | undefined;
}

export interface MachineLinkEvents {
  up: [LinkUp];
  down: [LinkDown];
  /** A daemon push (no id): method and params. */
  push: [string, unknown];
  closed: [];
}

interface Attempt {
  client: DaemonClient;
  ssh: ResultPromise;
  /** What ssh printed on stderr so far (capped). */
  stderr(): string;
}

const STDERR_CAP = 8192;

/** Ask `ssh` to run one connection's worth of `daemon connect`; resolves once the remote daemon said hello. */
async function openAttempt(o: LinkOptions): Promise<Attempt> {
  const spec = resolveSpec(o.machine, o.env ?? process.env);
  const ssh = execa(o.sshBin ?? "ssh", sshArgv(spec, ["daemon", "connect"], o.ssh), {
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
    buffer: false,
    reject: false,
    env: o.env ?? process.env,
    extendEnv: false,
  });
  let stderr = "";
  ssh.stderr!.on("data", (c: Buffer) => {
    if (stderr.length < STDERR_CAP) stderr += c.toString("utf8");
  });
  // Resolves once ssh exited and its pipes are drained (so stderr is whole).
  const exited = ssh.then((r) => r);
  ssh.stdin!.on("error", () => undefined); // EPIPE after ssh died: the exit handler reports it
  const stream = new Duplex({
    read() {},
    write(chunk, _enc, cb) {
      if (ssh.stdin!.destroyed) return cb(new Error("ssh stdin closed"));
      ssh.stdin!.write(chunk, () => cb());
    },
    final(cb) {
      ssh.stdin!.end();
      cb();
    },
    destroy(err, cb) {
      if (ssh.exitCode === null && ssh.signalCode === null) ssh.kill("SIGTERM");
      cb(err);
    },
  });
  ssh.stdout!.on("data", (c: Buffer) => stream.push(c));
  void exited.then(() => stream.destroy());

  try {
    const client = await clientOver(stream, {
      kind: "cli",
      ...(o.version !== undefined ? { version: o.version } : {}),
      timeoutMs: o.helloTimeoutMs ?? 60_000,
      pushes: {},
    });
    return { client, ssh, stderr: () => stderr };
  } catch (e) {
    stream.destroy();
    const r = await exited;
    throw unreachable(
      o.label,
      spec,
      stderr,
      r.exitCode,
      isDshError(e) && e.code === "TIMEOUT" ? "no hello from the remote daemon in time" : undefined,
    );
  }
}

/** The entry with `~` in its key and known_hosts paths expanded (as ssh gets them). */
export function resolveSpec(m: MachineSpec, env: NodeJS.ProcessEnv): MachineSpec {
  return {
    ...m,
    ...(m.identity !== undefined ? { identity: expandHome(m.identity, env) } : {}),
    ...(m.knownHosts !== undefined ? { knownHosts: expandHome(m.knownHosts, env) } : {}),
  };
}

function unreachable(
  label: string,
  m: MachineSpec,
  stderr: string,
  exitCode: number | undefined,
  reason?: string,
): DshError {
  const line = sshErrorLine(stderr);
  const why =
    line ??
    reason ??
    (exitCode !== undefined
      ? `ssh exited with code ${exitCode} and printed nothing`
      : "ssh ended before the remote daemon answered");
  const fix =
    exitCode === 255
      ? `check the address, the key and known_hosts with \`ssh -o BatchMode=yes${m.port !== undefined ? ` -p ${m.port}` : ""} ${m.ssh} true\``
      : `the remote command \`${m.command ?? "dsh-herdr"} daemon connect\` failed there (exit ${exitCode ?? "?"}); fix it on that machine, or remove the machine and add it again with the right --command`;
  return new DshError("MACHINE_UNREACHABLE", `machine ${label} (${machineTarget(m)}) is unreachable: ${why}; ${fix}`, {
    label,
    target: machineTarget(m),
    ...(line !== undefined ? { sshError: line } : {}),
    ...(exitCode !== undefined ? { exitCode } : {}),
    stderr: stderr.slice(0, STDERR_CAP),
  });
}

/** A one-shot connection: resolves the connected client (close it when done) or throws MACHINE_UNREACHABLE. */
export async function connectMachine(o: LinkOptions): Promise<{ client: DaemonClient; close(): Promise<void> }> {
  const a = await openAttempt(o);
  return {
    client: a.client,
    async close() {
      a.client.close();
      await a.ssh.then(
        () => undefined,
        () => undefined,
      );
    },
  };
}

/**
 * A long-lived link with reconnect. `start()` begins connecting; "up" fires after each hello, "down" after each
 * drop or failed attempt (with the error and when the outage began), then the next attempt follows after
 * `backoffDelay`. Requests while down fail at once with MACHINE_UNREACHABLE (callers decide to wait or warn).
 */
export class MachineLink extends EventEmitter<MachineLinkEvents> {
  private _state: LinkState = "down";
  private current: Attempt | undefined;
  private failures = 0;
  private downSince: number | undefined;
  private lastError: DshError | undefined;
  private timer: NodeJS.Timeout | undefined;
  private started = false;

  constructor(private readonly opts: LinkOptions) {
    super();
  }

  get label(): string {
    return this.opts.label;
  }

  get state(): LinkState {
    return this._state;
  }

  /** The remote daemon's hello while up. */
  get hello(): HelloResult | undefined {
    return this.current?.client.hello;
  }

  /** The protocol client of the current connection while up (its pushes also come as "push" events). */
  get client(): DaemonClient | undefined {
    return this._state === "up" ? this.current?.client : undefined;
  }

  /** The ssh process of the current connection (tests kill it to cut the link). */
  get sshPid(): number | undefined {
    return this.current?.ssh.pid;
  }

  /** Why the link is down, while it is. */
  get error(): DshError | undefined {
    return this._state === "up" ? undefined : this.lastError;
  }

  start(): this {
    if (this.started) return this;
    this.started = true;
    void this.attempt();
    return this;
  }

  /** Resolves when the link is up; rejects with the next attempt's error when that fails (or on close). */
  ready(): Promise<LinkUp> {
    if (this._state === "up" && this.current)
      return Promise.resolve({ hello: this.current.client.hello, sshPid: this.current.ssh.pid });
    return new Promise((resolve, reject) => {
      const onUp = (u: LinkUp) => {
        this.off("down", onDown);
        this.off("closed", onClosed);
        resolve(u);
      };
      const onDown = (d: LinkDown) => {
        this.off("up", onUp);
        this.off("closed", onClosed);
        reject(d.error);
      };
      const onClosed = () => {
        this.off("up", onUp);
        this.off("down", onDown);
        reject(new DshError("MACHINE_UNREACHABLE", `the link to machine ${this.label} was closed`));
      };
      this.once("up", onUp);
      this.once("down", onDown);
      this.once("closed", onClosed);
    });
  }

  async request<T = unknown>(method: string, params: unknown = {}, o: { timeoutMs?: number } = {}): Promise<T> {
    const c = this.current?.client;
    if (this._state !== "up" || c === undefined || c.closed) throw this.unreachableNow();
    try {
      return await c.request<T>(method, params, { timeoutMs: o.timeoutMs ?? this.opts.requestTimeoutMs ?? 30_000 });
    } catch (e) {
      // The inner client knows only that its stream closed; over a link that means the machine went away.
      if (isDshError(e) && e.code === "DAEMON_UNAVAILABLE" && c.closed) throw this.unreachableNow();
      throw e;
    }
  }

  /** Stop for good: no more attempts; the current ssh is ended. */
  async close(): Promise<void> {
    if (this._state === "closed") return;
    this._state = "closed";
    if (this.timer) clearTimeout(this.timer);
    const cur = this.current;
    this.current = undefined;
    if (cur) {
      cur.client.close();
      await cur.ssh.then(
        () => undefined,
        () => undefined,
      );
    }
    this.emit("closed");
  }

  private unreachableNow(): DshError {
    const since = this.downSince !== undefined ? ` since ${new Date(this.downSince).toISOString()}` : "";
    const base = this.lastError;
    if (base === undefined)
      return new DshError(
        "MACHINE_UNREACHABLE",
        `machine ${this.label} is not connected yet${since}; wait for the link (it reconnects on its own)`,
      );
    return new DshError("MACHINE_UNREACHABLE", `${base.message}${since}`, base.details);
  }

  private async attempt(): Promise<void> {
    if (this._state === "closed") return;
    this._state = "connecting";
    let a: Attempt;
    try {
      a = await openAttempt(this.opts);
    } catch (e) {
      this.failed(
        isDshError(e) ? e : new DshError("MACHINE_UNREACHABLE", `machine ${this.label}: ${(e as Error).message}`),
      );
      return;
    }
    if ((this._state as LinkState) === "closed") {
      a.client.close();
      return;
    }
    this.current = a;
    this.failures = 0;
    this.downSince = undefined;
    this.lastError = undefined;
    this._state = "up";
    a.client.onPush("*", (params, method) => this.emit("push", method, params));
    a.client.onClose(() => {
      if (this.current !== a) return;
      this.current = undefined;
      if (this._state === "closed") return;
      // Wait for ssh to exit so its error line (if any) goes with the drop.
      void a.ssh.then(
        (r) => this.failed(dropError(this.label, this.opts.machine, r.exitCode, a.stderr())),
        () => this.failed(new DshError("MACHINE_UNREACHABLE", `the link to machine ${this.label} dropped`)),
      );
    });
    this.emit("up", { hello: a.client.hello, sshPid: a.ssh.pid });
  }

  private failed(error: DshError): void {
    if (this._state === "closed") return;
    this._state = "down";
    this.lastError = error;
    this.downSince ??= Date.now();
    const retryInMs =
      this.opts.reconnect === false
        ? undefined
        : backoffDelay(this.failures, (this.opts.random ?? Math.random)(), this.opts.backoff ?? DEFAULT_BACKOFF);
    this.failures++;
    this.emit("down", { error, since: this.downSince, retryInMs });
    if (retryInMs !== undefined) this.timer = setTimeout(() => void this.attempt(), retryInMs);
  }
}

function dropError(label: string, m: MachineSpec, exitCode: number | undefined, stderr: string): DshError {
  const line = sshErrorLine(stderr);
  return new DshError(
    "MACHINE_UNREACHABLE",
    `the link to machine ${label} (${machineTarget(m)}) dropped${line !== undefined ? `: ${line}` : exitCode !== undefined ? ` (ssh exit ${exitCode})` : ""}; it reconnects on its own`,
    {
      label,
      target: machineTarget(m),
      ...(line !== undefined ? { sshError: line } : {}),
      ...(exitCode !== undefined ? { exitCode } : {}),
    },
  );
}
