// Spend limits in the daemon (issue 26): a task's caps seen reached as its session grows (the evidence path turns it
// into a cap_reached event; the lifecycle machine settles the cycle blocked), the raise a respond gives, and
// budget.perDay checked at spawn. The arithmetic is src/core/budget.ts; this module only reads the task's evidence.
import { addUsd, capCrossed, formatUsd, raiseCaps, type CapHit, type CapLimits } from "../core/budget.js";
import { DshError } from "../core/errors.js";
import { formatLocalTime, nextLocalMidnight, startOfLocalDay } from "../store/usage-day.js";
import type { Live } from "./live.js";
import type { Supervisor } from "./supervisor-types.js";

/**
 * The cap the running cycle's usage has reached, when the cycle would go on spending: its last assistant message
 * called tools (other than a lone crew_report, which ends the cycle), whether or not their results are in yet. A
 * message that ends the cycle costs nothing more to let be.
 */
export function capReached(live: Live): CapHit | undefined {
  const caps = live.rec.caps;
  const f = caps && live.files?.facts();
  if (!f || f.cycleSettled || f.lastStopReason !== "toolUse") return undefined;
  const calls = f.lastToolCalls;
  if (calls.length === 0 || (calls.length === 1 && calls[0]!.name === "crew_report")) return undefined;
  return capCrossed(caps, f.usage);
}

/** A respond: each reached cap gets its amount again on top of the spend, or the amount given with the respond. */
export function raiseForRespond(live: Live, given: CapLimits): void {
  const usage = live.files?.facts()?.usage ?? live.result?.usage;
  if (!usage) return;
  const caps = raiseCaps(live.rec.caps, usage, given);
  if (caps) live.rec.caps = caps;
}

/**
 * budget.perDay: what the owner's tasks spawned today (local day) cost so far, open ones as they run. A spawn when it
 * is spent is refused, naming the total and when the day resets.
 */
export function assertDayBudget(sup: Supervisor, owner: string, now = Date.now()): void {
  const perDay = sup.deps.config().budget?.perDay;
  if (perDay === undefined) return;
  let spent = 0;
  for (const s of sup.deps.store.listTasks({ owner, since: startOfLocalDay(now) })) {
    const live = sup.tasks.get(s.taskId);
    const cost = live?.files?.facts()?.usage.cost ?? live?.result?.usage?.cost ?? s.row?.usage?.cost ?? 0;
    spent = addUsd(spent, cost);
  }
  if (spent < perDay) return;
  throw new DshError(
    "BUDGET_EXCEEDED",
    `owner ${owner} has spent ${formatUsd(spent)} today, its budget.perDay is ${formatUsd(perDay)}; the day's budget resets at ${formatLocalTime(nextLocalMidnight(now))}. Spawn again then, or raise it: dsh-herdr config set budget.perDay ${Math.ceil(spent + perDay)}`,
    { spent, perDay, resetsAt: nextLocalMidnight(now) },
  );
}
