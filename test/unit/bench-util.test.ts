import { test } from "node:test";
import assert from "node:assert/strict";
import { figureLine, fixtureEntries, percentile, stamped } from "../../bench/_util.js";
import { SessionReader } from "../../src/core/session/session-reader.js";

test("percentile uses the nearest rank and ignores input order", () => {
  const xs = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6];
  assert.equal(percentile(xs, 50), 5);
  assert.equal(percentile(xs, 99), 10);
  assert.equal(percentile(xs, 10), 1);
  assert.deepEqual(xs, [5, 1, 4, 2, 3, 10, 9, 8, 7, 6], "input not sorted in place");
  assert.ok(Number.isNaN(percentile([], 50)));
});

test("figureLine prints the ratio as measured / baseline with its direction named, both directions, and flags a missed target", () => {
  const lat = figureLine({
    name: "x",
    value: 25,
    unit: "ms",
    baselineName: "poll",
    baseline: 250,
    better: "lower",
    target: "< 50 ms",
    met: true,
  });
  // 25 ms against a 250 ms baseline: a tenth of it, and "lower is better" is true of the number shown.
  assert.match(lat, /ratio 0\.10x \(measured \/ baseline, lower is better\)/);
  assert.match(lat, /target < 50 ms: met/);
  const thr = figureLine({
    name: "y",
    value: 50,
    unit: "MB/s",
    baselineName: "wc",
    baseline: 200,
    better: "higher",
    target: "t",
    met: false,
  });
  assert.match(thr, /ratio 0\.25x \(measured \/ baseline, higher is better\)/);
  assert.match(thr, /MISSED/);
});

test("stamped lines stay pi-shaped: the reader settles the recorded crew_report session re-stamped now", () => {
  const now = Date.parse("2030-01-02T03:04:05.000Z");
  const r = new SessionReader();
  for (const e of fixtureEntries("crew-report")) r.push(Buffer.from(stamped(e, now)));
  const f = r.facts();
  assert.equal(f.cycleSettled, true);
  assert.equal(f.terminatedBy, "crew_report");
  assert.equal(f.lastTimestampMs, now);
  assert.equal(f.invalidLines, 0);
});
