// The socket client used by the CLI and both pi extensions: hello, request/response with timeouts, pushes.
import { createConnection, type Socket } from "node:net";
import { statSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Duplex } from "node:stream";
import { DshError, ERROR_CODES, type ErrorCode } from "../core/errors.js";
import {
  FrameReader,
  LARGE_PROTOCOL,
  MAX_FRAME_BYTES,
  MAX_LARGE_BYTES,
  encodeFrame,
  frameHead,
  frameTooLargeMessage,
} from "../protocol/frames.js";
import type { Params, PushMethod, PushParams, RequestMethod, Result } from "../protocol/methods.js";

export { FrameReader, encodeFrame, MAX_FRAME_BYTES } from "../protocol/frames.js";

export type ClientKind = "cli" | "owner" | "child";

export interface ConnectOptions {
  kind: ClientKind;
  ownerId?: string;
  /** An owner's proof: the secret its first hello was issued (HelloResult.secret). */
  secret?: string;
  taskId?: string;
  token?: string;
  version?: string;
  /** Extra hello fields (child: pid, sessionFile). */
  hello?: Record<string, unknown>;
  /** Per-request default timeout (ms). */
  timeoutMs?: number;
  connectTimeoutMs?: number;
  /** Push listeners in place before hello: a push can arrive in the same chunk as the hello reply. */
  pushes?: { [P in PushMethod]?: (params: PushParams<P>, method: string) => void };
  /**
   * A frame from the daemon that no request is waiting for could not be taken (over the frame limit, not UTF-8 or
   * JSON, a large push that could not be fetched), or an error came that names no request: what happened, by name.
   * Default: one line on stderr. Errors for a request reject that request instead.
   */
  onProtocolError?(e: DshError): void;
}

export type { HelloResult } from "../protocol/methods.js";
import type { HelloResult } from "../protocol/methods.js";

export interface RequestOptions {
  timeoutMs?: number;
}

/** A method's params and options; the params may be left out when the method takes none required. */
export type RequestArgs<M extends RequestMethod> =
  {} extends Params<M> ? [params?: Params<M>, opts?: RequestOptions] : [params: Params<M>, opts?: RequestOptions];

export interface DaemonClient {
  readonly hello: HelloResult;
  /** One request, typed by the protocol table (src/protocol/): what the method takes and what it answers. */
  request<M extends RequestMethod>(method: M, ...args: RequestArgs<M>): Promise<Result<M>>;
  /**
   * A request the compiler does not check: for tests that send what a typed caller cannot (a bad field, an
   * unknown method) and read the reply as they please. The daemon checks it all the same.
   */
  requestUnchecked<T = unknown>(method: string, params?: unknown, opts?: RequestOptions): Promise<T>;
  /** Listen for pushes of one method ("*" for all); returns an unsubscribe. */
  onPush<P extends string>(method: P, fn: (params: PushParams<P>, method: string) => void): () => void;
  onClose(fn: () => void): void;
  readonly closed: boolean;
  close(): void;
}

/** A home directory or a socket path (anything ending in .sock). */
export function socketPathFor(target: string): string {
  return target.endsWith(".sock") ? target : join(target, "daemon.sock");
}

/** A wire error `{code, message, data}` as the DshError the daemon threw: its data back as details. */
function toError(e: { code?: unknown; message?: unknown; data?: unknown }): DshError {
  const code = (ERROR_CODES as readonly string[]).includes(String(e.code)) ? (e.code as ErrorCode) : "INTERNAL";
  const data =
    typeof e.data === "object" && e.data !== null && !Array.isArray(e.data)
      ? (e.data as Record<string, unknown>)
      : undefined;
  return new DshError(code, typeof e.message === "string" ? e.message : "daemon error", data);
}

/** The socket refused us: its home belongs to another user (whose daemon serves only them), or its mode is off. */
function notYours(socketPath: string): DshError {
  const home = dirname(socketPath);
  const owner = statSync(home, { throwIfNoEntry: false })?.uid;
  const me = process.getuid?.();
  if (owner !== undefined && me !== undefined && owner !== me) {
    return new DshError(
      "HOME_NOT_YOURS",
      `${home} belongs to uid ${owner}, not to you (uid ${me}); its daemon serves only its owner. Use a home of your own: unset DSH_HERDR_HOME (default ~/.dsh/herdr) or set it to a directory you own.`,
    );
  }
  return new DshError(
    "HOME_UNSAFE",
    `permission denied on ${socketPath}; fix with \`chmod 700 ${home} && chmod 600 ${socketPath}\``,
  );
}

export async function connect(target: string, opts: ConnectOptions): Promise<DaemonClient> {
  const socketPath = socketPathFor(target);
  const socket: Socket = await new Promise((resolve, reject) => {
    const s = createConnection(socketPath);
    const timer = setTimeout(() => {
      s.destroy();
      reject(
        new DshError(
          "DAEMON_UNAVAILABLE",
          `no answer from ${socketPath}; start the daemon with \`dsh-herdr daemon start\``,
        ),
      );
    }, opts.connectTimeoutMs ?? 5000);
    s.once("connect", () => {
      clearTimeout(timer);
      resolve(s);
    });
    s.once("error", (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (err.code === "EACCES" || err.code === "EPERM") return reject(notYours(socketPath));
      reject(
        new DshError(
          "DAEMON_UNAVAILABLE",
          `cannot connect to ${socketPath} (${err.code ?? err.message}); start the daemon with \`dsh-herdr daemon start\``,
        ),
      );
    });
  });
  return clientOver(socket, opts);
}

/**
 * The protocol client over any byte stream to a daemon: a Unix socket here, or an ssh process's stdio bridged to a
 * remote daemon's socket (src/link/link.ts). The stream's "close" ends the client.
 */
export async function clientOver(socket: Duplex, opts: ConnectOptions): Promise<DaemonClient> {
  let nextId = 1;
  let closed = false;
  /** Waiting requests, oldest first (a Map keeps insertion order). */
  const pending = new Map<
    number,
    { method: string; resolve(v: unknown): void; reject(e: Error): void; timer: NodeJS.Timeout }
  >();
  const listeners = new Map<string, Set<(params: unknown, method: string) => void>>();
  const closers: (() => void)[] = [];
  const reader = new FrameReader();
  for (const [m, fn] of Object.entries(opts.pushes ?? {}))
    listeners.set(m, new Set([fn as (params: unknown, method: string) => void]));
  const report =
    opts.onProtocolError ?? ((e: DshError) => process.stderr.write(`dsh-herdr: ${e.code}: ${e.message}\n`));
  /** Pushes in arrival order: while a large one is fetched, the ones behind it wait. */
  let pushTail: Promise<void> | undefined;

  type Inbound = {
    id?: unknown;
    result?: unknown;
    error?: { code?: unknown; message?: unknown; data?: unknown };
    method?: string;
    params?: unknown;
    large?: { ref?: unknown; bytes?: unknown };
  };

  const settle = (id: number, fn: (p: { resolve(v: unknown): void; reject(e: Error): void }) => void) => {
    const p = pending.get(id);
    if (!p) return false;
    pending.delete(id);
    clearTimeout(p.timer);
    fn(p);
    return true;
  };

  const dispatchPush = (method: string, params: unknown) => {
    for (const key of [method, "*"]) {
      for (const fn of listeners.get(key) ?? []) {
        try {
          fn(params, method);
        } catch {
          /* a listener's bug must not break the connection */
        }
      }
    }
  };

  /** A frame held by reference (protocol 2): its bytes fetched page by page, then read as the frame itself. */
  const fetchLarge = async (large: { ref?: unknown; bytes?: unknown }): Promise<Inbound> => {
    const bytes = Number(large.bytes);
    if (typeof large.ref !== "string" || !Number.isSafeInteger(bytes) || bytes < 0)
      throw new DshError("INTERNAL", "the daemon sent a malformed large-frame reference; please report this bug");
    if (bytes > MAX_LARGE_BYTES)
      throw new DshError(
        "FRAME_TOO_LARGE",
        `a frame of ${bytes} bytes is over the ${MAX_LARGE_BYTES / (1024 * 1024)} MiB a client takes by reference; ask for less`,
      );
    const parts: Buffer[] = [];
    let offset = 0;
    for (;;) {
      const page = await client.request("frame.page", { ref: large.ref, offset });
      const buf = Buffer.from(page.data, "base64");
      parts.push(buf);
      offset += buf.length;
      if (page.done || buf.length === 0 || offset >= bytes) break;
    }
    const text = Buffer.concat(parts);
    if (text.length !== bytes)
      throw new DshError(
        "INTERNAL",
        `a large frame came to ${text.length} of its ${bytes} bytes; please report this bug`,
      );
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(text)) as Inbound;
  };

  const onMessage = (msg: Inbound) => {
    if (msg.id !== undefined && msg.id !== null) {
      const id = Number(msg.id);
      if (msg.large && pending.has(id)) {
        // The request is answered; its bytes come page by page, each page a request with its own timeout.
        const p = pending.get(id)!;
        clearTimeout(p.timer);
        void fetchLarge(msg.large).then(
          (whole) => settle(id, (q) => (whole.error ? q.reject(toError(whole.error)) : q.resolve(whole.result))),
          (e: unknown) => settle(id, (q) => q.reject(e as Error)),
        );
        return;
      }
      settle(id, (p) => (msg.error ? p.reject(toError(msg.error)) : p.resolve(msg.result)));
      return;
    }
    if (msg.error) {
      // An error tied to no request: a frame the daemon could not read (its id unknown), or the connection refused.
      const err = toError(msg.error);
      const fatal = err.code === "CONNECTION_LIMIT" || err.code === "TIMEOUT";
      const oldest = pending.keys().next();
      if (fatal) for (const id of [...pending.keys()]) settle(id, (p) => p.reject(err));
      else if (!oldest.done) settle(oldest.value, (p) => p.reject(err));
      else report(err);
      return;
    }
    if (typeof msg.method !== "string") return;
    const method = msg.method;
    if (msg.large) {
      const fetched = fetchLarge(msg.large);
      fetched.catch(() => undefined); // handled below, in its turn: not an unhandled rejection meanwhile
      const after = pushTail ?? Promise.resolve();
      const tail = after.then(async () => {
        try {
          const whole = await fetched;
          dispatchPush(method, whole.params);
        } catch (e) {
          const err = e instanceof DshError ? e : new DshError("INTERNAL", String(e));
          report(new DshError(err.code, `a ${method} push by reference could not be fetched: ${err.message}`));
        }
      });
      pushTail = tail;
      void tail.then(() => {
        if (pushTail === tail) pushTail = undefined;
      });
      return;
    }
    if (pushTail) {
      const tail = pushTail.then(() => dispatchPush(method, msg.params));
      pushTail = tail;
      void tail.then(() => {
        if (pushTail === tail) pushTail = undefined;
      });
      return;
    }
    dispatchPush(method, msg.params);
  };

  socket.on("data", (chunk: Buffer) => {
    for (const ev of reader.push(chunk)) {
      if (ev.kind === "oversized") {
        // Refused unread; tied to its request when its first bytes name one, else reported.
        const head = frameHead(ev.head);
        const what =
          head.id !== undefined
            ? `the daemon's reply to request ${head.id}`
            : `a frame from the daemon${head.method ? ` (a ${head.method} push)` : ""}`;
        const err = new DshError(
          "FRAME_TOO_LARGE",
          frameTooLargeMessage(what, ev.bytes, "the daemon should have sent it by reference; upgrade the daemon"),
        );
        if (typeof head.id !== "number" || !settle(head.id, (p) => p.reject(err))) report(err);
        continue;
      }
      if (ev.kind === "not-utf8") {
        report(new DshError("BAD_REQUEST", "a frame from the daemon is not valid UTF-8; it was dropped"));
        continue;
      }
      let msg: Inbound;
      try {
        msg = JSON.parse(ev.text) as Inbound;
      } catch {
        report(new DshError("BAD_REQUEST", "a frame from the daemon is not JSON; it was dropped"));
        continue;
      }
      if (typeof msg !== "object" || msg === null) continue;
      onMessage(msg);
    }
  });
  const onEnd = () => {
    if (closed) return;
    closed = true;
    for (const [, p] of pending) {
      clearTimeout(p.timer);
      p.reject(new DshError("DAEMON_UNAVAILABLE", "the daemon closed the connection; check `dsh-herdr daemon status`"));
    }
    pending.clear();
    for (const fn of closers) fn();
  };
  socket.on("close", onEnd);
  socket.on("error", () => socket.destroy());

  const client: DaemonClient = {
    hello: undefined as unknown as HelloResult,
    get closed() {
      return closed;
    },
    request<M extends RequestMethod>(method: M, ...args: RequestArgs<M>): Promise<Result<M>> {
      return client.requestUnchecked<Result<M>>(method, args[0], args[1]);
    },
    requestUnchecked<T>(method: string, params: unknown = {}, ro?: RequestOptions): Promise<T> {
      if (closed) return Promise.reject(new DshError("DAEMON_UNAVAILABLE", "connection closed; reconnect"));
      const id = nextId++;
      const frame = encodeFrame({ id, method, params });
      const bytes = Buffer.byteLength(frame);
      // The daemon's reader would refuse it: refused here at once, nothing sent.
      if (bytes > MAX_FRAME_BYTES)
        return Promise.reject(
          new DshError(
            "FRAME_TOO_LARGE",
            frameTooLargeMessage(
              `the ${method} request`,
              bytes,
              "send less per request: a prompt or message that large does not fit one; put the bulk in a file the task can read and name the file in the prompt",
              true,
            ),
          ),
        );
      const timeoutMs = ro?.timeoutMs ?? opts.timeoutMs ?? 30_000;
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(
            new DshError(
              "TIMEOUT",
              `${method} got no reply within ${timeoutMs} ms; check \`dsh-herdr daemon status\` and daemon.log`,
            ),
          );
        }, timeoutMs);
        pending.set(id, { method, resolve: resolve as (v: unknown) => void, reject, timer });
        socket.write(frame);
      });
    },
    onPush(method, fn) {
      let set = listeners.get(method);
      if (!set) listeners.set(method, (set = new Set()));
      // Pushes are dispatched by method name, so fn gets only its own method's params.
      const listener = fn as (params: unknown, method: string) => void;
      set.add(listener);
      return () => set!.delete(listener);
    },
    onClose(fn) {
      closers.push(fn);
    },
    close() {
      socket.end();
      socket.destroy();
      onEnd();
    },
  };
  // protocol 2: replies and pushes over the frame limit come by reference, fetched with frame.page.
  const helloParams: Record<string, unknown> = { kind: opts.kind, protocol: LARGE_PROTOCOL, ...(opts.hello ?? {}) };
  if (opts.version) helloParams.version = opts.version;
  if (opts.kind === "owner") {
    helloParams.ownerId = opts.ownerId;
    if (opts.secret) helloParams.secret = opts.secret;
  }
  if (opts.kind === "child") {
    helloParams.taskId = opts.taskId;
    helloParams.token = opts.token;
  }
  try {
    // Built field by field from the options: the daemon's schema checks the whole.
    (client as { hello: HelloResult }).hello = await client.requestUnchecked<HelloResult>("hello", helloParams);
  } catch (e) {
    client.close();
    throw e;
  }
  return client;
}

/** One request on a fresh cli connection. */
export async function call<M extends RequestMethod>(
  target: string,
  method: M,
  ...args: RequestArgs<M>
): Promise<Result<M>> {
  const c = await connect(target, { kind: "cli" });
  try {
    return await c.request(method, ...args);
  } finally {
    c.close();
  }
}
