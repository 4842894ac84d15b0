// The socket client used by the CLI and both pi extensions: hello, request/response with timeouts, pushes.
import { createConnection, type Socket } from "node:net";
import { statSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Duplex } from "node:stream";
import { DshError, ERROR_CODES, type ErrorCode } from "../core/errors.js";
import { FrameReader, encodeFrame } from "./frames.js";

export { FrameReader, encodeFrame, MAX_FRAME_BYTES } from "./frames.js";

export type ClientKind = "cli" | "owner" | "child";

export interface ConnectOptions {
  kind: ClientKind;
  ownerId?: string;
  taskId?: string;
  token?: string;
  version?: string;
  /** Extra hello fields (child: pid, sessionFile). */
  hello?: Record<string, unknown>;
  /** Per-request default timeout (ms). */
  timeoutMs?: number;
  connectTimeoutMs?: number;
  /** Push listeners in place before hello: a push can arrive in the same chunk as the hello reply. */
  pushes?: Record<string, (params: any, method: string) => void>;
}

export interface HelloResult {
  daemonVersion: string;
  protocol: number;
  pid: number;
  kind: ClientKind;
}

export interface DaemonClient {
  readonly hello: HelloResult;
  request<T = unknown>(method: string, params?: unknown, opts?: { timeoutMs?: number }): Promise<T>;
  /** Listen for pushes of one method ("*" for all); returns an unsubscribe. */
  onPush(method: string, fn: (params: any, method: string) => void): () => void;
  onClose(fn: () => void): void;
  readonly closed: boolean;
  close(): void;
}

/** A home directory or a socket path (anything ending in .sock). */
export function socketPathFor(target: string): string {
  return target.endsWith(".sock") ? target : join(target, "daemon.sock");
}

function toError(e: { code?: unknown; message?: unknown }): DshError {
  const code = (ERROR_CODES as readonly string[]).includes(String(e.code)) ? (e.code as ErrorCode) : "INTERNAL";
  return new DshError(code, typeof e.message === "string" ? e.message : "daemon error");
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
 * remote daemon's socket (src/remote/link.ts). The stream's "close" ends the client.
 */
export async function clientOver(socket: Duplex, opts: ConnectOptions): Promise<DaemonClient> {
  let nextId = 1;
  let closed = false;
  const pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void; timer: NodeJS.Timeout }>();
  const listeners = new Map<string, Set<(params: any, method: string) => void>>();
  const closers: (() => void)[] = [];
  const reader = new FrameReader();
  for (const [m, fn] of Object.entries(opts.pushes ?? {})) listeners.set(m, new Set([fn]));

  socket.on("data", (chunk: Buffer) => {
    for (const ev of reader.push(chunk)) {
      if (ev.kind !== "frame") continue;
      let msg: {
        id?: unknown;
        result?: unknown;
        error?: { code?: unknown; message?: unknown };
        method?: string;
        params?: unknown;
      };
      try {
        msg = JSON.parse(ev.text);
      } catch {
        continue;
      }
      if (msg.id !== undefined && msg.id !== null) {
        const p = pending.get(Number(msg.id));
        if (!p) continue;
        pending.delete(Number(msg.id));
        clearTimeout(p.timer);
        if (msg.error) p.reject(toError(msg.error));
        else p.resolve(msg.result);
      } else if (typeof msg.method === "string") {
        for (const key of [msg.method, "*"]) {
          for (const fn of listeners.get(key) ?? []) {
            try {
              fn(msg.params, msg.method);
            } catch {
              /* a listener's bug must not break the connection */
            }
          }
        }
      }
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
    request<T>(method: string, params: unknown = {}, ro?: { timeoutMs?: number }): Promise<T> {
      if (closed) return Promise.reject(new DshError("DAEMON_UNAVAILABLE", "connection closed; reconnect"));
      const id = nextId++;
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
        pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
        socket.write(encodeFrame({ id, method, params }));
      });
    },
    onPush(method, fn) {
      let set = listeners.get(method);
      if (!set) listeners.set(method, (set = new Set()));
      set.add(fn);
      return () => set!.delete(fn);
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
  const helloParams: Record<string, unknown> = { kind: opts.kind, ...(opts.hello ?? {}) };
  if (opts.version) helloParams.version = opts.version;
  if (opts.kind === "owner") helloParams.ownerId = opts.ownerId;
  if (opts.kind === "child") {
    helloParams.taskId = opts.taskId;
    helloParams.token = opts.token;
  }
  try {
    (client as { hello: HelloResult }).hello = await client.request<HelloResult>("hello", helloParams);
  } catch (e) {
    client.close();
    throw e;
  }
  return client;
}

/** One request on a fresh cli connection. */
export async function call<T = unknown>(
  target: string,
  method: string,
  params?: unknown,
  opts?: { timeoutMs?: number },
): Promise<T> {
  const c = await connect(target, { kind: "cli" });
  try {
    return await c.request<T>(method, params, opts);
  } finally {
    c.close();
  }
}
