// What every command gets: where to write, the home, and a lazily opened daemon connection.
import type { CliIo } from "./io.js";
import type { AgentResult } from "../../core/types.js";
import type { RequestArgs } from "../../client/index.js";
import type { RequestMethod, Result } from "../../protocol/methods.js";

/** The slice of the socket client the CLI uses (src/client implements it). */
export interface DaemonConnection {
  /** One request, typed by the protocol table (src/protocol/). */
  request<M extends RequestMethod>(method: M, ...args: RequestArgs<M>): Promise<Result<M>>;
  /** Server pushes without an id (task.status). */
  onPush(handler: (method: string, params: unknown) => void): void;
  /** Called once when the connection ends (daemon stopped or crashed). */
  onClose(handler: () => void): void;
  close(): void;
}

export interface CliContext {
  io: CliIo;
  home: string;
  /** Connect to a running daemon; `start` starts one first when none answers (spawn, demo). */
  connect(opts?: { start?: boolean }): Promise<DaemonConnection>;
  /** The exit code the command chose (0 unless set). */
  exitCode: number;
  /** Ctrl+C and friends: long-running commands (watch, wait, logs -f) stop when this aborts. */
  signal: AbortSignal;
}

export type { AgentResult };
