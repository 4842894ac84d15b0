// The transport of a link: one `ssh ... <command> daemon connect` process whose stdin/stdout carry the daemon
// protocol, and the hello over it; a failure is MACHINE_UNREACHABLE with ssh's own error line.
import { Duplex } from "node:stream";
import { execa, type ResultPromise } from "execa";
import { clientOver, type DaemonClient } from "../client/index.js";
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
  // A reply over the frame limit needs nothing here: the client's reader refuses it at its first byte over the
  // limit and rejects its request by the id in its head (FRAME_TOO_LARGE), so the caller reads it in pages. (A
  // refusal frame pushed into this stream after the chunk that ended the big reply landed inside the next frame when
  // that chunk also held its start, and broke it.)
  ssh.stdout!.on("data", (c: Buffer) => stream.push(c));
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

/** The entry with `~` in its key and known_hosts paths expanded (as ssh gets them). */
export function resolveSpec(m: MachineSpec, env: NodeJS.ProcessEnv): MachineSpec {
  return {
    ...m,
    ...(m.identity !== undefined ? { identity: expandHome(m.identity, env) } : {}),
    ...(m.knownHosts !== undefined ? { knownHosts: expandHome(m.knownHosts, env) } : {}),
  };
}
