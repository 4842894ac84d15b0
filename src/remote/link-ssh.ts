// The transport of a link: one `ssh ... <command> daemon connect` process whose stdin/stdout carry the daemon
// protocol, and the hello over it; a failure is MACHINE_UNREACHABLE with ssh's own error line.
import { Duplex } from "node:stream";
import { execa, type ResultPromise } from "execa";
import { clientOver, type DaemonClient } from "../client/index.js";
import { isDshError } from "../core/errors.js";
import { sshArgv, type MachineSpec } from "../core/machines.js";
import { expandHome } from "../store/home.js";
import { STDERR_CAP, unreachable } from "./link-errors.js";
import type { LinkOptions } from "./link-types.js";

export interface Attempt {
  client: DaemonClient;
  ssh: ResultPromise;
  /** What ssh printed on stderr so far (capped). */
  stderr(): string;
}

/** Ask `ssh` to run one connection's worth of `daemon connect`; resolves once the remote daemon said hello. */
export async function openAttempt(o: LinkOptions): Promise<Attempt> {
  const spec = resolveSpec(o.machine, o.env ?? process.env);
  const ssh = execa(o.sshBin ?? "ssh", sshArgv(spec, ["daemon", "connect"], o.ssh), {
    stdin: "pipe",
    stdout: "pipe",
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
  ssh.stdout!.on("data", (c: Buffer) => stream.push(c));
  void exited.then(() => stream.destroy());

  try {
    const client = await clientOver(stream, {
      kind: "cli",
      ...(o.version !== undefined ? { version: o.version } : {}),
      timeoutMs: o.helloTimeoutMs ?? 60_000,
      pushes: {},
    });
    return { client, ssh, stderr: () => stderr };
  } catch (e) {
    stream.destroy();
    const r = await exited;
    throw unreachable(
      o.label,
      spec,
      stderr,
      r.exitCode,
      isDshError(e) && e.code === "TIMEOUT" ? "no hello from the remote daemon in time" : undefined,
    );
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
