// Where the Herdr server listens (reference/herdr.md §5 "Socket path"): an explicit session name wins, then
// HERDR_SOCKET_PATH, then HERDR_SESSION, then the default session under $XDG_CONFIG_HOME (else ~/.config).
import { homedir } from "node:os";
import { join } from "node:path";
import { DshError } from "../../core/errors.js";

const SESSION_NAME = /^[A-Za-z0-9._-]{1,64}$/;

export interface SocketPathOptions {
  /** Explicit socket path (e.g. from config). */
  socketPath?: string;
  /** Named Herdr session (`--session`). */
  session?: string;
  env?: NodeJS.ProcessEnv;
}

export function resolveHerdrSocketPath(opts: SocketPathOptions = {}): string {
  if (opts.socketPath) return opts.socketPath;
  const env = opts.env ?? process.env;
  if (opts.session) return sessionSocket(opts.session, env);
  if (env.HERDR_SOCKET_PATH) return env.HERDR_SOCKET_PATH;
  if (env.HERDR_SESSION) return sessionSocket(env.HERDR_SESSION, env);
  return join(configDir(env), "herdr.sock");
}

function configDir(env: NodeJS.ProcessEnv): string {
  const base = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), ".config");
  return join(base, "herdr");
}

function sessionSocket(name: string, env: NodeJS.ProcessEnv): string {
  if (!SESSION_NAME.test(name)) {
    throw new DshError(
      "BAD_PARAMS",
      `Herdr session name "${name}" is invalid: use 1-64 characters of A-Z a-z 0-9 . _ -`,
    );
  }
  return join(configDir(env), "sessions", name, "herdr.sock");
}
