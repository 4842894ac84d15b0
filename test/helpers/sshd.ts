// Test helper: a real OpenSSH sshd on 127.0.0.1 (free port, temp host key, temp config, pubkey only) and a second
// Unix user it lets in (`useradd -m dshr<pid>`, own HOME, dsh-herdr home and pi dir, a temp client key in its
// authorized_keys). The client side gets a known_hosts holding the temp host key, so ssh checks it as it would any
// host (never StrictHostKeyChecking=no). Needs root (useradd, sshd); `sshdUnavailable()` says why not.
// close() stops sshd, kills every process of the user by pid, and `userdel -r`s it.
import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import {
  accessSync,
  chmodSync,
  constants,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { MachineSpec } from "../../src/core/machines.js";

export const SSHD = "/usr/sbin/sshd";
/** The repo root (dist/test/helpers → ../../..). */
const repoRoot = join(import.meta.dirname, "..", "..", "..");

export interface RemoteUser {
  name: string;
  uid: number;
  gid: number;
  home: string;
  /** Its dsh-herdr home (DSH_HERDR_HOME in its ssh environment). */
  dshHome: string;
  /** Its pi agent dir (PI_CODING_AGENT_DIR). */
  piDir: string;
}

export interface TestSshd {
  dir: string;
  host: "127.0.0.1";
  port: number;
  user: RemoteUser;
  /** Client private key (root-owned, 0600). */
  clientKey: string;
  /** known_hosts with sshd's host key for [127.0.0.1]:port. */
  knownHosts: string;
  /** The remote `--command`: this repo's own bin, run by the user's node. */
  command: string;
  /** The repo root the user runs (this checkout, or a copy when the user cannot read it). */
  appRoot: string;
  /** True when the checkout was not readable by the user and was copied to appRoot. */
  copied: boolean;
  /** A ready MachineSpec for this sshd and user. */
  machine: MachineSpec;
  /** sshd's stderr log so far (LogLevel VERBOSE). */
  log(): string;
  /** Pids of every process running as the user (its daemon, bridges, shells). */
  userPids(): number[];
  /** Run a command as the user (runuser), with its ssh environment; returns stdout. */
  runAs(argv: string[]): string;
  /** chown -R a path to the user. */
  giveToUser(path: string): void;
  close(): Promise<void>;
}

/** Why the sshd tests cannot run here, or undefined when they can. */
export function sshdUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return "needs root (useradd, sshd)";
  if (!existsSync(SSHD)) return `${SSHD} is missing (apt-get install openssh-server; .ci/run does)`;
  if (spawnSync("ssh", ["-V"]).status !== 0) return "the ssh client is missing (apt-get install openssh-client)";
  if (spawnSync("useradd", ["--help"]).error) return "useradd is missing";
  return undefined;
}

/** A TCP port nothing listens on right now (bind 0, read it, close). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

function sh(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** Every pid whose real uid is `uid`. */
export function pidsOfUid(uid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const m = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${name}/status`, "utf8"));
      if (m && Number(m[1]) === uid) out.push(Number(name));
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/** The uid a process runs as, or undefined when it is gone. */
export function uidOf(pid: number): number | undefined {
  try {
    const m = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
    } catch {
      /* gone */
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

function killPids(pids: number[]): void {
  for (const p of pids) {
    try {
      process.kill(p, "SIGKILL");
    } catch {
      /* gone */
    }
  }
}

/** Kill the user's processes (by pid, repeatedly: a daemon may start one meanwhile), then userdel -r. */
function removeUser(name: string, uid: number): void {
  for (let i = 0; i < 50; i++) {
    const pids = pidsOfUid(uid);
    if (pids.length === 0) break;
    killPids(pids);
    spawnSync("sleep", ["0.1"]);
  }
  // What the user's daemon kept outside its home (its git launcher's directory, src/git/launcher.ts): killed with
  // the user's processes, the shell could not remove it.
  for (const dir of ["/dev/shm", tmpdir()])
    for (const entry of safeReaddir(dir))
      if (entry.startsWith("dsh-herdr-git-") && ownerOf(join(dir, entry)) === uid)
        rmSync(join(dir, entry), { recursive: true, force: true });
  spawnSync("userdel", ["-r", "-f", name], { stdio: "ignore" });
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function ownerOf(path: string): number | undefined {
  try {
    return statSync(path).uid;
  } catch {
    return undefined;
  }
}

/** Can `user` run `node bin/dsh-herdr --version` from `root` with `node`? */
function userCanRun(user: string, node: string, root: string): boolean {
  const r = spawnSync("runuser", ["-u", user, "--", node, join(root, "bin", "dsh-herdr"), "--version"], {
    encoding: "utf8",
    cwd: "/",
  });
  return r.status === 0;
}

/** Copy what the remote needs (bin, dist, schema, package.json, node_modules, and node when needed) into `dest`. */
function copyApp(dest: string, node: string, needNode: boolean): { root: string; node: string } {
  const root = join(dest, "app");
  mkdirSync(root, { recursive: true });
  for (const part of ["bin", "dist", "schema", "package.json", "node_modules", "agents", "skills"]) {
    const from = join(repoRoot, part);
    // cp -a: several times faster than fs.cpSync on node_modules, and keeps its .bin symlinks as they are.
    if (existsSync(from)) execFileSync("cp", ["-a", from, join(root, part)]);
  }
  let nodeOut = node;
  if (needNode) {
    nodeOut = join(dest, "node");
    cpSync(node, nodeOut);
    chmodSync(nodeOut, 0o755);
  }
  spawnSync("chmod", ["-R", "a+rX", root]);
  return { root, node: nodeOut };
}

const live = new Set<() => void>();
let exitHook = false;

export interface StartSshdOptions {
  /** Extra variables for the user's ssh sessions (~/.ssh/environment, PermitUserEnvironment). */
  env?: Record<string, string>;
  /** Appended to the user's name (`dshr<pid><suffix>`), so one process can run several sshd users at once. */
  userSuffix?: string;
  /**
   * Unix-socket forwarding to the user's daemon (`ssh -L`), which links use instead of a bridge process; default
   * true, as in a stock sshd_config. false: `AllowStreamLocalForwarding no`, as a hardened server would say.
   */
  streamLocalForwarding?: boolean;
}

async function launchSshd(config: string): Promise<{ proc: ChildProcess; log: () => string }> {
  const proc = spawn(SSHD, ["-D", "-e", "-f", config], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  proc.stderr!.on("data", (c: Buffer) => {
    if (log.length < 1_000_000) log += c.toString("utf8");
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`sshd did not listen within 20 s: ${log}`)), 20_000);
    const done = (e?: Error) => {
      clearTimeout(timer);
      proc.stderr!.off("data", onData);
      proc.off("exit", onExit);
      if (e) reject(e);
      else resolve();
    };
    const onData = () => {
      if (/Server listening on 127\.0\.0\.1 port \d+/.test(log)) done();
    };
    const onExit = (code: number | null) => done(new Error(`sshd exited (${code}): ${log.trim()}`));
    proc.stderr!.on("data", onData);
    proc.once("exit", onExit);
  });
  return { proc, log: () => log };
}

export async function startSshd(opts: StartSshdOptions = {}): Promise<TestSshd> {
  const why = sshdUnavailable();
  if (why) throw new Error(`cannot start sshd: ${why}`);
  const dir = mkdtempSync(join(tmpdir(), "dsh-sshd-"));
  const name = `dshr${process.pid}${opts.userSuffix ?? ""}`.slice(0, 31);
  // A user left by a crashed run with the same pid: start clean.
  const stale = spawnSync("id", ["-u", name], { encoding: "utf8" });
  if (stale.status === 0) removeUser(name, Number(stale.stdout.trim()));
  sh("useradd", ["-m", "-s", "/bin/sh", name]);
  // A locked password ("!") makes sshd without PAM refuse the account; "*" is "no password", not locked.
  sh("usermod", ["-p", "*", name]);
  const uid = Number(sh("id", ["-u", name]).trim());
  const gid = Number(sh("id", ["-g", name]).trim());
  const home = sh("getent", ["passwd", name]).trim().split(":")[5]!;
  let cleaned = false;
  let sshd: ChildProcess | undefined;
  const cleanupSync = () => {
    if (cleaned) return;
    cleaned = true;
    if (sshd?.pid !== undefined) {
      killPids(descendants(sshd.pid));
      killPids([sshd.pid]);
    }
    removeUser(name, uid);
    rmSync(dir, { recursive: true, force: true });
  };
  live.add(cleanupSync);
  if (!exitHook) {
    exitHook = true;
    process.once("exit", () => {
      for (const f of live) f();
    });
  }
  try {
    const user: RemoteUser = {
      name,
      uid,
      gid,
      home,
      dshHome: join(home, ".dsh", "herdr"),
      piDir: join(home, ".pi", "agent"),
    };

    sh("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "dsh-test-host", "-f", join(dir, "host_ed25519")]);
    sh("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "dsh-test-client", "-f", join(dir, "client_ed25519")]);
    const sshDir = join(home, ".ssh");
    mkdirSync(sshDir, { recursive: true, mode: 0o700 });
    writeFileSync(join(sshDir, "authorized_keys"), readFileSync(join(dir, "client_ed25519.pub")), { mode: 0o600 });
    mkdirSync(user.piDir, { recursive: true, mode: 0o700 });

    // The user runs this checkout when it can reach it (every parent dir traversable); else a copy it can read.
    let node = process.execPath;
    let appRoot = repoRoot;
    let copied = false;
    if (!userCanRun(name, node, appRoot)) {
      chmodSync(dir, 0o711);
      let nodeOk = true;
      try {
        spawnSync("runuser", ["-u", name, "--", node, "--version"], { stdio: "ignore" }).status === 0 ||
          (nodeOk = false);
      } catch {
        nodeOk = false;
      }
      const c = copyApp(dir, node, !nodeOk);
      appRoot = c.root;
      node = c.node;
      copied = true;
      if (!userCanRun(name, node, appRoot))
        throw new Error(`user ${name} cannot run ${appRoot}/bin/dsh-herdr even from a copy`);
    }
    const command = `${node} ${join(appRoot, "bin", "dsh-herdr")}`;

    const env: Record<string, string> = {
      DSH_HERDR_HOME: user.dshHome,
      PI_CODING_AGENT_DIR: user.piDir,
      PI_OFFLINE: "1",
      PI_SKIP_VERSION_CHECK: "1",
      PATH: `${dirname(node)}:/usr/local/bin:/usr/bin:/bin`,
      // The test run's marker (scripts/leftovers.mjs): sshd starts sessions afresh, so it is passed on here.
      ...(process.env["DSH_HERDR_TEST_RUN"] ? { DSH_HERDR_TEST_RUN: process.env["DSH_HERDR_TEST_RUN"] } : {}),
      ...(opts.env ?? {}),
    };
    writeFileSync(
      join(sshDir, "environment"),
      Object.entries(env)
        .map(([k, v]) => `${k}=${v}\n`)
        .join(""),
      { mode: 0o600 },
    );
    spawnSync("chown", ["-R", `${uid}:${gid}`, sshDir, join(home, ".pi")]);

    // sshd wants its privilege-separation dir; the package's service would create it.
    mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
    let port = 0;
    let log: () => string = () => "";
    for (let tries = 0; ; tries++) {
      port = await freePort();
      const config = join(dir, "sshd_config");
      writeFileSync(
        config,
        [
          `Port ${port}`,
          "ListenAddress 127.0.0.1",
          `HostKey ${join(dir, "host_ed25519")}`,
          `PidFile ${join(dir, "sshd.pid")}`,
          "AuthorizedKeysFile .ssh/authorized_keys",
          "PubkeyAuthentication yes",
          "PasswordAuthentication no",
          "KbdInteractiveAuthentication no",
          "UsePAM no",
          "PermitRootLogin no",
          `AllowUsers ${name}`,
          "StrictModes yes",
          "PermitUserEnvironment yes",
          "X11Forwarding no",
          // Debian's sshd 9.2 refuses a Unix-socket forward under `AllowTcpForwarding no` too.
          `AllowTcpForwarding ${opts.streamLocalForwarding === false ? "no" : "local"}`,
          `AllowStreamLocalForwarding ${opts.streamLocalForwarding === false ? "no" : "local"}`,
          "AllowAgentForwarding no",
          "PrintMotd no",
          "MaxStartups 50:30:100",
          "LogLevel VERBOSE",
          "",
        ].join("\n"),
        { mode: 0o600 },
      );
      try {
        const s = await launchSshd(config);
        sshd = s.proc;
        log = s.log;
        break;
      } catch (e) {
        if (tries >= 3) throw e; // the free port was taken meanwhile: try another
      }
    }
    const hostPub = readFileSync(join(dir, "host_ed25519.pub"), "utf8").trim().split(/\s+/).slice(0, 2).join(" ");
    const knownHosts = join(dir, "known_hosts");
    writeFileSync(knownHosts, `[127.0.0.1]:${port} ${hostPub}\n`, { mode: 0o600 });
    const clientKey = join(dir, "client_ed25519");
    accessSync(clientKey, constants.R_OK);

    const machine: MachineSpec = { ssh: `${name}@127.0.0.1`, port, identity: clientKey, knownHosts, command };
    return {
      dir,
      host: "127.0.0.1",
      port,
      user,
      clientKey,
      knownHosts,
      command,
      appRoot,
      copied,
      machine,
      log,
      userPids: () => pidsOfUid(uid),
      runAs: (argv) =>
        execFileSync(
          "runuser",
          ["-u", name, "--", "env", "-i", `HOME=${home}`, ...Object.entries(env).map(([k, v]) => `${k}=${v}`), ...argv],
          { encoding: "utf8", cwd: "/" },
        ),
      giveToUser: (path) => void spawnSync("chown", ["-R", `${uid}:${gid}`, path]),
      async close() {
        if (cleaned) return;
        if (sshd && sshd.exitCode === null) {
          const exited = new Promise((r) => sshd!.once("exit", r));
          killPids(descendants(sshd.pid!));
          sshd.kill("SIGTERM");
          await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
        }
        cleanupSync();
        live.delete(cleanupSync);
      },
    };
  } catch (e) {
    cleanupSync();
    live.delete(cleanupSync);
    throw e;
  }
}
