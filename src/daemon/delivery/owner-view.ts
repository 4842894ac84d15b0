// What a connection is shown of owners: a pi session's id is what a hello as that owner names, so only that owner's
// own connections see it; everyone else (the CLI, other owners) sees a label, `pi-` and 12 hex of the id's sha256,
// which names the owner in listings and filters (`--owner pi-…`) and proves nothing. "cli" is shown as is.
import type { AgentResult } from "../../core/types.js";
import { ownerLabel } from "../server/owner-label.js";
import type { Connection } from "../server/server-types.js";
import type { Supervisor } from "../task/supervisor-types.js";

const LABEL = /^pi-[0-9a-f]{12}$/;

export { ownerLabel };

/** How `owner` is shown on this connection: itself to that owner and for "cli", else its label. */
export function shownOwner(conn: Connection | undefined, owner: string): string {
  if (owner === "cli" || (conn?.kind === "owner" && conn.ownerId === owner)) return owner;
  return ownerLabel(owner);
}

/** A result (or listing row) as this connection may see it: its owner shown through shownOwner. */
export function viewOf<T extends Pick<AgentResult, "owner">>(conn: Connection | undefined, r: T): T {
  if (r.owner === undefined || r.owner === shownOwner(conn, r.owner)) return r;
  return { ...r, owner: shownOwner(conn, r.owner) };
}

/**
 * An owner named in params (a filter, `abort --all --owner`, `spawn --owner`): an id as is, or a label read back to
 * the id of a known owner (`owners`: the ids of every task's owner). An unknown label stays itself (matches nothing).
 */
export function resolveOwner(named: string, owners: () => Iterable<string>): string {
  if (!LABEL.test(named)) return named;
  for (const o of owners()) if (o !== "cli" && ownerLabel(o) === named) return o;
  return named;
}

/** Every owner with a task here: the open tasks' and the task index's. */
export function knownOwners(sup: Supervisor): Set<string> {
  const out = new Set<string>();
  for (const live of sup.tasks.values()) out.add(live.rec.owner);
  for (const t of sup.deps.store.listTasks()) if (t.owner) out.add(t.owner);
  return out;
}

/** A task's owner: the open task's, else the task index's, else its task.json's; undefined when there is no such task. */
export async function taskOwnerOf(sup: Supervisor, taskId: string): Promise<string | undefined> {
  const live = sup.tasks.get(taskId);
  if (live) return live.rec.owner;
  try {
    const indexed = sup.deps.store.getSummary(taskId)?.owner;
    if (indexed !== undefined) return indexed;
    return (await sup.deps.store.readTask(taskId)).owner;
  } catch {
    return undefined; // not a task id, or no task dir: the handler says so by name
  }
}
