// Herdr's local socket: newline JSON, one request per connection; events.subscribe keeps its connection open.
import { createConnection, type Socket } from "node:net";
import { DshError } from "../../core/errors.js";
import { parseEnvelope, protocolError } from "./envelope.js";
import {
  DEFAULT_TIMEOUT_MS,
  type HerdrEvent,
  type HerdrResult,
  type HerdrSubscription,
  type HerdrTransport,
  type SubscribeHandlers,
} from "./transport.js";

const MAX_LINE_BYTES = 16 * 1024 * 1024;
let counter = 0;
const nextId = (): string => `dsh_${process.pid}_${++counter}`;

export class SocketTransport implements HerdrTransport {
  readonly kind = "socket" as const;

  constructor(
    readonly socketPath: string,
    private readonly defaultTimeoutMs = DEFAULT_TIMEOUT_MS,
  ) {}

  request(method: string, params: Record<string, unknown>, opts: { timeoutMs?: number } = {}): Promise<HerdrResult> {
    const id = nextId();
    const timeoutMs = opts.timeoutMs ?? this.defaultTimeoutMs;
    return new Promise((resolve, reject) => {
      const sock = createConnection(this.socketPath);
      const reader = new LineReader();
      let settled = false;
      const finish = (err: Error | null, result?: HerdrResult): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        sock.destroy();
        if (err) reject(err);
        else resolve(result as HerdrResult);
      };
      const timer = setTimeout(() => {
        finish(
          new DshError(
            "TIMEOUT",
            `Herdr did not answer ${method} within ${timeoutMs} ms. Fix: check the Herdr server (herdr status), or raise the timeout`,
            { method },
          ),
        );
      }, timeoutMs);
      sock.on("connect", () => sock.write(`${JSON.stringify({ id, method, params })}\n`));
      sock.on("data", (chunk) => {
        try {
          const line = reader.push(chunk, method);
          if (line !== undefined) finish(null, parseEnvelope(line, id, method));
        } catch (e) {
          finish(e as Error);
        }
      });
      sock.on("error", (e: NodeJS.ErrnoException) => finish(unavailable(this.socketPath, method, e)));
      sock.on("close", () => finish(dropped(this.socketPath, method)));
    });
  }

  subscribe(subscriptions: Record<string, unknown>[], handlers: SubscribeHandlers): Promise<HerdrSubscription> {
    const id = nextId();
    const method = "events.subscribe";
    return new Promise((resolve, reject) => {
      const sock: Socket = createConnection(this.socketPath);
      const reader = new LineReader();
      let acked = false;
      let closed = false;
      const timer = setTimeout(
        () => fail(new DshError("TIMEOUT", `Herdr did not acknowledge ${method} within ${this.defaultTimeoutMs} ms`)),
        this.defaultTimeoutMs,
      );
      const fail = (err: Error): void => {
        clearTimeout(timer);
        if (closed) return;
        closed = true;
        sock.destroy();
        if (acked) handlers.onEnd(err);
        else reject(err);
      };
      sock.on("connect", () => sock.write(`${JSON.stringify({ id, method, params: { subscriptions } })}\n`));
      sock.on("data", (chunk) => {
        try {
          for (let line = reader.push(chunk, method); line !== undefined; line = reader.next()) {
            if (closed) return;
            if (!acked) {
              parseEnvelope(line, id, method);
              acked = true;
              clearTimeout(timer);
              resolve({
                close: () => {
                  closed = true;
                  sock.destroy();
                },
              });
            } else {
              handlers.onEvent(parseEvent(line));
            }
          }
        } catch (e) {
          fail(e as Error);
        }
      });
      sock.on("error", (e: NodeJS.ErrnoException) => fail(unavailable(this.socketPath, method, e)));
      sock.on("close", () => fail(dropped(this.socketPath, method)));
    });
  }
}

function parseEvent(line: string): HerdrEvent {
  let msg: unknown;
  try {
    msg = JSON.parse(line);
  } catch {
    throw protocolError("events.subscribe", `a non-JSON event line`);
  }
  const e = msg as { event?: unknown; data?: unknown };
  if (typeof e?.event !== "string" || typeof e.data !== "object" || e.data === null) {
    throw protocolError("events.subscribe", `an event without event/data`);
  }
  return { event: e.event, data: e.data as Record<string, unknown> };
}

/** Splits a byte stream into lines; keeps the rest for the next call. */
class LineReader {
  private buf = "";
  private lines: string[] = [];

  push(chunk: Buffer, method: string): string | undefined {
    this.buf += chunk.toString("utf8");
    if (this.buf.length > MAX_LINE_BYTES) throw protocolError(method, `a line over ${MAX_LINE_BYTES} bytes`);
    const parts = this.buf.split("\n");
    this.buf = parts.pop() ?? "";
    this.lines.push(...parts.filter((l) => l.trim() !== ""));
    return this.next();
  }

  next(): string | undefined {
    return this.lines.shift();
  }
}

function unavailable(path: string, method: string, e: NodeJS.ErrnoException): DshError {
  return new DshError(
    "HERDR_UNAVAILABLE",
    `No Herdr server answers at ${path} (${e.code ?? e.message}). Fix: start Herdr (herdr server), or point HERDR_SOCKET_PATH / --session at a running one`,
    { method, path },
  );
}

function dropped(path: string, method: string): DshError {
  return new DshError(
    "HERDR_UNAVAILABLE",
    `Herdr at ${path} closed the connection before answering ${method}. Fix: check the server (herdr status); it may be restarting`,
    { method, path },
  );
}
