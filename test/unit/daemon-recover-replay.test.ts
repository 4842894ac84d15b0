// replayJournal: what start-up recovery learns from a task's journal beyond its last task.json.
import { test } from "node:test";
import assert from "node:assert/strict";
import { replayJournal } from "../../src/daemon/recover/recover-replay.js";
import { parseJournalRecord, type JournalRecord } from "../../src/core/lifecycle/journal-record.js";

/** A journal line as the store reads it back (a record of an unknown kind or shape would be left out). */
const ev = (type: string, more: Record<string, unknown> = {}): JournalRecord | undefined =>
  parseJournalRecord({ ts: 1000, type, ...more });
const replay = (lines: (JournalRecord | undefined)[]) =>
  replayJournal(lines.filter((e): e is JournalRecord => e !== undefined));

test("replay: launch handle, worktree, baseline with its dirty list, prompts, settles, abort and close", () => {
  const r = replay([
    ev("created"),
    ev("worktree", { path: "/w/repo-t1", branch: "dsh/t1" }),
    ev("baseline", { head: "abc", dirty: 2, dirtyAtStart: [" M a.txt", "?? b.txt"] }),
    ev("launched", { handle: { runtime: "headless", pid: 42 } }),
    ev("prompt_sent", { cycle: 1, ts: 2000 }),
    ev("prompt_accepted", { cycle: 1 }),
    ev("settle", { cycle: 1 }),
    ev("status", { status: "completed", cycle: 1, settled: true }),
    ev("respond", { cycle: 2 }),
    ev("prompt_sent", { cycle: 2, via: "runtime" }),
    ev("interrupted", { code: "TIMEOUT" }),
    ev("closed", { closePane: true }),
  ]);
  assert.deepEqual(r.handle, { runtime: "headless", pid: 42 });
  assert.equal(r.worktree, "/w/repo-t1");
  assert.equal(r.worktreeBranch, "dsh/t1");
  assert.deepEqual(r.baseline, { head: "abc", dirty: 2, dirtyAtStart: [" M a.txt", "?? b.txt"] });
  assert.equal(r.prompted.get(1), 2000);
  assert.ok(r.accepted.has(1) && r.accepted.has(2), "a prompt typed into the runtime counts as taken");
  assert.equal(r.cycle, 2);
  assert.ok(r.settling.has(1) && r.settled.has(1) && !r.settled.has(2));
  assert.deepEqual(r.interrupted, { code: "TIMEOUT" });
  assert.deepEqual(r.closed, { closePane: true });
});

test("replay: a baseline journaled as a count only (a long dirty list, or an older daemon) has no list; junk is ignored", () => {
  const r = replay([ev("baseline", { head: null, dirty: 5000 })]);
  assert.deepEqual(r.baseline, { head: null, dirty: 5000 });
  const junk = replay([
    ev("baseline", { head: "abc", dirty: 1, dirtyAtStart: [1, 2] }),
    ev("launched", {}),
    ev("prompt_sent", {}),
  ]);
  assert.deepEqual(junk.baseline, { head: "abc", dirty: 1 }, "a non-string dirty list is not trusted");
  assert.equal(junk.handle, undefined);
  assert.equal(junk.prompted.size, 0);
});

test("replay: a stalled launch's handle is dead; a later launch journaled after it is the live one", () => {
  const stalledLast = replay([
    ev("launched", { handle: { runtime: "headless", pid: 1 } }),
    ev("stalled", { attempt: 1 }),
  ]);
  assert.equal(stalledLast.handle, undefined, "recovery must ask the runtime (a retry may run unjournaled)");
  assert.equal(stalledLast.handleStalled, true);
  assert.equal(stalledLast.stalled, 1);
  const relaunched = replay([
    ev("launched", { handle: { runtime: "headless", pid: 1 } }),
    ev("stalled", { attempt: 1 }),
    ev("launched", { handle: { runtime: "headless", pid: 2 } }),
  ]);
  assert.deepEqual(relaunched.handle, { runtime: "headless", pid: 2 });
  assert.equal(relaunched.handleStalled, undefined);
});
