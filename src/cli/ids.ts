// Task ids as a person types them: a full id or any unique prefix; an unknown id lists the closest.
import { DshError } from "../core/errors.js";

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

/** The ids nearest to `input` (compared against the same-length prefix of each id), best first. */
export function closestIds(input: string, known: readonly string[], max = 3): string[] {
  const q = input.toLowerCase();
  return known
    .map((id) => ({ id, d: editDistance(q, id.slice(0, Math.max(q.length, 1))) }))
    .sort((x, y) => x.d - y.d || x.id.localeCompare(y.id))
    .slice(0, max)
    .map((x) => x.id);
}

/** Resolve a full id or unique prefix against the known ids. */
export function resolveTaskId(input: string, known: readonly string[]): string {
  const q = input.trim().toLowerCase();
  if (q.length === 0) throw new DshError("BAD_PARAMS", "empty task id. Pass an id or prefix from `dsh-herdr list --all`.", { usage: true });
  if (known.includes(q)) return q;
  const matches = known.filter((id) => id.startsWith(q));
  if (matches.length === 1) return matches[0] as string;
  if (matches.length > 1) {
    const shown = matches.slice(0, 5).join(", ") + (matches.length > 5 ? ", …" : "");
    throw new DshError("BAD_TASK_ID", `"${input}" matches ${matches.length} tasks (${shown}). Type more characters of the id.`);
  }
  const near = closestIds(q, known);
  const hint = near.length > 0 ? ` Closest: ${near.join(", ")}.` : " There are no tasks yet.";
  throw new DshError("TASK_NOT_FOUND", `no task matches "${input}".${hint} See \`dsh-herdr list --all\`.`);
}
