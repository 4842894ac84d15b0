// Status latency at a glance: the daemon's own measurements of the last hour (from a settle to its announcement),
// cut into buckets with their median and 99th percentile. Pure: the daemon keeps the samples (src/daemon/delivery/status-latency.ts).

/** One settle the daemon announced: when, and how long after the settle it was announced (ms). */
export interface LatencySample {
  at: number;
  ms: number;
}

export interface LatencyBucket {
  /** The bucket's first millisecond (epoch ms); it holds samples in [start, start + bucketMs). */
  start: number;
  count: number;
  /** Nearest-rank percentiles of the bucket's samples; absent when it has none. */
  p50?: number;
  p99?: number;
  max?: number;
}

export const LATENCY_WINDOW_MS = 60 * 60 * 1000;
export const LATENCY_BUCKET_MS = 5 * 60 * 1000;

/** Nearest-rank percentile of sorted values (p in 0..100). */
export function percentileOf(sorted: readonly number[], p: number): number {
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1]!;
}

/**
 * The window ending at `now` in buckets aligned to the clock (12 of 5 minutes for an hour; the last one is the
 * current, partial bucket), oldest first. Samples outside the window are left out.
 */
export function latencyBuckets(
  samples: Iterable<LatencySample>,
  now: number,
  windowMs = LATENCY_WINDOW_MS,
  bucketMs = LATENCY_BUCKET_MS,
): LatencyBucket[] {
  const n = Math.max(1, Math.ceil(windowMs / bucketMs));
  const last = Math.floor(now / bucketMs) * bucketMs;
  const first = last - (n - 1) * bucketMs;
  const values: number[][] = Array.from({ length: n }, () => []);
  for (const s of samples) {
    if (s.at < first || s.at > now) continue;
    values[Math.floor((s.at - first) / bucketMs)]!.push(s.ms);
  }
  return values.map((v, i) => {
    const start = first + i * bucketMs;
    if (v.length === 0) return { start, count: 0 };
    v.sort((a, b) => a - b);
    return { start, count: v.length, p50: percentileOf(v, 50), p99: percentileOf(v, 99), max: v[v.length - 1]! };
  });
}
