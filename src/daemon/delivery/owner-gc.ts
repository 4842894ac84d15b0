// Owner directories (owners/<id>/: the owner's secret and its outbox) are kept only for owners with work: an open
// task or a delivery not yet acked. An owner that only attached (its first attach writes the secret) leaves no
// directory once it detaches; empty ones an older daemon left are collected at start. A collected owner that
// attaches again is issued a new secret (the owner extension keeps the newest), and it has nothing to move.
import { listOwners, pendingDeliveries, readOutboxSized, removeOwnerDir } from "../../store/outbox.js";
import type { Logger } from "../server/server.js";

export interface OwnerGcDeps {
  home: string;
  log: Logger;
  /** The owner has a task that is not closed. */
  hasOpenTask(owner: string): boolean;
  /** The delivery service holds the owner now: attached, its outbox in memory or being written. */
  holds(owner: string): boolean;
}

/** Remove owners/<owner> when it holds nothing live; true when removed. A read that fails keeps the directory. */
export async function collectOwnerDir(deps: OwnerGcDeps, owner: string): Promise<boolean> {
  const busy = () => deps.hasOpenTask(owner) || deps.holds(owner);
  if (busy()) return false;
  const box = await readOutboxSized(deps.home, owner).catch(() => undefined);
  if (box === undefined || pendingDeliveries(box.records).length > 0) return false;
  if (busy()) return false; // attached or given work while the outbox was read
  await removeOwnerDir(deps.home, owner);
  return true;
}

/** Every owner directory with nothing live in it, removed (at start, after recovery); resolves with how many. */
export async function collectOwnerDirs(deps: OwnerGcDeps): Promise<number> {
  let n = 0;
  for (const owner of await listOwners(deps.home)) {
    try {
      if (await collectOwnerDir(deps, owner)) n++;
    } catch (e) {
      deps.log.warn({ owner, err: (e as Error).message }, "cannot remove an idle owner directory; kept");
    }
  }
  if (n > 0) deps.log.info({ removed: n }, "idle owner directories removed");
  return n;
}
