// Sibling conflicts with real pi children (headless), a real daemon and real git: two open isolated tasks of one
// repository that write the same file differently get a warning naming each other and the path on both AgentResults
// (the one that settled first has its settled result rewritten), before either is landed; a third task whose work
// merges cleanly with both gets none.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { AgentResult } from "../../src/core/types.js";
import { readJournal, startHarness, type Harness } from "./daemon-harness.js";

const writes = (marker: string, path: string, content: string) => ({
  name: marker,
  match: marker,
  steps: [
    { toolCalls: [{ name: "write", arguments: { path, content } }] },
    { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: `wrote ${path}` } }] },
  ],
});

let h: Harness;

before(async () => {
  h = await startHarness(
    {
      conversations: [
        writes("MARK-SIB-A", "shared.txt", "from A\n"),
        writes("MARK-SIB-B", "shared.txt", "from B\n"),
        writes("MARK-SIB-C", "other.txt", "from C\n"),
      ],
    },
    { runtime: "headless" },
  );
});
after(async () => {
  await h?.close();
});

const siblingWarnings = (r: AgentResult) =>
  (r.warnings ?? []).filter((w) => w.startsWith("conflicts with sibling task"));

test("two open isolated tasks writing one file differently: both results name the other task and the path", async () => {
  const a = await h.spawn({ prompt: "MARK-SIB-A write it", isolated: true });
  const ra = await h.wait(a.taskId);
  assert.equal(ra.status, "completed");
  assert.deepEqual(siblingWarnings(ra), [], "alone, nothing conflicts");
  const c = await h.spawn({ prompt: "MARK-SIB-C write elsewhere", isolated: true });
  const rc = await h.wait(c.taskId);
  assert.deepEqual(siblingWarnings(rc), [], "C's work merges cleanly with A's");

  const b = await h.spawn({ prompt: "MARK-SIB-B write it too", isolated: true });
  const rb = await h.wait(b.taskId);
  assert.equal(rb.status, "completed");
  const wb = siblingWarnings(rb);
  assert.equal(wb.length, 1, JSON.stringify(rb.warnings));
  assert.match(
    wb[0]!,
    new RegExp(`^conflicts with sibling task ${a.taskId} \\(${ra.agent.name}\\) in 1 path\\(s\\): shared\\.txt;`),
  );
  assert.ok(!wb[0]!.includes(c.taskId));

  // A settled first: its settled result gets the warning naming B, in memory and in result.json.
  const ra2 = await h.waitFor(a.taskId, (r) => siblingWarnings(r).length > 0, "A's sibling warning");
  assert.equal(ra2.status, "completed", "the warning does not change A's verdict");
  assert.match(
    siblingWarnings(ra2)[0]!,
    new RegExp(`^conflicts with sibling task ${b.taskId} \\(${rb.agent.name}\\) .*shared\\.txt`),
  );
  const stored = JSON.parse(readFileSync(join(h.home, "tasks", a.taskId, "result.json"), "utf8")) as AgentResult;
  assert.deepEqual(siblingWarnings(stored), siblingWarnings(ra2));
  assert.deepEqual(siblingWarnings(await h.cli.request("task.get", { taskId: c.taskId })), []);
  // Journaled on both sides.
  assert.ok(
    readJournal(h, b.taskId).some(
      (e) =>
        e.type === "siblings" &&
        JSON.stringify(e.conflicts) === JSON.stringify([{ taskId: a.taskId, paths: ["shared.txt"] }]),
    ),
  );
  assert.ok(readJournal(h, a.taskId).some((e) => e.type === "siblings" && e.from === b.taskId));
  // Neither is landed, and each still lands cleanly on its own: the conflict is between the two.
  assert.equal(rb.landing?.clean, true);
  assert.equal(ra2.landing?.clean, true);
});
