// The daemon's one hook for the board: start it when config allows (board.enabled, board.port), with the daemon's own
// method handlers; a board that cannot start is logged and the daemon runs on without it.
import type { Config } from "../store/config.js";
import type { Logger } from "../core/logger.js";
import { BoardActions, type Handlers } from "./actions.js";
import { startBoard, type BoardServer } from "./server.js";
import { ensureBoardToken } from "./token.js";

export async function startDaemonBoard(o: {
  home: string;
  handlers: Handlers;
  config(): Config;
  log: Logger;
}): Promise<BoardServer | undefined> {
  const c = o.config().board;
  if (c?.enabled === false) return undefined;
  try {
    await ensureBoardToken(o.home);
    const actions = new BoardActions({
      handlers: o.handlers,
      mayActOnOwnerTasks: () => o.config().board?.mayActOnOwnerTasks === true,
    });
    return await startBoard({ home: o.home, port: c?.port ?? 0, actions, log: o.log });
  } catch (e) {
    o.log.warn({ err: (e as Error).message }, "the board could not start; the daemon runs without it");
    return undefined;
  }
}
