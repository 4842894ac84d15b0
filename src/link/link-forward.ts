// A link's forward: once `daemon connect` has started the remote daemon and its hello named the daemon's socket, a
// second ssh forwards a private Unix socket here to that socket (`ssh -L`), and the link talks over it. Every frame
// then crosses sshd and ssh only, not also a node bridge process per connection (docs/performance.md, issue 27).
// A server that refuses forwarding (`AllowStreamLocalForwarding no`, `DisableForwarding yes`) leaves the link on the
// bridge: the caller falls back.
import { chmodSync, existsSync, mkdirSync, readdirSync, rmSync, watch } from "node:fs";
import { createConnection, type Socket } from "node:net";
import { basename, join } from "node:path";
import { clientOver } from "../client/index.js";
import { DshError, isDshError } from "../core/errors.js";
import { isForwardableSocketPath, sshErrorLine, sshForwardArgv, type MachineSpec } from "../core/machines.js";
import { startSsh, type Attempt } from "./link-ssh.js";
import type { LinkOptions } from "./link-types.js";

/** A Unix socket path's limit (sun_path is 108 bytes with its NUL; some systems allow 104). */
const MAX_SOCKET_PATH = 100;
let sequence = 0;
const FORWARD_HELLO_MS = 15_000;

/**
 * ssh's words when the server would not open the forward's channel: the link stops trying for its lifetime. A server
 * that refuses says "administratively prohibited" or, sshd 9.2, "connect failed: open failed" (the daemon's socket
 * was just named by the daemon itself, so a failed connect there is the server's policy, not a missing socket).
 */
export function forwardRefused(stderr: string): boolean {
  return /administratively prohibited|open failed/i.test(stderr);
}

/**
 * Open the link's connection over a forward to `remoteSocket` (an absolute path on the machine); the socket here is
 * made in `dir` (0700). Throws FORWARD_FAILED with ssh's line; the caller keeps its bridge then.
 */
export async function openForward(
  o: LinkOptions,
  spec: MachineSpec,
  remoteSocket: string,
  dir: string,
): Promise<Attempt> {
  const local = join(dir, `${o.label.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 24)}-${process.pid}-${++sequence}.sock`);
  if (local.length > MAX_SOCKET_PATH || !isForwardableSocketPath(local) || !isForwardableSocketPath(remoteSocket))
    throw new DshError(
      "FORWARD_FAILED",
      `cannot forward ${local} to ${remoteSocket}: a socket path too long or with spaces or colons; the link uses \`daemon connect\` instead`,
    );
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700); // the forward is the remote daemon for anyone who can connect to it: ours alone
  sweepOnce(dir);
  rmSync(local, { force: true }); // a file left by a crashed daemon of the same pid would look like ssh's
  // stdin is never written: the session's `cat` ends when ssh does (see sshForwardArgv).
  const { ssh, stderr, exited } = startSsh(o, sshForwardArgv(spec, local, remoteSocket, o.ssh), "ignore");
  void exited.then(() => rmSync(local, { force: true }));
  const fail = async (why: string): Promise<never> => {
    if (ssh.exitCode === null && ssh.signalCode === null) ssh.kill("SIGTERM");
    await exited;
    const line = sshErrorLine(stderr());
    throw new DshError(
      "FORWARD_FAILED",
      `the forward to ${remoteSocket} on machine ${o.label} failed: ${line ?? why}; the link uses \`daemon connect\` instead`,
      { label: o.label, refused: forwardRefused(stderr()), ...(line !== undefined ? { sshError: line } : {}) },
    );
  };

  let socket: Socket;
  try {
    await socketListening(local, exited, (o.ssh?.connectTimeoutS ?? 10) * 1000 + 5000);
    socket = await connectTo(local);
  } catch (e) {
    return fail((e as Error).message);
  }
  // The forwarded connection closing (the remote daemon went away, or the client closed it) ends its ssh, whose
  // session would keep it up: the link waits for ssh's exit to report the drop. The client reads the socket itself:
  // no stream in between, one hop less for every frame.
  socket.once("close", () => {
    if (ssh.exitCode === null && ssh.signalCode === null) ssh.kill("SIGTERM");
  });
  void exited.then(() => socket.destroy());
  try {
    const client = await clientOver(socket, {
      kind: "cli",
      ...(o.version !== undefined ? { version: o.version } : {}),
      // The daemon there just answered over the bridge: a forward that stays silent longer is not worth waiting for.
      timeoutMs: Math.min(o.helloTimeoutMs ?? 60_000, FORWARD_HELLO_MS),
      pushes: {},
    });
    return { client, ssh, stderr, transport: "forward" };
  } catch (e) {
    socket.destroy();
    return fail(isDshError(e) && e.code === "TIMEOUT" ? "no hello over the forward in time" : (e as Error).message);
  }
}

const swept = new Set<string>();

/**
 * Sockets left in `dir` by an earlier daemon (killed before its ssh could be waited for): one daemon serves a home,
 * so every socket not named with this process's pid is stale. Once per directory and process.
 */
function sweepOnce(dir: string): void {
  if (swept.has(dir)) return;
  swept.add(dir);
  for (const name of readdirSync(dir))
    if (name.endsWith(".sock") && !name.includes(`-${process.pid}-`)) rmSync(join(dir, name), { force: true });
}

/** Resolves once ssh has bound the forward's socket; rejects when ssh exits first or the time runs out. */
function socketListening(path: string, exited: Promise<unknown>, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let done = false;
    const watcher = watch(join(path, ".."), (_ev, name) => {
      if (name === basename(path) && existsSync(path)) finish();
    });
    const timer = setTimeout(
      () => finish(new Error(`ssh did not listen on ${path} within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const finish = (err?: Error) => {
      if (done) return;
      done = true;
      watcher.close();
      clearTimeout(timer);
      if (err) reject(err);
      else resolve();
    };
    watcher.on("error", (e) => finish(e));
    void exited.then(() => finish(new Error("ssh exited before it listened")));
    if (existsSync(path)) finish();
  });
}

/**
 * Connect to the forward; ssh binds its socket a moment before it listens, so ECONNREFUSED is tried again (5 ms
 * growing to 50 ms) until a deadline, not a count: on a loaded machine ssh can be descheduled between the two for
 * longer than a hundred milliseconds of tries.
 */
function connectTo(path: string, deadline = Date.now() + 3000, pauseMs = 5): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = createConnection(path);
    s.once("connect", () => {
      s.removeAllListeners("error");
      resolve(s);
    });
    s.once("error", (e: NodeJS.ErrnoException) => {
      if (e.code === "ECONNREFUSED" && Date.now() < deadline)
        return void setTimeout(
          () => connectTo(path, deadline, Math.min(50, pauseMs * 2)).then(resolve, reject),
          pauseMs,
        );
      reject(new Error(`cannot connect to ${path} (${e.code ?? e.message})`));
    });
  });
}
