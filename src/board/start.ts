// The daemon's one hook for the board: start it when config allows (board.enabled, board.port or board.socket), with
// the daemon's own method handlers; a board that cannot start is logged and the daemon runs on without it.
import { join } from "node:path";
import type { Config } from "../store/config.js";
import type { Logger } from "../core/logger.js";
import type { LatencyBucket } from "../core/status-latency.js";
import type { ProtocolSchemas } from "../protocol/schemas.js";
import { BoardActions, type Handlers } from "./actions.js";
import { startBoard, type BoardServer } from "./server.js";
import { ensureBoardToken } from "./token.js";

/** board.socket: a path, or true for the home's board.sock; false or unset: TCP on 127.0.0.1. */
export function boardSocketPath(home: string, socket: string | boolean | undefined): string | undefined {
  if (socket === true) return join(home, "board.sock");
  return typeof socket === "string" && socket !== "" ? socket : undefined;
}

export async function startDaemonBoard(o: {
  home: string;
  handlers: Handlers;
  /** The daemon's schemas, so the schema files are read once per start. */
  schemas: ProtocolSchemas;
  config(): Config;
  log: Logger;
  latency?: { buckets(): LatencyBucket[] };
}): Promise<BoardServer | undefined> {
  const c = o.config().board;
  if (c?.enabled === false) return undefined;
  try {
    await ensureBoardToken(o.home);
    const actions = new BoardActions({
      handlers: o.handlers,
      schemas: o.schemas,
      mayActOnOwnerTasks: () => o.config().board?.mayActOnOwnerTasks === true,
    });
    const socket = boardSocketPath(o.home, c?.socket);
    return await startBoard({
      home: o.home,
      port: c?.port ?? 0,
      ...(socket ? { socket } : {}),
      actions,
      log: o.log,
      ...(o.latency ? { latency: () => o.latency!.buckets() } : {}),
    });
  } catch (e) {
    o.log.warn({ err: (e as Error).message }, "the board could not start; the daemon runs without it");
    return undefined;
  }
}
