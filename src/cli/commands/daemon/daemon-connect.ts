// daemon connect: a byte bridge between stdio and this home's daemon socket, started when none runs. It is what
// another machine's daemon runs over ssh (src/link/link.ts), so stdout carries protocol frames only: every
// message of ours goes to stderr.
import type { Command } from "commander";
import { createConnection, type Socket } from "node:net";
import type { Readable, Writable } from "node:stream";
import { socketPathFor } from "../../../client/index.js";
import { DshError } from "../../../core/errors.js";
import type { CliContext } from "../../common/context.js";
import { startDaemonFor } from "../../common/daemon-control.js";
import { examples } from "../../common/options.js";

export interface BridgeOptions {
  env: NodeJS.ProcessEnv;
  signal: AbortSignal;
  stdin: Readable;
  stdout: Writable;
}

function openSocket(path: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = createConnection(path);
    s.once("connect", () => {
      s.removeAllListeners("error");
      resolve(s);
    });
    s.once("error", (e: NodeJS.ErrnoException) =>
      reject(
        new DshError(
          "DAEMON_UNAVAILABLE",
          `cannot connect to ${path} (${e.code ?? e.message}) after starting the daemon; see daemon.log in the home`,
        ),
      ),
    );
  });
}

/** Start the daemon if needed, then copy bytes both ways until either side closes. Resolves when done. */
export async function bridgeStdio(home: string, o: BridgeOptions): Promise<void> {
  await startDaemonFor(home, { env: o.env });
  const socket = await openSocket(socketPathFor(home));
  await new Promise<void>((resolve) => {
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      o.stdin.unpipe(socket);
      // Our stdin is the ssh channel: stop reading it so the process can exit once the socket is gone.
      o.stdin.destroy();
      socket.destroy();
      o.signal.removeEventListener("abort", finish);
      resolve();
    };
    // stdout stays open (it is the process's own fd); the process exiting is what closes the channel.
    socket.pipe(o.stdout, { end: false });
    o.stdin.pipe(socket); // stdin's end half-closes the socket; the daemon then closes its side
    socket.on("close", finish);
    socket.on("error", finish);
    o.stdout.on("error", finish); // EPIPE: the reader went away
    o.stdin.on("error", finish);
    o.signal.addEventListener("abort", finish, { once: true });
  });
}

export function registerDaemonConnect(daemon: Command, ctx: CliContext): void {
  const connect = daemon
    .command("connect")
    .description(
      "bridge stdin/stdout to the daemon's socket, starting the daemon when none runs (what another machine runs over ssh)",
    );
  examples(connect, ["ssh -o BatchMode=yes dev@builder dsh-herdr daemon connect"]);
  connect.action(async () => {
    await bridgeStdio(ctx.home, { env: ctx.io.env, signal: ctx.signal, stdin: process.stdin, stdout: process.stdout });
  });
}
