// Other machines: what a machine entry in config.json is, the ssh argv that reaches its daemon, which line of
// ssh's stderr names the failure, and the reconnect backoff. Pure: the caller runs ssh and keeps the clock.
import { DshError } from "./errors.js";

/** One entry of config.json `machines`, keyed by its label. */
export interface MachineSpec {
  /** `USER@HOST` (or `HOST`: ssh picks the user). */
  ssh: string;
  port?: number;
  /** Private key file (`ssh -i`), absolute. */
  identity?: string;
  /** The dsh-herdr invocation on that machine, a shell command line; default `dsh-herdr`. */
  command?: string;
  /** A known_hosts file to check the host key against instead of ssh's default (`~/.ssh/known_hosts`). */
  knownHosts?: string;
}

export const DEFAULT_REMOTE_COMMAND = "dsh-herdr";

const LABEL = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
// No leading "-" (it would be read as an ssh option), no whitespace or shell metacharacters.
const TARGET = /^(?:[A-Za-z0-9._][A-Za-z0-9._-]{0,63}@)?(?:[A-Za-z0-9][A-Za-z0-9.-]{0,252}|\[[0-9A-Fa-f:.]+\])$/;

export function isValidMachineLabel(s: unknown): s is string {
  return typeof s === "string" && LABEL.test(s);
}

export function assertMachineLabel(s: unknown): string {
  if (!isValidMachineLabel(s)) {
    throw new DshError(
      "BAD_PARAMS",
      `machine label ${JSON.stringify(s)} is not valid; use 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit (e.g. builder-01)`,
    );
  }
  return s;
}

export function assertSshTarget(s: unknown): string {
  if (typeof s !== "string" || !TARGET.test(s)) {
    throw new DshError(
      "BAD_PARAMS",
      `--ssh ${JSON.stringify(s)} is not USER@HOST; give e.g. --ssh dev@builder.lan (the port goes in --port)`,
    );
  }
  return s;
}

export function assertPort(n: unknown): number {
  const v = typeof n === "string" && /^\d+$/.test(n) ? Number(n) : n;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > 65535) {
    throw new DshError("BAD_PARAMS", `port ${JSON.stringify(n)} is not a TCP port; give an integer 1-65535`);
  }
  return v;
}

/** `dev@builder:2222`, for listings and messages. */
export function machineTarget(m: MachineSpec): string {
  return m.port !== undefined && m.port !== 22 ? `${m.ssh}:${m.port}` : m.ssh;
}

export interface SshOptions {
  /** Seconds for the TCP connect and the SSH handshake. */
  connectTimeoutS?: number;
  /** Seconds between keep-alives; a link that misses three is dropped (and reconnected). */
  aliveIntervalS?: number;
}

/**
 * The argv (after `ssh`) that runs `<command> <remoteArgs...>` on the machine. BatchMode: never a password or
 * passphrase prompt. StrictHostKeyChecking=yes: an unknown or changed host key fails, whatever ssh_config says
 * (accept-new would take the first key it sees). The remote args are fixed words of ours (never user text), so
 * joining them to the configured command line is safe; the command line itself is the user's own shell text.
 */
export function sshArgv(m: MachineSpec, remoteArgs: readonly string[], opts: SshOptions = {}): string[] {
  for (const a of remoteArgs) {
    if (!/^[A-Za-z0-9._=-]+$/.test(a))
      throw new DshError("INTERNAL", `remote argument ${JSON.stringify(a)} needs quoting; pass fixed words only`);
  }
  const argv = sshOptionArgv(m, opts);
  argv.push("--", m.ssh, [m.command ?? DEFAULT_REMOTE_COMMAND, ...remoteArgs].join(" "));
  return argv;
}

/**
 * ssh's argv for a link's forward: a Unix socket here forwarded to the remote daemon's socket (-L), ssh exiting when
 * the forward cannot be set up, a stale socket file replaced. The session runs `cat`, which waits on the channel's
 * stdin and ends with it: sshd sets TCP_NODELAY only when a session starts, and without one (-N) Nagle held the
 * daemon's second small frame until this side's delayed ACK, 33-46 ms (strace and the remote bench showed both).
 */
export function sshForwardArgv(
  m: MachineSpec,
  localSocket: string,
  remoteSocket: string,
  opts: SshOptions = {},
): string[] {
  for (const p of [localSocket, remoteSocket]) {
    if (!isForwardableSocketPath(p))
      throw new DshError("INTERNAL", `socket path ${JSON.stringify(p)} must be absolute, without spaces or colons`);
  }
  return [
    ...sshOptionArgv(m, opts),
    "-o",
    "ExitOnForwardFailure=yes",
    "-o",
    "StreamLocalBindUnlink=yes",
    "-L",
    `${localSocket}:${remoteSocket}`,
    "--",
    m.ssh,
    "cat",
  ];
}

/** ssh -L takes `local:remote`: both absolute, neither with a colon (its separator) or whitespace. */
export function isForwardableSocketPath(p: string): boolean {
  return /^\/[^\s:]*$/.test(p);
}

function sshOptionArgv(m: MachineSpec, opts: SshOptions): string[] {
  const argv = [
    "-T",
    "-o",
    "BatchMode=yes",
    "-o",
    "StrictHostKeyChecking=yes",
    "-o",
    `ConnectTimeout=${opts.connectTimeoutS ?? 10}`,
    "-o",
    `ServerAliveInterval=${opts.aliveIntervalS ?? 15}`,
    "-o",
    "ServerAliveCountMax=3",
  ];
  if (m.port !== undefined) argv.push("-p", String(m.port));
  if (m.identity !== undefined) argv.push("-i", m.identity, "-o", "IdentitiesOnly=yes");
  if (m.knownHosts !== undefined) argv.push("-o", `UserKnownHostsFile=${m.knownHosts}`);
  return argv;
}

/**
 * The line of ssh's stderr that says why it failed: its last non-empty line ("ssh: connect to host ... Connection
 * refused", "Host key verification failed.", "Permission denied (publickey)."), else the last line at all.
 */
export function sshErrorLine(stderr: string): string | undefined {
  const lines = stderr
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== "");
  return lines.at(-1)?.slice(0, 500);
}

/**
 * What to do about an ssh failure, from ssh's own line: an unknown or changed host key is `machine trust` (ssh's
 * own suggestion, `ssh -o BatchMode=yes ... true`, cannot add a key under StrictHostKeyChecking=yes), a refused key
 * is the key, an address or port that does not answer is the entry.
 */
export function sshFailureFix(label: string, m: MachineSpec, line: string | undefined): string {
  const l = line ?? "";
  if (
    /Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|host key is known|Host key for .* has changed/i.test(
      l,
    )
  )
    return `ssh does not know the host key of ${machineTarget(m)} (or it changed): see its fingerprint with \`dsh-herdr machine trust ${label}\`, compare it with the one that machine shows (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub there), then add it with \`dsh-herdr machine trust ${label} --yes\``;
  if (/Permission denied/i.test(l))
    return `the ssh key was refused: add your public key to ~/.ssh/authorized_keys of ${m.ssh} (e.g. ssh-copy-id${m.port !== undefined ? ` -p ${m.port}` : ""} ${m.ssh}), or give the right private key with \`dsh-herdr machine set ${label} --identity FILE\``;
  if (/Could not resolve hostname|Connection refused|timed out|No route to host|Network is unreachable/i.test(l))
    return `check the address and port (\`dsh-herdr machine set ${label} --ssh USER@HOST --port N\`) and that sshd runs there`;
  return `check the address, the key and known_hosts with \`ssh -o BatchMode=yes${m.port !== undefined ? ` -p ${m.port}` : ""} ${m.ssh} true\``;
}

export interface BackoffPolicy {
  baseMs: number;
  maxMs: number;
  factor: number;
}

export const DEFAULT_BACKOFF: Readonly<BackoffPolicy> = Object.freeze({ baseMs: 250, maxMs: 30_000, factor: 2 });

/**
 * A relayed task's failed request or read, tried again while its link stays up: 0.5-1 s, doubling to 15-30 s (the
 * same equal jitter as a reconnect, so the tasks of one busy machine do not all ask again in step).
 */
export const RELAY_RETRY_BACKOFF: Readonly<BackoffPolicy> = Object.freeze({ baseMs: 1000, maxMs: 30_000, factor: 2 });

/**
 * Delay before reconnect attempt `attempt` (0 = the first retry after a drop): base·factor^attempt capped at max,
 * with "equal jitter" (half fixed, half random) so many links dropped at once do not retry in step.
 * `random` is in [0, 1).
 */
export function backoffDelay(attempt: number, random: number, policy: BackoffPolicy = DEFAULT_BACKOFF): number {
  const a = Number.isFinite(attempt) && attempt > 0 ? Math.floor(attempt) : 0;
  const r = Number.isFinite(random) ? Math.min(Math.max(random, 0), 1) : 0;
  const full = Math.min(policy.maxMs, policy.baseMs * policy.factor ** Math.min(a, 64));
  return Math.round(full / 2 + (full / 2) * r);
}
