// The Unix socket server: listen (owner-only socket), the connection limit, stop. Each connection's framing and
// bounds are server-connection.ts, a request's checks and reply server-request.ts, hello and access server-access.ts.
import { createServer, type Server, type Socket } from "node:net";
import { chmodSync, existsSync, unlinkSync } from "node:fs";
import { DshError } from "../../core/errors.js";
import { encodeFrame } from "../../protocol/frames.js";
import { serveConnection, type PartialPool } from "./server-connection.js";
import { handleFrame } from "./server-request.js";
import type { Connection, ConnectionLimits, SocketServer, SocketServerOptions } from "./server-types.js";

export type {
  ClientKind,
  Connection,
  ConnectionLimits,
  Handler,
  HandlerTable,
  Logger,
  SocketServer,
  SocketServerOptions,
} from "./server-types.js";
export { nestingDepth } from "./server-request.js";

export const DEFAULT_LIMITS: ConnectionLimits = {
  maxConnections: 1024,
  maxPartialBytes: 32 * 1024 * 1024,
  partialFrameTimeoutMs: 30_000,
  maxUnsentBytes: 8 * 1024 * 1024,
};

export async function startSocketServer(opts: SocketServerOptions): Promise<SocketServer> {
  const connections = new Set<Connection>();
  const sockets = new Set<Socket>();
  const limits: ConnectionLimits = { ...DEFAULT_LIMITS, ...(opts.limits ?? {}) };
  const pool: PartialPool = { bytes: 0 };
  let nextId = 1;

  const server: Server = createServer((socket) => {
    if (sockets.size >= limits.maxConnections) {
      socket.on("error", () => socket.destroy());
      const e = new DshError(
        "CONNECTION_LIMIT",
        `the daemon already serves ${limits.maxConnections} connections; close idle clients and connect again`,
      );
      socket.end(encodeFrame({ id: null, error: e.toWire() }));
      setTimeout(() => socket.destroy(), 1000).unref();
      opts.log.warn({ connections: sockets.size }, "connection refused: too many connections");
      return;
    }
    sockets.add(socket);
    const conn = serveConnection(socket, {
      id: nextId++,
      limits,
      log: opts.log,
      pool,
      onFrame: (text, c, send) => void handleFrame(text, c, send, opts),
      onClosed: (c) => {
        sockets.delete(socket);
        connections.delete(c);
      },
    });
    connections.add(conn);
  });

  if (existsSync(opts.socketPath)) unlinkSync(opts.socketPath);
  // Owner-only from the first moment: the umask covers the window before chmod.
  const oldUmask = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(opts.socketPath, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } finally {
    process.umask(oldUmask);
  }
  chmodSync(opts.socketPath, 0o600);

  return {
    connections,
    get partialBytes() {
      return pool.bytes;
    },
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
      try {
        unlinkSync(opts.socketPath);
      } catch {
        /* already gone */
      }
    },
  };
}
