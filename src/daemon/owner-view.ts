// What a connection is shown of owners: a pi session's id is what a hello as that owner names, so only that owner's
// own connections see it; everyone else (the CLI, other owners) sees a label, `pi-` and 12 hex of the id's sha256,
// which names the owner in listings and filters (`--owner pi-…`) and proves nothing. "cli" is shown as is.
import { createHash } from "node:crypto";
import type { AgentResult } from "../core/types.js";
import type { Connection } from "./server-types.js";
import type { Supervisor } from "./supervisor-types.js";

const LABEL = /^pi-[0-9a-f]{12}$/;

/** The non-secret label of a pi owner (stable: the same id always gives the same label). */
export function ownerLabel(ownerId: string): string {
  return `pi-${createHash("sha256").update(ownerId, "utf8").digest("hex").slice(0, 12)}`;
}

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
