// Spend: USD as people read it, and usage totals per owner and per day (`dsh-herdr usage`, budget.perDay). Pure: the
// caller says which day a task belongs to (its local calendar day, src/store/usage-totals.ts).
import type { CapName, Usage } from "./types.js";

export type { CapName };

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

// ---- caps that pause and ask ----

export const CAP_NAMES: readonly CapName[] = ["cost", "outputTokens", "turns"];

/** The caps a spawn asks for (task.spawn, a definition, config.json `budget`): USD, output tokens, turns. */
export interface CapLimits {
  maxCost?: number;
  maxOutputTokens?: number;
  maxTurns?: number;
}

const LIMIT_KEY: Record<CapName, keyof CapLimits> = {
  cost: "maxCost",
  outputTokens: "maxOutputTokens",
  turns: "maxTurns",
};

/** Only the caps a request gave (a respond's params carry its message too). */
export function givenCaps(p: CapLimits): CapLimits {
  const out: CapLimits = {};
  for (const name of CAP_NAMES) {
    const v = p[LIMIT_KEY[name]];
    if (v !== undefined) out[LIMIT_KEY[name]] = v;
  }
  return out;
}

/** A task's caps as it runs: the limit now (raised by each respond) and the amount a respond raises it by. */
export type TaskCaps = Partial<Record<CapName, { limit: number; step: number }>>;

/** A cap the running cycle reached: which, its limit, what was spent, and what a respond adds. */
export interface CapHit {
  cap: CapName;
  limit: number;
  spent: number;
  step: number;
}

/** The task's caps: each one asked for at spawn, else the config's default; undefined when there is none. */
export function capsFor(asked: CapLimits, defaults: CapLimits = {}): TaskCaps | undefined {
  const caps: TaskCaps = {};
  for (const name of CAP_NAMES) {
    const v = asked[LIMIT_KEY[name]] ?? defaults[LIMIT_KEY[name]];
    if (v !== undefined && v > 0) caps[name] = { limit: v, step: v };
  }
  return Object.keys(caps).length > 0 ? caps : undefined;
}

/** What a cap counts in the task's usage (every cycle so far): USD, output tokens, assistant messages (turns). */
export function spentOn(cap: CapName, u: Pick<Usage, "assistant" | "outputTokens" | "cost">): number {
  return cap === "cost" ? (u.cost ?? 0) : cap === "outputTokens" ? u.outputTokens : u.assistant;
}

/** The first cap (cost, output tokens, turns) the usage has reached, or undefined. */
export function capCrossed(
  caps: TaskCaps | undefined,
  u: Pick<Usage, "assistant" | "outputTokens" | "cost">,
): CapHit | undefined {
  for (const name of CAP_NAMES) {
    const c = caps?.[name];
    if (!c) continue;
    const spent = spentOn(name, u);
    if (spent >= c.limit) return { cap: name, limit: c.limit, spent, step: c.step };
  }
  return undefined;
}

const amount = (cap: CapName, n: number): string => (cap === "cost" ? formatUsd(n) : String(n));
const CAP_WORDS: Record<CapName, string> = { cost: "cost", outputTokens: "output-token", turns: "turn" };

/** `cost cap 5.00 $ reached (7.00 $ spent); respond to continue with another 5.00 $`: the blocked cycle's needs. */
export function capNeeds(hit: CapHit): string {
  return `${CAP_WORDS[hit.cap]} cap ${amount(hit.cap, hit.limit)} reached (${spentAmount(hit)} spent); respond to continue with another ${amount(hit.cap, hit.step)}`;
}

/** The spend as shown: cents, unless cents would round a spend past the cap down to the cap (0.0512 is not 0.05). */
function spentAmount(hit: CapHit): string {
  const shown = amount(hit.cap, hit.spent);
  if (hit.cap !== "cost" || hit.spent <= hit.limit || Number.parseFloat(shown) > hit.limit) return shown;
  for (let d = 3; d <= 9; d++) if (Number(hit.spent.toFixed(d)) > hit.limit) return `${hit.spent.toFixed(d)} $`;
  return shown;
}

/**
 * The caps after a respond: every cap the usage has reached gets its amount again on top of what was spent (the
 * owner was told "another 5.00 $"), and a cap given with the respond is that much more from now on (and the amount of
 * the next raise). Caps not reached stay as they are.
 */
export function raiseCaps(
  caps: TaskCaps | undefined,
  u: Pick<Usage, "assistant" | "outputTokens" | "cost">,
  given: CapLimits,
): TaskCaps | undefined {
  const next: TaskCaps = { ...(caps ?? {}) };
  for (const name of CAP_NAMES) {
    const spent = spentOn(name, u);
    const over = given[LIMIT_KEY[name]];
    const c = next[name];
    if (over !== undefined && over > 0) next[name] = { limit: addUsd(spent, over), step: over };
    else if (c && spent >= c.limit) next[name] = { limit: addUsd(spent, c.step), step: c.step };
  }
  return Object.keys(next).length > 0 ? next : undefined;
}

// ---- budget.perDay: spent and reserved ----

/** What a task queued or running reserves of budget.perDay when it has no cost cap and config gives no estimate. */
export const DEFAULT_RESERVE_PER_TASK = 1;

/** A task's reservation against budget.perDay while its cycle is queued or running: its cost cap, else the estimate. */
export function dayReservation(caps: TaskCaps | undefined, estimate: number): number {
  return caps?.cost?.limit ?? estimate;
}

/** One task's part of an owner's day: what it spent, and while queued or running the rest of its reservation. */
export interface DayShare {
  spent: number;
  /** The reservation when the task is queued or running; undefined once its cycle settled (then only its spend counts). */
  reserved?: number;
}

/** An owner's day: the spend, the reservations not yet spent, and how many tasks hold one. */
export interface DayUse {
  spent: number;
  reserved: number;
  holders: number;
}

/** The day's use over the owner's tasks: a task counts the larger of its spend and its reservation while it runs. */
export function dayUse(shares: Iterable<DayShare>): DayUse {
  const use: DayUse = { spent: 0, reserved: 0, holders: 0 };
  for (const s of shares) {
    use.spent = addUsd(use.spent, s.spent);
    if (s.reserved === undefined) continue;
    use.holders++;
    if (s.reserved > s.spent) use.reserved = addUsd(use.reserved, s.reserved - s.spent);
  }
  return use;
}

/** The day's budget is used up: what is spent and reserved reaches perDay, so no further task may be started. */
export const dayExhausted = (use: DayUse, perDay: number): boolean => addUsd(use.spent, use.reserved) >= perDay;
