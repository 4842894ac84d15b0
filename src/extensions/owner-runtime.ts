// The owner extension's process-global runtime record. pi builds a fresh extension instance (and, with jiti's module
// cache off, fresh modules) for every session it starts in a process: /new, /resume, /fork, /clone, /reload. What
// must outlive one instance lives here: the owner secrets issued to this process's sessions (a /fork before the first
// assistant message loses the session's entries on pi 0.73, so the new session reads the secret from here), the
// owner that is active (the session a /fork leaves), and the owners this runtime attached, whose subagents a runtime
// of another version (a /reload after an upgrade) aborts before it attaches.
import { connect } from "../client/index.js";
import { crewStatusOf, isOpenCrewStatus } from "../core/crew/crew-delivery.js";
import type { AgentStatus } from "../core/types.js";

/** Bump when an owner extension can no longer take over the work of the previous one in the same pi process. */
export const OWNER_RUNTIME_VERSION = 1;

const KEY = Symbol.for("dsh-herdr.owner-runtime");

export interface OwnerRuntime {
  version: number;
  /** Owners (pi session ids) this runtime attached: the work a stale runtime leaves behind. */
  owners: Set<string>;
  /** Owner secrets of this process's sessions, by owner id. */
  secrets: Map<string, string>;
  /** The owner attached last: the session a /fork or /clone leaves. */
  active?: string;
}

/** AgentResult statuses that can be open crew sessions (running, needs_input, completed until crew_done). */
export const OPEN_STATUSES: AgentStatus[] = ["starting", "working", "running", "blocked", "completed"];

/**
 * This process's runtime of this version, made on first use. A record of another version is replaced and returned
 * as `stale`; its secrets and active owner carry over (they are facts about the sessions, not about the code).
 */
export function ownerRuntime(global: Record<symbol, unknown> = globalThis as never): {
  runtime: OwnerRuntime;
  stale?: { version: unknown; owners: string[] };
} {
  const prev = global[KEY] as Partial<OwnerRuntime> | undefined;
  if (prev && prev.version === OWNER_RUNTIME_VERSION) return { runtime: prev as OwnerRuntime };
  const runtime: OwnerRuntime = {
    version: OWNER_RUNTIME_VERSION,
    owners: new Set(),
    secrets: prev?.secrets instanceof Map ? new Map(prev.secrets) : new Map(),
    ...(typeof prev?.active === "string" ? { active: prev.active } : {}),
  };
  global[KEY] = runtime;
  if (!prev) return { runtime };
  const owners = prev.owners instanceof Set ? [...prev.owners].filter((o) => typeof o === "string") : [];
  return { runtime, stale: { version: prev.version, owners } };
}

/**
 * Abort the open tasks of these owners, each over a connection of its own (hello as that owner with its secret,
 * never attached, so nothing is pushed to it): the daemon then queues their abort cards, shown when each owner is
 * next active.
 */
export async function abortOpenWork(
  socketPath: string,
  owners: readonly string[],
  secrets: ReadonlyMap<string, string> = new Map(),
): Promise<string[]> {
  const aborted: string[] = [];
  for (const ownerId of owners) {
    const secret = secrets.get(ownerId);
    const c = await connect(socketPath, {
      kind: "owner",
      ownerId,
      connectTimeoutMs: 3000,
      ...(secret ? { secret } : {}),
    }).catch(() => undefined);
    if (!c) continue; // daemon away: nothing of this owner can be running under it either
    try {
      const { tasks } = await c.request(
        "task.list",
        { owner: ownerId, status: OPEN_STATUSES, limit: 1000 },
        { timeoutMs: 10_000 },
      );
      const ids = tasks.filter((t) => isOpenCrewStatus(crewStatusOf(t.status))).map((t) => t.taskId);
      if (ids.length === 0) continue;
      const r = await c.request("task.abort", { taskIds: ids }, { timeoutMs: 10_000 });
      aborted.push(...r.aborted_ids);
    } catch {
      // One owner's failure does not keep the others' work running.
    } finally {
      c.close();
    }
  }
  return aborted;
}
