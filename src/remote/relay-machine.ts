// A relayed task goes through the same lifecycle machine as a local one (src/core/task-cycle.ts): the relay feeds
// it the remote's events (remote_started, remote_settled, close, restored) and carries out the effects that mean
// something here (journal first, the lifecycle override, the settled record). Timers, slots, the child and its
// prompt are the other machine's daemon's, so those effects have nothing to do here.
import { step, type CycleEvent, type SettleReason } from "../core/task-cycle.js";
import type { RelayContext, RelayLive } from "./relay-types.js";

/**
 * Feed one event; `onSettled` records the settled result (the machine asks for it once per cycle, after the settle
 * record is journaled). The phase changes at once; the promise ends with the effects.
 */
export async function stepRemote(
  ctx: RelayContext,
  live: RelayLive,
  ev: CycleEvent,
  onSettled?: (reason: SettleReason) => Promise<void>,
): Promise<void> {
  const { state, effects } = step(live.state, ev);
  live.state = state;
  for (const e of effects) {
    if (e.type === "journal") {
      const entry =
        e.entry.type === "settle"
          ? { type: "settle", why: e.entry.why, cycle: e.entry.cycle, reason: e.entry.reason }
          : { ...e.entry };
      // A settle's record is awaited until written: the commit log makes it durable behind us, before the settled
      // status record and the owner's outbox record that follow it (as for a local settle).
      if (e.entry.type === "settle") await ctx.sup.journalWritten(live, { ...entry, remote: true });
      else await ctx.sup.journal(live, { ...entry, remote: true });
    } else if (e.type === "set_lifecycle") live.rec.lifecycle = e.lifecycle;
    else if (e.type === "harvest_settled") await onSettled?.(e.reason);
  }
}
