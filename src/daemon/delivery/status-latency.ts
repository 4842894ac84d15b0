// The daemon's status-latency counter: for each settle it announces, the time from the settle (the moment the
// evidence it read made the lifecycle settle the cycle) to the announcement that owners and the board hear. The last
// hour only, in a fixed ring (memory is bounded however many tasks settle); read by the board (/api/latency).
import {
  LATENCY_WINDOW_MS,
  latencyBuckets,
  type LatencyBucket,
  type LatencySample,
} from "../../core/status-latency.js";
import type { StatusListener } from "../task/supervisor-types.js";

/** At most this many settles are kept (the oldest go first): 16 bytes each. */
export const LATENCY_CAPACITY = 8192;

export class StatusLatency {
  private readonly at = new Float64Array(LATENCY_CAPACITY);
  private readonly ms = new Float64Array(LATENCY_CAPACITY);
  private next = 0;
  private size = 0;

  constructor(private readonly now: () => number = Date.now) {}

  record(settledAt: number): void {
    const t = this.now();
    this.at[this.next] = t;
    this.ms[this.next] = Math.max(0, t - settledAt);
    this.next = (this.next + 1) % LATENCY_CAPACITY;
    this.size = Math.min(LATENCY_CAPACITY, this.size + 1);
  }

  *samples(): Iterable<LatencySample> {
    const from = this.now() - LATENCY_WINDOW_MS;
    for (let i = 0; i < this.size; i++) {
      const j = (this.next - this.size + i + LATENCY_CAPACITY) % LATENCY_CAPACITY;
      if (this.at[j]! >= from) yield { at: this.at[j]!, ms: this.ms[j]! };
    }
  }

  /** The last hour in 5-minute buckets. */
  buckets(): LatencyBucket[] {
    return latencyBuckets(this.samples(), this.now());
  }
}

/**
 * Counts every settle the source announces from now on. Listeners run in order: registered after the owner
 * delivery's, the time taken includes the delivery's enqueue. A cycle re-announced at start-up is not a new settle.
 */
export function watchStatusLatency(
  source: { onStatus(fn: StatusListener): () => void },
  now?: () => number,
): StatusLatency {
  const latency = new StatusLatency(now);
  source.onStatus((_live, result, info) => {
    const at = result.timing?.settledAt;
    if (info.settled && !info.recovered && at !== undefined) latency.record(at);
  });
  return latency;
}
