// The owner extension's link to the daemon: one connection per active owner (pi session id). A session switch
// closes the old connection, so the daemon sees that owner as inactive and queues its deliveries; the new
// connection attaches and receives what is pending. Lost connections are retried quietly.
import { join } from "node:path";
import { homedir } from "node:os";
import { connect, type DaemonClient, type RequestArgs } from "../client/index.js";
import type { Params, RequestMethod, Result } from "../protocol/methods.js";
import { DshError } from "../core/errors.js";
import { cardOfPushed, type DeliveryPayload } from "../core/crew/crew-delivery.js";

export interface PushedDelivery extends DeliveryPayload {
  queuedAt: number;
}

/** DSH_HERDR_HOME, else ~/.dsh/herdr: the home whose daemon this pi's owner extension talks to. */
export function ownerHome(env: NodeJS.ProcessEnv = process.env): string {
  return env.DSH_HERDR_HOME?.trim() || join(env.HOME ?? homedir(), ".dsh", "herdr");
}

/** DSH_HERDR_SOCKET, else <DSH_HERDR_HOME or ~/.dsh/herdr>/daemon.sock. */
export function ownerSocketPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.DSH_HERDR_SOCKET) return env.DSH_HERDR_SOCKET;
  return join(ownerHome(env), "daemon.sock");
}

export interface OwnerLinkOptions {
  socketPath: string;
  onDelivery(d: PushedDelivery, ownerId: string): void;
  /** Open sessions changed (a task.status push): the status context re-reads crew_status at its next boundary. */
  onStatusChange?(): void;
  /**
   * The daemon issued this owner's secret (its first hello): keep it in the session. Every later hello presents it
   * (secretOf), and a session forked from this one presents it to owner.move.
   */
  onSecret?(ownerId: string, secret: string): void;
  /** The secret this owner was issued, when this process knows it. */
  secretOf?(ownerId: string): string | undefined;
  /** A frame or error from the daemon that no request was waiting for (src/client/index.ts onProtocolError). */
  onProtocolError?(e: DshError): void;
  /**
   * Start the home's daemon (a spawn found none running, as `dsh-herdr spawn` does); absent when the socket is not a
   * home's (DSH_HERDR_SOCKET), where no start could make it answer.
   */
  startDaemon?(): Promise<{ pid: number; alreadyRunning: boolean }>;
  /** This link started the daemon: said in the TUI, so the person knows a process now runs beside pi. */
  onDaemonStarted?(pid: number): void;
}

/** The requests that start the daemon when none answers: a delegation, as in the CLI; the rest report it. */
const STARTS_DAEMON = new Set(["task.spawn"]);

export class OwnerLink {
  private client: DaemonClient | undefined;
  private connecting: Promise<DaemonClient> | undefined;
  private owner: string | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** The last hello was refused NOT_OWNER: retried slowly (the secret may still arrive, e.g. a resumed session). */
  private refused = false;

  constructor(private readonly opts: OwnerLinkOptions) {}

  get ownerId(): string | undefined {
    return this.owner;
  }

  /** Become (or stay) this owner; a different id drops the old connection first. */
  async setOwner(ownerId: string): Promise<void> {
    if (this.owner === ownerId && this.client && !this.client.closed) return;
    this.owner = ownerId;
    this.stopped = false;
    this.dropConnection();
    await this.ensure().catch(() => this.scheduleRetry());
  }

  /** One request as the current owner; connects on demand. Daemon errors keep their code. */
  async request<M extends RequestMethod>(method: M, params: Params<M>, timeoutMs = 30_000): Promise<Result<M>> {
    const c = await this.ensure().catch(async (e: unknown) => {
      if (!(e instanceof DshError) || e.code !== "DAEMON_UNAVAILABLE" || this.stopped) throw e;
      if (!STARTS_DAEMON.has(method) || !this.opts.startDaemon) throw e;
      const started = await this.opts.startDaemon();
      if (!started.alreadyRunning) this.opts.onDaemonStarted?.(started.pid);
      return this.ensure();
    });
    return c.request(method, ...([params, { timeoutMs }] as RequestArgs<M>));
  }

  /** Stop for good (pi is quitting): no more retries. */
  close(): void {
    this.stopped = true;
    this.dropConnection();
  }

  private dropConnection(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    const c = this.client;
    this.client = undefined;
    this.connecting = undefined;
    c?.close();
  }

  private ensure(): Promise<DaemonClient> {
    if (this.client && !this.client.closed) return Promise.resolve(this.client);
    if (this.stopped) return Promise.reject(new DshError("DAEMON_UNAVAILABLE", "the owner extension is shut down"));
    const ownerId = this.owner;
    if (!ownerId)
      return Promise.reject(new DshError("BAD_STATE", "no pi session yet; retry once the session has started"));
    this.connecting ??= (async () => {
      try {
        const secret = this.opts.secretOf?.(ownerId);
        const c = await connect(this.opts.socketPath, {
          kind: "owner",
          ownerId,
          connectTimeoutMs: 3000,
          ...(secret ? { secret } : {}),
          ...(this.opts.onProtocolError ? { onProtocolError: this.opts.onProtocolError } : {}),
        }).catch((e: unknown) => {
          this.refused = e instanceof DshError && e.code === "NOT_OWNER";
          throw e;
        });
        this.refused = false;
        if (this.owner !== ownerId || this.stopped) {
          c.close();
          throw new DshError("BAD_STATE", "the pi session changed while connecting; retry");
        }
        // The push carries the report once (in model): the card's is filled back in.
        c.onPush("owner.delivery", (p: PushedDelivery) => this.opts.onDelivery(cardOfPushed(p), ownerId));
        c.onPush("task.status", () => this.opts.onStatusChange?.());
        c.onClose(() => {
          if (this.client === c) {
            this.client = undefined;
            this.scheduleRetry();
          }
        });
        this.client = c;
        // The owner's first hello was issued its secret: kept before anything else.
        if (c.hello.secret && this.owner === ownerId) this.opts.onSecret?.(ownerId, c.hello.secret);
        // Attach: the daemon marks this owner active and pushes its pending deliveries; subscribe: status pushes.
        await c.request("owner.attach", {}, { timeoutMs: 10_000 }).catch(() => undefined);
        await c.request("task.subscribe", {}, { timeoutMs: 10_000 }).catch(() => undefined);
        return c;
      } finally {
        this.connecting = undefined;
      }
    })();
    return this.connecting;
  }

  private scheduleRetry(): void {
    if (this.stopped || this.retryTimer || !this.owner) return;
    this.retryTimer = setTimeout(
      () => {
        this.retryTimer = undefined;
        void this.ensure().catch(() => this.scheduleRetry());
      },
      this.refused ? 30_000 : 1000,
    );
    this.retryTimer.unref();
  }
}
