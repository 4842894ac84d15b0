// The transport of a link: one `ssh ... <command> daemon connect` process whose stdin/stdout carry the daemon
// protocol, and the hello over it; a failure is MACHINE_UNREACHABLE with ssh's own error line.
import { Duplex } from "node:stream";
import { execa, type ResultPromise } from "execa";
import { clientOver, MAX_FRAME_BYTES, type DaemonClient } from "../client/index.js";
import { isDshError } from "../core/errors.js";
import { sshArgv, type MachineSpec } from "../core/machines.js";
import { expandHome } from "../store/home.js";
import { STDERR_CAP, unreachable } from "./link-errors.js";
import type { LinkOptions, LinkTransport } from "./link-types.js";

export interface Attempt {
  client: DaemonClient;
  ssh: ResultPromise;
  /** What ssh printed on stderr so far (capped). */
  stderr(): string;
  /** How frames travel: through `daemon connect` on the ssh channel, or over a forwarded socket (link-forward.ts). */
  transport: LinkTransport;
}

/** Ask `ssh` to run one connection's worth of `daemon connect`; resolves once the remote daemon said hello. */
export async function openAttempt(o: LinkOptions): Promise<Attempt> {
  const spec = resolveSpec(o.machine, o.env ?? process.env);
  const { ssh, stderr, exited } = startSsh(o, sshArgv(spec, ["daemon", "connect"], o.ssh), "pipe");
  ssh.stdin!.on("error", () => undefined); // EPIPE after ssh died: the exit handler reports it
  const stream = new Duplex({
    read() {},
    write(chunk, _enc, cb) {
      if (ssh.stdin!.destroyed) return cb(new Error("ssh stdin closed"));
      ssh.stdin!.write(chunk, () => cb());
    },
    final(cb) {
      ssh.stdin!.end();
      cb();
    },
    destroy(err, cb) {
      if (ssh.exitCode === null && ssh.signalCode === null) ssh.kill("SIGTERM");
      cb(err);
    },
  });
  const oversize = new OversizedReplies(o.label);
  ssh.stdout!.on("data", (c: Buffer) => {
    stream.push(c);
    // A reply over the frame limit is dropped by the reader (nothing would ever answer its request): a small
    // FRAME_TOO_LARGE error for its id follows it, so the caller hears at once (and reads the result in pages).
    for (const frame of oversize.push(c)) stream.push(frame);
  });
  void exited.then(() => stream.destroy());

  try {
    const client = await clientOver(stream, {
      kind: "cli",
      ...(o.version !== undefined ? { version: o.version } : {}),
      timeoutMs: o.helloTimeoutMs ?? 60_000,
      pushes: {},
    });
    return { client, ssh, stderr, transport: "bridge" };
  } catch (e) {
    stream.destroy();
    const r = await exited;
    throw unreachable(
      o.label,
      spec,
      stderr(),
      r.exitCode,
      isDshError(e) && e.code === "TIMEOUT" ? "no hello from the remote daemon in time" : undefined,
    );
  }
}

/** One ssh process of a link, with what it printed on stderr kept (capped) for the error that names its failure. */
export function startSsh(
  o: Pick<LinkOptions, "sshBin" | "env">,
  argv: string[],
  stdout: "pipe" | "ignore",
): { ssh: ResultPromise; stderr(): string; exited: Promise<Awaited<ResultPromise>> } {
  const ssh = execa(o.sshBin ?? "ssh", argv, {
    stdin: "pipe",
    stdout,
    stderr: "pipe",
    buffer: false,
    reject: false,
    env: o.env ?? process.env,
    extendEnv: false,
  });
  let stderr = "";
  ssh.stderr!.on("data", (c: Buffer) => {
    if (stderr.length < STDERR_CAP) stderr += c.toString("utf8");
  });
  // Resolves once ssh exited and its pipes are drained (so stderr is whole).
  const exited = ssh.then((r) => r);
  return { ssh, stderr: () => stderr, exited };
}

/**
 * Watches the frames coming over a link for replies longer than the frame limit, which the protocol reader drops
 * whole: for each, an error frame for the same request id (read from the reply's first bytes, `{"id":N,`).
 */
export class OversizedReplies {
  private size = 0;
  private head = "";

  constructor(
    private readonly label: string,
    private readonly max = MAX_FRAME_BYTES,
  ) {}

  push(chunk: Buffer): string[] {
    const out: string[] = [];
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(10, start);
      const end = nl === -1 ? chunk.length : nl;
      if (this.head.length < 32) this.head += chunk.subarray(start, Math.min(end, start + 32)).toString("latin1");
      this.size += end - start;
      if (nl === -1) break;
      if (this.size > this.max) {
        const id = /^\{"id":(\d+),/.exec(this.head)?.[1];
        if (id !== undefined)
          out.push(
            `${JSON.stringify({
              id: Number(id),
              error: {
                code: "FRAME_TOO_LARGE",
                message: `machine ${this.label} answered with a frame of ${this.size} bytes, over the ${this.max}-byte limit; read the result in pages (task.fetch)`,
              },
            })}\n`,
          );
      }
      this.size = 0;
      this.head = "";
      start = nl + 1;
    }
    return out;
  }
}

/** The entry with `~` in its key and known_hosts paths expanded (as ssh gets them). */
export function resolveSpec(m: MachineSpec, env: NodeJS.ProcessEnv): MachineSpec {
  return {
    ...m,
    ...(m.identity !== undefined ? { identity: expandHome(m.identity, env) } : {}),
    ...(m.knownHosts !== undefined ? { knownHosts: expandHome(m.knownHosts, env) } : {}),
  };
}
