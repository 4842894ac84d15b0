// One link per machine: `ssh ... <command> daemon connect` carries the daemon protocol to that machine's daemon
// (which `daemon connect` starts when none runs). The link says hello like the CLI does, reconnects with backoff
// when ssh or the remote daemon goes away, and reports up/down. The ssh transport is link-ssh.ts, its errors
// link-errors.ts. Relaying tasks over it: relay.ts (docs/architecture.md, "Other machines").
import { EventEmitter } from "node:events";
import type { DaemonClient, HelloResult, RequestArgs, RequestOptions } from "../client/index.js";
import type { Params, RequestMethod, Result } from "../protocol/methods.js";
import { DshError, isDshError } from "../core/errors.js";
import { backoffDelay, DEFAULT_BACKOFF } from "../core/machines.js";
import { dropError } from "./link-errors.js";
import { openForward } from "./link-forward.js";
import { openAttempt, resolveSpec, type Attempt } from "./link-ssh.js";
import type { LinkDown, LinkOptions, LinkState, LinkUp, MachineLinkEvents } from "./link-types.js";

export type { LinkDown, LinkOptions, LinkState, LinkUp, MachineLinkEvents } from "./link-types.js";
export { resolveSpec };

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
  /** The server refused a forward: this link stays on the bridge (a daemon restart tries again). */
  private forwardOff = false;
  private forwardError: DshError | undefined;

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

  /** How the current connection's frames travel (tests and the remote benches read it). */
  get transport(): Attempt["transport"] | undefined {
    return this.current?.transport;
  }

  /** Why the current connection is on the bridge when a forward was tried (FORWARD_FAILED with ssh's line). */
  get forwardFailure(): DshError | undefined {
    return this.current?.transport === "bridge" ? this.forwardError : undefined;
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
    if (this._state === "up" && this.current) return Promise.resolve(this.upOf(this.current));
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

  async request<M extends RequestMethod>(method: M, ...args: RequestArgs<M>): Promise<Result<M>> {
    const [params, o = {}] = args as [Params<M> | undefined, RequestOptions | undefined];
    const c = this.current?.client;
    if (this._state !== "up" || c === undefined || c.closed) throw this.unreachableNow();
    try {
      const timeoutMs = o.timeoutMs ?? this.opts.requestTimeoutMs ?? 30_000;
      return await c.request(method, ...([params, { timeoutMs }] as RequestArgs<M>));
    } catch (e) {
      // The inner client knows only that its stream closed; over a link that means the link dropped under us.
      if (isDshError(e) && e.code === "DAEMON_UNAVAILABLE" && c.closed)
        throw new DshError(
          "MACHINE_UNREACHABLE",
          `the link to machine ${this.label} dropped while waiting for the reply to ${method}; it reconnects on its own`,
          { label: this.label, dropped: true, method },
        );
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
      a = await this.forwarded(await openAttempt(this.opts));
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
      // Down at once (a request meanwhile is told the link dropped, not "not connected yet"); the event follows
      // once ssh exited, with its error line.
      this._state = "down";
      this.lastError = new DshError("MACHINE_UNREACHABLE", `the link to machine ${this.label} dropped`, {
        label: this.label,
        dropped: true,
      });
      this.downSince ??= Date.now();
      // Wait for ssh to exit so its error line (if any) goes with the drop.
      void a.ssh.then(
        (r) => this.failed(dropError(this.label, this.opts.machine, r.exitCode, a.stderr())),
        () => this.failed(new DshError("MACHINE_UNREACHABLE", `the link to machine ${this.label} dropped`)),
      );
    });
    this.emit("up", this.upOf(a));
  }

  private upOf(a: Attempt): LinkUp {
    return {
      hello: a.client.hello,
      sshPid: a.ssh.pid,
      transport: a.transport,
      ...(a.transport === "bridge" && this.forwardError ? { forwardError: this.forwardError } : {}),
    };
  }

  /**
   * The bridge's connection traded for one over a forward to the daemon's socket, which its hello named; the bridge
   * when the forward cannot be made (the server refuses: not tried again on this link).
   */
  private async forwarded(bridge: Attempt): Promise<Attempt> {
    const dir = this.opts.forwardDir;
    const remoteSocket = bridge.client.hello.socketPath;
    if (dir === undefined || remoteSocket === undefined || this.forwardOff || this._state === "closed") return bridge;
    try {
      const f = await openForward(
        this.opts,
        resolveSpec(this.opts.machine, this.opts.env ?? process.env),
        remoteSocket,
        dir,
      );
      this.forwardError = undefined;
      bridge.client.close(); // its ssh and the bridge there exit; the remote daemon stays
      return f;
    } catch (e) {
      const err = isDshError(e) ? e : new DshError("FORWARD_FAILED", `machine ${this.label}: ${(e as Error).message}`);
      this.forwardError = err;
      if (err.details?.["refused"] === true) this.forwardOff = true;
      if (bridge.client.closed) throw dropError(this.label, this.opts.machine, undefined, bridge.stderr());
      return bridge;
    }
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
