// The daemon's home directory (~/.dsh/herdr): where it is, and refusing one other users could tamper with.
import { closeSync, existsSync, mkdirSync, openSync, unlinkSync, writeSync } from "node:fs";
import { chmod, mkdir, stat } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { DshError } from "../core/errors.js";
import { fsError } from "./fsio.js";

export interface HomePaths {
  home: string;
  tasks: string;
  worktrees: string;
  owners: string;
  /** The sockets of links' forwards to other machines' daemons (src/link/link-forward.ts). */
  links: string;
  config: string;
  socket: string;
  lock: string;
  log: string;
}

/** `DSH_HERDR_HOME` when set, else `~/.dsh/herdr`. */
export function resolveHome(env: NodeJS.ProcessEnv = process.env): string {
  const override = env.DSH_HERDR_HOME;
  if (override !== undefined && override.trim() !== "") return expandHome(override.trim(), env);
  return join(env.HOME ?? homedir(), ".dsh", "herdr");
}

/** `~` and `~/x` expand to the user's home; anything else is returned unchanged. */
export function expandHome(p: string, env: NodeJS.ProcessEnv = process.env): string {
  if (p === "~") return env.HOME ?? homedir();
  if (p.startsWith("~/")) return join(env.HOME ?? homedir(), p.slice(2));
  return p;
}

export function homePaths(home: string): HomePaths {
  return {
    home,
    tasks: join(home, "tasks"),
    worktrees: join(home, "worktrees"),
    owners: join(home, "owners"),
    links: join(home, "links"),
    config: join(home, "config.json"),
    socket: join(home, "daemon.sock"),
    lock: join(home, "daemon.lock"),
    log: join(home, "daemon.log"),
  };
}

/**
 * Create the home (0700) with its subfolders, then refuse it when another user could write into it: task records
 * and the socket live here, so a group/world-writable or foreign-owned home would let others steer our agents.
 */
export async function ensureHome(home: string): Promise<HomePaths> {
  const paths = homePaths(home);
  createHomeDir(home);
  await assertHomeSafe(home);
  await tightenHome(home);
  for (const dir of [paths.tasks, paths.worktrees, paths.owners]) {
    try {
      await mkdir(dir, { recursive: true, mode: 0o700 });
    } catch (e) {
      throw fsError(e, `create ${dir}`);
    }
  }
  probeHomeWritable(home);
  return paths;
}

/**
 * Create the home (0700) and its missing parents; a failure is HOME_UNWRITABLE naming the real errno. A recursive
 * mkdir under a read-only parent reports ENOENT (node retries the parent and loses the first errno): the nearest
 * existing folder is asked again with one plain mkdir, which says EROFS, ENOSPC or EACCES.
 */
export function createHomeDir(home: string): void {
  try {
    mkdirSync(home, { recursive: true, mode: 0o700 });
    return;
  } catch (e) {
    // A file where a folder of the path should be: nothing can be written there, and the path is the fix.
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOTDIR" || code === "EEXIST") {
      throw new DshError(
        "HOME_UNWRITABLE",
        `cannot create the home ${home}: a part of that path is a file (${code}). Set DSH_HERDR_HOME to a writable directory.`,
      );
    }
    throw fsError(code === "ENOENT" ? (realMkdirError(home) ?? e) : e, `create the home ${home}`);
  }
}

function realMkdirError(home: string): unknown {
  let dir = home;
  while (!existsSync(dirname(dir)) && dirname(dir) !== dir) dir = dirname(dir);
  try {
    mkdirSync(dir, { mode: 0o700 });
    return undefined;
  } catch (e) {
    return e;
  }
}

/**
 * Write (and remove) a probe file in the home: a home on a full or read-only disk is named HOME_UNWRITABLE here,
 * before anything half-starts (a daemon whose log cannot be written cannot say why it stopped).
 */
export function probeHomeWritable(home: string): void {
  const probe = join(home, `.write-probe-${process.pid}`);
  let fd: number | undefined;
  try {
    fd = openSync(probe, "w", 0o600);
    writeSync(fd, Buffer.alloc(512, 10));
  } catch (e) {
    throw fsError(e, `write in the home ${home}`);
  } finally {
    if (fd !== undefined) closeSync(fd);
    try {
      unlinkSync(probe);
    } catch {
      // not created
    }
  }
}

/** A home others may read or enter (e.g. 0755 from an older version or a hand-made dir) becomes 0700. */
async function tightenHome(home: string): Promise<void> {
  const st = await stat(home);
  if ((st.mode & 0o077) === 0) return;
  try {
    await chmod(home, 0o700);
  } catch (e) {
    throw fsError(e, `make the home ${home} private (chmod 700)`);
  }
}

export async function assertHomeSafe(home: string): Promise<void> {
  const st = await stat(home);
  if (!st.isDirectory()) {
    throw new DshError(
      "HOME_UNSAFE",
      `${home} is not a directory; move it away or set DSH_HERDR_HOME to another path.`,
    );
  }
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) {
    throw new DshError(
      "HOME_NOT_YOURS",
      `${home} is owned by uid ${st.uid}, not by you (uid ${uid}); fix with \`chown -R ${uid} ${home}\` or set DSH_HERDR_HOME to a directory you own.`,
    );
  }
  if ((st.mode & 0o022) !== 0) {
    throw new DshError(
      "HOME_UNSAFE",
      `${home} is writable by group or others (mode ${(st.mode & 0o777).toString(8)}); fix with \`chmod 700 ${home}\`.`,
    );
  }
}
