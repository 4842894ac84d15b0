// Opens the CLI's connection to the daemon of a home; starts the daemon first when asked to.
import { connect as clientConnect, type DaemonClient } from "../../client/index.js";
import { isDshError } from "../../core/errors.js";
import type { DaemonConnection } from "./context.js";
import { packageVersion } from "./version.js";

/** Adapt the socket client to what the commands use. */
export function asConnection(c: DaemonClient): DaemonConnection {
  return {
    request: (method, ...args) => c.request(method, ...args),
    onPush: (fn) => void c.onPush("*", (params, method) => fn(method, params)),
    onClose: (fn) => c.onClose(fn),
    close: () => c.close(),
  };
}

export async function connectDaemon(
  home: string,
  opts: { start?: boolean; env?: NodeJS.ProcessEnv } = {},
): Promise<DaemonConnection> {
  const env = opts.env ?? process.env;
  const version = packageVersion();
  try {
    return asConnection(await clientConnect(home, { kind: "cli", version }));
  } catch (e) {
    if (!opts.start || !isDshError(e) || e.code !== "DAEMON_UNAVAILABLE") throw e;
  }
  // Loaded only to start one: a call to a running daemon (or none) never loads what starting takes.
  const { startDaemonFor } = await import("./daemon-control.js");
  await startDaemonFor(home, { env });
  return asConnection(await clientConnect(home, { kind: "cli", version }));
}
