// A Herdr client gated on `ping`: every call first makes sure the server speaks protocol 20 or newer (0.8.x: 20,
// 0.9: 22; both are tested against the fake Herdr).
import { DshError, isDshError } from "../../core/errors.js";
import { CliTransport } from "./cli-transport.js";
import { SocketTransport } from "./socket-transport.js";
import { resolveHerdrSocketPath } from "./socket-path.js";
import { type HerdrResult, type HerdrTransport, MIN_PROTOCOL } from "./transport.js";

export { MIN_PROTOCOL };

export interface HerdrClientOptions {
  socketPath?: string;
  /** Named Herdr session. */
  session?: string;
  /** Herdr --machine label: talk through the `herdr` CLI instead of the local socket. */
  machine?: string;
  /** The `herdr` binary for the CLI transport (default: $HERDR_BIN, else `herdr`). */
  herdrBin?: string;
  env?: NodeJS.ProcessEnv;
  /** Per-request timeout (default 10 s). */
  timeoutMs?: number;
  /** Use this transport as is (tests). */
  transport?: HerdrTransport;
}

export function createTransport(opts: HerdrClientOptions = {}): HerdrTransport {
  if (opts.transport) return opts.transport;
  const env = opts.env ?? process.env;
  if (opts.machine !== undefined) {
    const cli: ConstructorParameters<typeof CliTransport>[0] = {
      bin: opts.herdrBin ?? env.HERDR_BIN ?? "herdr",
      machine: opts.machine,
      env,
    };
    if (opts.session !== undefined) cli.session = opts.session;
    if (opts.timeoutMs !== undefined) cli.timeoutMs = opts.timeoutMs;
    return new CliTransport(cli);
  }
  const pathOpts: Parameters<typeof resolveHerdrSocketPath>[0] = { env };
  if (opts.socketPath !== undefined) pathOpts.socketPath = opts.socketPath;
  if (opts.session !== undefined) pathOpts.session = opts.session;
  return new SocketTransport(resolveHerdrSocketPath(pathOpts), opts.timeoutMs);
}

export interface ServerInfo {
  version: string;
  protocol: number;
}

export class HerdrClient {
  private ready?: Promise<ServerInfo>;

  constructor(readonly transport: HerdrTransport) {}

  /** Pings once (retried on the next call if it failed) and refuses servers older than protocol 20. */
  server(): Promise<ServerInfo> {
    this.ready ??= ping(this.transport).catch((e: unknown) => {
      delete this.ready;
      throw e;
    });
    return this.ready;
  }

  async call(method: string, params: Record<string, unknown>, opts?: { timeoutMs?: number }): Promise<HerdrResult> {
    await this.server();
    return this.transport.request(method, params, opts);
  }
}

async function ping(transport: HerdrTransport): Promise<ServerInfo> {
  const pong = await transport.request("ping", {});
  const protocol = pong.protocol;
  const version = typeof pong.version === "string" ? pong.version : "unknown";
  if (pong.type !== "pong" || typeof protocol !== "number") {
    throw new DshError(
      "HERDR_PROTOCOL",
      `Herdr answered ping with ${JSON.stringify(pong).slice(0, 120)}, not a pong with a protocol. Fix: check that the socket belongs to Herdr`,
    );
  }
  if (protocol < MIN_PROTOCOL) {
    throw new DshError(
      "HERDR_TOO_OLD",
      `Herdr ${version} speaks protocol ${protocol}; dsh-herdr needs protocol ${MIN_PROTOCOL} or newer. Fix: update Herdr (herdr update), or use --runtime tmux`,
      { protocol, version },
    );
  }
  return { version, protocol };
}

export interface PingOutcome {
  ok: boolean;
  protocol?: number;
  version?: string;
  /** Why not ok: the DshError code and message. */
  reason?: string;
  code?: string;
}

/** For runtime selection: never throws. */
export async function herdrPing(opts: HerdrClientOptions = {}): Promise<PingOutcome> {
  try {
    const info = await new HerdrClient(createTransport(opts)).server();
    return { ok: true, protocol: info.protocol, version: info.version };
  } catch (e) {
    const err = isDshError(e) ? e : new DshError("HERDR_UNAVAILABLE", String(e));
    const out: PingOutcome = { ok: false, reason: err.message, code: err.code };
    if (typeof err.details?.protocol === "number") out.protocol = err.details.protocol;
    return out;
  }
}
