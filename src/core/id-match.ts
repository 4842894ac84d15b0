// Task ids as a person types them: a full id, a unique prefix, a unique suffix (the 4 characters shown in agent
// names, e.g. `vzzn`) or the agent name (`worker-flash-vzzn`); an ambiguous one lists the candidates with their
// briefs, an unknown one the closest ids.
import { DshError } from "./errors.js";

/** What resolution knows of a task: its id, and (from the index) its agent name and brief when recorded. */
export interface KnownTask {
  taskId: string;
  name?: string;
  brief?: string;
  /** Other ids of the same task (a relayed task's id on its machine, which its agent name ends with). */
  aliases?: string[];
}

/** Edit distance, for "did you mean"; ids are 12 chars so the quadratic cost is nothing. */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      cur.push(Math.min((prev[j] ?? 0) + 1, (cur[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + cost));
    }
    prev = cur;
  }
  return prev[b.length] ?? 0;
}

/** The ids nearest to `input` (compared against the same-length prefix and suffix of each id), best first. */
export function closestIds(input: string, known: readonly string[], max = 3): string[] {
  const q = input.toLowerCase();
  const n = Math.max(q.length, 1);
  return known
    .map((id) => ({ id, d: Math.min(editDistance(q, id.slice(0, n)), editDistance(q, id.slice(-n))) }))
    .sort((x, y) => x.d - y.d || x.id.localeCompare(y.id))
    .slice(0, max)
    .map((x) => x.id);
}

const asKnown = (k: string | KnownTask): KnownTask => (typeof k === "string" ? { taskId: k } : k);

/** One candidate line of an ambiguity message: id, agent name, brief. */
function candidateLine(t: KnownTask): string {
  return `  ${t.taskId}${t.name ? `  ${t.name}` : ""}${t.brief ? `  ${t.brief}` : ""}`;
}

/** Resolve a full id, unique prefix, unique suffix or agent name against the known tasks. */
export function resolveTaskId(input: string, knownIn: readonly (string | KnownTask)[]): string {
  const q = input.trim().toLowerCase();
  if (q.length === 0)
    throw new DshError(
      "BAD_PARAMS",
      "empty task id. Pass an id, its last 4 characters or the agent name from `dsh-herdr list --all`.",
      { usage: true },
    );
  const known = knownIn.map(asKnown);
  if (known.some((t) => t.taskId === q)) return q;
  const byAlias = known.filter((t) => t.aliases?.includes(q));
  if (byAlias.length === 1) return byAlias[0]!.taskId;
  // An agent name: exact when recorded; else its trailing `-xxxx` is the id's suffix (names end in the last 4).
  const byName = known.filter((t) => t.name !== undefined && t.name.toLowerCase() === q);
  if (byName.length === 1) return byName[0]!.taskId;
  const nameTail = /^[a-z][a-z0-9-]*-([0-9a-z]{4})$/.exec(q)?.[1];
  const matches = new Map<string, KnownTask>();
  for (const t of byName) matches.set(t.taskId, t);
  if (byName.length === 0) {
    for (const t of known) {
      const ids = [t.taskId, ...(t.aliases ?? [])];
      if (ids.some((id) => id.startsWith(q) || id.endsWith(q))) matches.set(t.taskId, t);
      else if (nameTail !== undefined && t.name === undefined && ids.some((id) => id.endsWith(nameTail)))
        matches.set(t.taskId, t);
    }
  }
  if (matches.size === 1) return [...matches.keys()][0]!;
  if (matches.size > 1) {
    const list = [...matches.values()].sort((a, b) => a.taskId.localeCompare(b.taskId));
    const shown = list.slice(0, 8).map(candidateLine);
    if (list.length > 8) shown.push(`  … and ${list.length - 8} more`);
    throw new DshError(
      "BAD_TASK_ID",
      `"${input}" matches ${list.length} tasks; type more characters of the id:\n${shown.join("\n")}`,
      { candidates: list.map((t) => t.taskId) },
    );
  }
  const near = closestIds(
    q,
    known.map((t) => t.taskId),
  );
  const hint = near.length > 0 ? ` Closest: ${near.join(", ")}.` : " There are no tasks yet.";
  throw new DshError("TASK_NOT_FOUND", `no task matches "${input}".${hint} See \`dsh-herdr list --all\`.`);
}
