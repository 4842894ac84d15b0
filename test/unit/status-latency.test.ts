// The board's status-latency figures: the hour cut into 5-minute buckets with nearest-rank p50/p99 (pure), the
// daemon's ring that keeps the last hour in bounded memory, and the `ssh -L` line a socket-served board prints.
import { test } from "node:test";
import assert from "node:assert/strict";
import { latencyBuckets, percentileOf } from "../../src/core/status-latency.js";
import { LATENCY_CAPACITY, StatusLatency, watchStatusLatency } from "../../src/daemon/delivery/status-latency.js";
import { boardLink } from "../../src/board/link.js";
import type { StatusListener } from "../../src/daemon/task/supervisor-types.js";

const MIN = 60_000;
const NOW = 1_000 * 60 * MIN + 2 * MIN + 7; // 2 minutes (and 7 ms) into a 5-minute bucket

test("percentileOf: nearest rank", () => {
  const table: [number[], number, number][] = [
    [[5], 50, 5],
    [[5], 99, 5],
    [[1, 2, 3, 4], 50, 2],
    [[1, 2, 3, 4], 99, 4],
    [Array.from({ length: 100 }, (_, i) => i + 1), 99, 99],
    [Array.from({ length: 100 }, (_, i) => i + 1), 50, 50],
  ];
  for (const [v, p, want] of table) assert.equal(percentileOf(v, p), want, `${p} of ${v.length}`);
});

test("latencyBuckets: twelve clock-aligned buckets, oldest first; samples outside the hour are left out", () => {
  const cases: {
    name: string;
    samples: { at: number; ms: number }[];
    want: Record<number, [number, number?, number?]>;
  }[] = [
    { name: "none", samples: [], want: {} },
    { name: "one now", samples: [{ at: NOW, ms: 12 }], want: { 11: [1, 12, 12] } },
    {
      name: "same bucket, p50/p99",
      samples: [3, 1, 2, 100].map((ms) => ({ at: NOW - MIN, ms })),
      want: { 11: [4, 2, 100] },
    },
    {
      name: "first bucket's first ms counts; one before it does not; the future does not",
      samples: [
        { at: NOW - 2 * MIN - 7 - 55 * MIN, ms: 4 },
        { at: NOW - 2 * MIN - 7 - 55 * MIN - 1, ms: 9 },
        { at: NOW + 1, ms: 9 },
      ],
      want: { 0: [1, 4, 4] },
    },
    {
      name: "across buckets",
      samples: [
        { at: NOW - 10 * MIN, ms: 5 },
        { at: NOW - 3 * MIN, ms: 7 },
      ],
      want: { 9: [1, 5, 5], 10: [1, 7, 7] },
    },
  ];
  for (const c of cases) {
    const b = latencyBuckets(c.samples, NOW);
    assert.equal(b.length, 12, c.name);
    assert.equal(b[11]!.start, NOW - 2 * MIN - 7, c.name);
    for (let i = 0; i < 12; i++) {
      const [count, p50, p99] = c.want[i] ?? [0];
      assert.equal(b[i]!.count, count, `${c.name}: bucket ${i}`);
      assert.equal(b[i]!.p50, p50, `${c.name}: bucket ${i} p50`);
      assert.equal(b[i]!.p99, p99, `${c.name}: bucket ${i} p99`);
    }
  }
});

test("StatusLatency: the time from the settle to its announcement, the last hour only, in a bounded ring", () => {
  let now = NOW;
  const l = new StatusLatency(() => now);
  l.record(NOW - 40);
  now += 2 * 60 * MIN; // two hours on: the old sample is out of the window
  assert.equal(
    l.buckets().reduce((n, b) => n + b.count, 0),
    0,
  );
  for (let i = 0; i < LATENCY_CAPACITY + 500; i++) l.record(now - (i % 10));
  assert.equal([...l.samples()].length, LATENCY_CAPACITY, "the ring keeps at most its capacity");
  assert.equal(l.buckets()[11]!.count, LATENCY_CAPACITY);
  assert.equal(l.buckets()[11]!.p99, 9);
});

test("watchStatusLatency counts settled announcements only, not live snapshots or a restart's re-announcements", () => {
  let fn: StatusListener | undefined;
  let now = NOW;
  const l = watchStatusLatency({ onStatus: (f) => ((fn = f), () => undefined) }, () => now);
  const result = (settledAt?: number) => ({ timing: { createdAt: 1, ...(settledAt ? { settledAt } : {}) } });
  const call = (r: unknown, info: Parameters<StatusListener>[2]) => fn!({} as never, r as never, info);
  call(result(NOW - 30), { settled: false });
  call(result(NOW - 30), { settled: true, recovered: true });
  call(result(), { settled: true });
  call(result(NOW - 30), { settled: true });
  now += 1;
  const b = l.buckets()[11]!;
  assert.equal(b.count, 1);
  assert.equal(b.p50, 30);
});

test("boardLink: a TCP board's URL; a socket board's URL with the ssh -L line that forwards to it", () => {
  assert.deepEqual(boardLink({ url: "http://127.0.0.1:4000/" }, "tok", "box"), {
    url: "http://127.0.0.1:4000/?token=tok",
  });
  assert.deepEqual(
    boardLink({ url: "http://localhost:8080/", socket: "/home/a b/.dsh/board.sock" }, "tok", "box", "ann"),
    {
      url: "http://localhost:8080/?token=tok",
      ssh: "ssh -N -L 8080:'/home/a b/.dsh/board.sock' ann@box",
    },
  );
});
