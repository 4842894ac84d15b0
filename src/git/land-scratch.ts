// What a killed daemon's landing left in the temp dir: `land --check`'s (and `--rebase`'s) throwaway worktree,
// registered in the user's repository, maybe with its check still running there, and the snapshot's index copies.
// Each directory names the daemon's pid (`dsh-land-tree-<pid>-…`, `dsh-land-<pid>-…`); one whose daemon is gone is
// unregistered from its repository (the repository is in a file beside the tree), its check's process group ended
// (the group ids are in a file beside it too, and only a group whose leader still works in that tree is signalled),
// and removed.
import { readdirSync, readFileSync, realpathSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pidAlive } from "../client/liveness.js";
import { gitMaybe, withGitBounds } from "./run.js";
import { withWorktreeLock } from "./worktree.js";

const NAME = /^dsh-land-(tree-)?(\d+)-/;

/** The file beside a scratch tree where a check's process group ids are written as they start. */
export const CHECK_PGIDS = "check.pgid";

/** Remove the scratch of landings whose daemon is gone; returns the directories removed. */
export async function sweepLandScratch(root = tmpdir()): Promise<string[]> {
  const removed: string[] = [];
  const uid = process.getuid?.();
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return removed;
  }
  for (const name of names) {
    const m = NAME.exec(name);
    if (!m) continue;
    const pid = Number(m[2]);
    if (pid === process.pid || pidAlive(pid)) continue;
    const parent = join(root, name);
    try {
      if (uid !== undefined && statSync(parent).uid !== uid) continue;
    } catch {
      continue;
    }
    if (m[1]) await unregisterTree(parent);
    rmSync(parent, { recursive: true, force: true });
    removed.push(parent);
  }
  return removed;
}

async function unregisterTree(parent: string): Promise<void> {
  const tree = join(parent, "tree");
  endChecks(parent, tree);
  let repo: string;
  try {
    repo = readFileSync(join(parent, "repo"), "utf8").trim();
  } catch {
    return; // made before the repository was written: never registered
  }
  await withGitBounds({ timeoutMs: 60_000 }, () =>
    withWorktreeLock(repo, async () => {
      await gitMaybe(repo, ["worktree", "remove", "--force", tree]).catch(() => undefined);
      await gitMaybe(repo, ["worktree", "prune"]).catch(() => undefined);
    }),
  ).catch(() => undefined);
}

/** SIGKILL each recorded check group whose leader still has its cwd in the tree (a reused pid is left alone). */
function endChecks(parent: string, tree: string): void {
  let ids: number[];
  try {
    ids = readFileSync(join(parent, CHECK_PGIDS), "utf8")
      .split("\n")
      .map(Number)
      .filter((n) => n > 0);
  } catch {
    return;
  }
  let where: string;
  try {
    where = realpathSync(tree);
  } catch {
    return;
  }
  for (const pgid of ids) {
    try {
      const cwd = realpathSync(`/proc/${pgid}/cwd`);
      if (cwd !== where && !cwd.startsWith(`${where}/`)) continue;
      process.kill(-pgid, "SIGKILL");
    } catch {
      // gone, or no /proc to tell (then left alone)
    }
  }
}
