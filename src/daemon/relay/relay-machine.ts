// A relayed task goes through the same lifecycle machine as a local one (src/core/lifecycle/task-cycle.ts): the relay feeds
// it the remote's events (remote_started, remote_settled, close, restored) and carries out the effects that mean
// something here (journal first, then the settled record). Timers, slots, the child and its
// prompt are the other machine's daemon's, so those effects have nothing to do here.
import type { CycleEvent } from "../../core/lifecycle/task-cycle.js";
import type { RemoteSettled } from "../task/runner-types.js";
import type { RelayContext, RelayLive } from "./relay-types.js";

/**
 * Feed one event; `onSettled` records the settled result (the machine asks for it once per cycle, after the settle
 * record is journaled, or with the record to journal first: RemoteSettled). The phase changes at once (in the task's
 * runner, its one writer); the promise ends with the effects.
 */
export async function stepRemote(
  _ctx: RelayContext,
  live: RelayLive,
  ev: CycleEvent,
  onSettled?: RemoteSettled,
): Promise<void> {
  await live.dispatchRemote(ev, onSettled);
}
