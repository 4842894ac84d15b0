// Spend: USD as people read it, and usage totals per owner and per day (`dsh-herdr usage`, budget.perDay). Pure: the
// caller says which day a task belongs to (its local calendar day, src/store/usage-totals.ts).
import type { Usage } from "./types.js";

/** `0.0123 $` below a cent, `5.00 $` from a cent on: a cap, a spend and a total read the same everywhere. */
export function formatUsd(usd: number): string {
  const n = Number.isFinite(usd) && usd > 0 ? usd : 0;
  return `${n > 0 && n < 0.01 ? n.toFixed(4) : n.toFixed(2)} $`;
}

/** USD sums kept to 1e-9 (below any real price step), as the session fold keeps them (session-facts.ts). */
export const addUsd = (a: number, b: number): number => Math.round((a + b) * 1e9) / 1e9;

export interface SpendRow {
  taskId: string;
  owner: string;
  /** Epoch ms the task was spawned: a task's spend counts on the day it was spawned. */
  createdAt: number;
  usage?: Usage;
}

export interface UsageTotals {
  tasks: number;
  cost: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** Tasks whose result carries no cost (written before costs were recorded): their spend is unknown. */
  unpriced: number;
}

export interface UsageReport {
  total: UsageTotals;
  owners: (UsageTotals & { owner: string })[];
  /** One row per day and owner, newest day first. */
  days: (UsageTotals & { day: string; owner: string })[];
}

const zero = (): UsageTotals => ({
  tasks: 0,
  cost: 0,
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  unpriced: 0,
});

function add(t: UsageTotals, u: Usage | undefined): void {
  t.tasks++;
  if (u?.cost === undefined) t.unpriced++;
  t.cost = addUsd(t.cost, u?.cost ?? 0);
  t.inputTokens += u?.inputTokens ?? 0;
  t.outputTokens += u?.outputTokens ?? 0;
  t.cacheReadTokens += u?.cacheReadTokens ?? 0;
  t.cacheWriteTokens += u?.cacheWriteTokens ?? 0;
}

/** Totals over every row, per owner, and per day and owner (`dayOf` names a row's day, e.g. `2026-12-01`). */
export function usageReport(rows: readonly SpendRow[], dayOf: (ms: number) => string): UsageReport {
  const total = zero();
  const owners = new Map<string, UsageTotals>();
  const days = new Map<string, UsageTotals & { day: string; owner: string }>();
  for (const r of rows) {
    add(total, r.usage);
    let o = owners.get(r.owner);
    if (!o) owners.set(r.owner, (o = zero()));
    add(o, r.usage);
    const day = dayOf(r.createdAt);
    const key = `${day}\u0000${r.owner}`;
    let d = days.get(key);
    if (!d) days.set(key, (d = { day, owner: r.owner, ...zero() }));
    add(d, r.usage);
  }
  return {
    total,
    owners: [...owners]
      .map(([owner, t]) => ({ owner, ...t }))
      .sort((a, b) => b.cost - a.cost || (a.owner < b.owner ? -1 : 1)),
    days: [...days.values()].sort((a, b) => (a.day !== b.day ? (a.day < b.day ? 1 : -1) : a.owner < b.owner ? -1 : 1)),
  };
}
