// Spend limits in the daemon (issue 26): a task's caps seen reached as its session grows (the evidence path turns it
// into a cap_reached event; the lifecycle machine settles the cycle blocked), the raise a respond gives, and
// budget.perDay checked at spawn and again when a task starts. The arithmetic is src/core/budget.ts; this module only
// reads the tasks' evidence.
import {
  addUsd,
  capCrossed,
  DEFAULT_RESERVE_PER_TASK,
  dayExhausted,
  dayReservation,
  dayUse,
  formatUsd,
  raiseCaps,
  type CapHit,
  type CapLimits,
  type DayShare,
  type DayUse,
} from "../../core/budget.js";
import { DshError } from "../../core/errors.js";
import type { Config } from "../../store/config.js";
import type { TaskStore } from "../../store/task-store.js";
import { formatLocalTime, nextLocalMidnight, startOfLocalDay } from "../../store/usage-day.js";
import type { Live } from "./live.js";
import type { Supervisor } from "./supervisor-types.js";

/**
 * The cap the running cycle's usage has reached, when the cycle would go on spending: its last assistant message
 * called tools (other than a lone crew_report, which ends the cycle), whether or not their results are in yet. A
 * message that ends the cycle costs nothing more to let be.
 */
export function capReached(live: Pick<Live, "rec" | "files">): CapHit | undefined {
  const caps = live.rec.caps;
  const f = caps && live.files?.facts();
  if (!f || f.cycleSettled || f.lastStopReason !== "toolUse") return undefined;
  const calls = f.lastToolCalls;
  if (calls.length === 0 || (calls.length === 1 && calls[0]!.name === "crew_report")) return undefined;
  return capCrossed(caps, f.usage);
}

/** A respond: each reached cap gets its amount again on top of the spend, or the amount given with the respond. */
export function raiseForRespond(live: Pick<Live, "files" | "result" | "rec">, given: CapLimits): void {
  const usage = live.files?.facts()?.usage ?? live.result?.usage;
  if (!usage) return;
  const caps = raiseCaps(live.rec.caps, usage, given);
  if (caps) live.rec.caps = caps;
}

/** What the day's budget reads: the config, the task index (settled and closed tasks) and the open tasks. */
export interface DayBudgetView {
  config(): Pick<Config, "budget">;
  store: Pick<TaskStore, "listTasks">;
  tasks: Iterable<Pick<Live, "rec" | "state" | "files" | "result">>;
  now: number;
}

/**
 * Spawns being recorded, per store: each holds its reservation from the check at task.spawn until its task is
 * registered (then the open task counts), so spawns at once cannot all pass the same check.
 */
const holds = new WeakMap<object, Map<symbol, { owner: string; usd: number }>>();

const reservePerTask = (c: Pick<Config, "budget">): number => c.budget?.reservePerTask ?? DEFAULT_RESERVE_PER_TASK;

/** The owner's day: what its tasks spawned today spent, and what those queued or running still reserve. */
function ownerDay(v: DayBudgetView, owner: string, exclude?: string): DayUse {
  const estimate = reservePerTask(v.config());
  const since = startOfLocalDay(v.now);
  const shares: DayShare[] = [];
  const open = new Set<string>();
  for (const live of v.tasks) {
    open.add(live.rec.taskId);
    if (live.rec.owner !== owner || live.rec.taskId === exclude || live.rec.createdAt < since) continue;
    const spent = live.files?.facts()?.usage.cost ?? live.result?.usage?.cost ?? 0;
    const phase = live.state.phase.name;
    const running = phase !== "settled" && phase !== "closed";
    shares.push(running ? { spent, reserved: dayReservation(live.rec.caps, estimate) } : { spent });
  }
  for (const s of v.store.listTasks({ owner, since }))
    if (!open.has(s.taskId) && s.taskId !== exclude) shares.push({ spent: s.row?.usage?.cost ?? 0 });
  for (const h of holds.get(v.store)?.values() ?? []) if (h.owner === owner) shares.push({ spent: 0, reserved: h.usd });
  return dayUse(shares);
}

/** Refused by name when the owner's day is used up (BUDGET_EXCEEDED): the spend, the reservations, when it resets. */
function assertDay(v: DayBudgetView, owner: string, exclude?: string): void {
  const c = v.config();
  const perDay = c.budget?.perDay;
  if (perDay === undefined) return;
  const use = ownerDay(v, owner, exclude);
  if (!dayExhausted(use, perDay)) return;
  const reserved =
    use.holders > 0 && use.reserved > 0
      ? ` and reserves ${formatUsd(use.reserved)} for ${use.holders} task(s) queued or running (each its cost cap, else budget.reservePerTask ${formatUsd(reservePerTask(c))}, until its spend is known)`
      : "";
  throw new DshError(
    "BUDGET_EXCEEDED",
    `owner ${owner} has spent ${formatUsd(use.spent)} today${reserved}, its budget.perDay is ${formatUsd(perDay)}; the day's budget resets at ${formatLocalTime(nextLocalMidnight(v.now))}. Spawn again then, or raise it: dsh-herdr config set budget.perDay ${Math.ceil(addUsd(addUsd(use.spent, use.reserved), perDay))}`,
    { spent: use.spent, reserved: use.reserved, perDay, resetsAt: nextLocalMidnight(v.now) },
  );
}

const supView = (sup: Supervisor, now: number): DayBudgetView => ({
  config: sup.deps.config,
  store: sup.deps.store,
  tasks: sup.tasks.values(),
  now,
});

/**
 * budget.perDay at task.spawn: what the owner's tasks spawned today (local day) spent, plus what those queued or
 * running reserve (each its cost cap, else budget.reservePerTask). A spawn when that reaches the budget is refused,
 * naming the total and when the day resets.
 */
export function assertDayBudget(sup: Supervisor, owner: string, now = Date.now()): void {
  assertDay(supView(sup, now), owner);
}

/**
 * The check and the spawn's own reservation in one synchronous step (spawns at once each see the ones before them).
 * The returned function drops the hold: once the task is registered (it counts as an open task), or when the spawn
 * fails.
 */
export function holdDayBudget(sup: Supervisor, owner: string, usd: number | undefined, now = Date.now()): () => void {
  const c = sup.deps.config();
  if (c.budget?.perDay === undefined) return () => undefined;
  assertDay(supView(sup, now), owner);
  let mine = holds.get(sup.deps.store);
  if (!mine) holds.set(sup.deps.store, (mine = new Map()));
  const key = Symbol(owner);
  mine.set(key, { owner, usd: usd ?? reservePerTask(c) });
  return () => void mine.delete(key);
}

/**
 * A task about to start (its slot taken, maybe after waiting in the queue): the owner's day is checked again without
 * this task's own reservation, so a queued task whose day was spent while it waited does not start.
 */
export function assertDayBudgetAtStart(v: DayBudgetView, owner: string, taskId: string): void {
  assertDay(v, owner, taskId);
}
