// A real owner pi 0.73.1 (RPC mode, owner extension) with real headless child pi processes, through an in-process
// daemon and the scripted model: crew_status snapshots across real compactions (pi's RPC `compact`), and /fork (pi's
// RPC `fork` from a user message's entry id) moving open subagents and their later results to the new session.
import { after, before, test } from "node:test";
import { completeJsonLines } from "../helpers/jsonl.js";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { testPiLine } from "../helpers/pi.js";
import type { RpcPi } from "../../fixtures/scripted-model/rpc-child.js";
import type { RecordedRequest } from "../../fixtures/scripted-model/server.js";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { ownerLabel } from "../../src/daemon/delivery/owner-view.js";
import { startHarness, type Harness } from "./daemon-harness.js";
import { startOwnerPi } from "./owner-harness.js";
import { rpcCommand, until, untilQuiet } from "../helpers/wait.js";

const spawn = (brief: string, goal: string) => ({
  name: "crew_spawn",
  arguments: {
    subagent: "worker",
    brief,
    task: { goal, context: [], instructions: ["Do it and report with crew_report."] },
  },
});
/** In the compaction summary, so owner requests after a compaction (whose first user message is it) stay "owner". */
const SUMMARY = "SUMMARY-MARK: an OWNER- session with one slow worker still running.";
// Compaction keeps the newest ~KEEP tokens (pi estimates chars/4): the small first part of the session stays whole,
// one BIG prompt (more than KEEP) pushes everything before it out.
const KEEP = 2000;
const BIG = "OWNER-BIG " + "filler ".repeat(KEEP); // ~3500 tokens

const SCRIPT: Script = {
  conversations: [
    // pi's summarization request: one user message "<conversation>…</conversation>…" (it quotes the owner's
    // messages, so it must come before the owner conversation).
    { name: "summarize", match: "/^<conversation>/", afterEnd: "repeat", steps: [{ text: SUMMARY }] },
    { name: "child-slow", match: "CHILD-COMPACT-SLOW", steps: [{ text: "slow", delayMs: 120_000 }] },
    {
      name: "child-fork",
      match: "CHILD-FORK-LATE",
      steps: [
        {
          toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "Finished after the fork" } }],
          delayMs: 6000,
        },
      ],
    },
    {
      name: "owner",
      match: "OWNER-",
      afterEnd: "repeat",
      steps: [
        // A prompt may end with a status message the extension sent along: look at everything since the last answer.
        { match: "OWNER-COMPACT", matchIn: "sinceAssistant", toolCalls: [spawn("compact-slow", "CHILD-COMPACT-SLOW")] },
        { match: "OWNER-FORK", matchIn: "sinceAssistant", toolCalls: [spawn("fork-late", "CHILD-FORK-LATE")] },
        { text: "Noted." },
      ],
    },
  ],
};

let h: Harness;
let owner: RpcPi;
const sessionPath = () => join(h.dir, "owner", "owner.jsonl");

before(async () => {
  h = await startHarness(SCRIPT, {
    runtime: "headless",
    defaultModel: "scripted/scripted-model",
    maxParallelAgents: 4,
  });
  const settingsPath = join(h.dir, "agent", "settings.json");
  const settings = JSON.parse(readFileSync(settingsPath, "utf8")) as Record<string, unknown>;
  writeFileSync(settingsPath, JSON.stringify({ ...settings, compaction: { keepRecentTokens: KEEP } }));
  owner = startOwnerPi(h, {
    sessionPath: sessionPath(),
    lifetimeMs: 300_000,
  });
});
after(async () => {
  await owner?.close().catch(() => undefined);
  await h?.close();
});

type Entry = Record<string, any>;
const readEntries = (path: string): Entry[] => completeJsonLines<Entry>(path);
const isSnapshot = (e: Entry) => e.type === "custom_message" && e.customType === "crew_status";
const texts = (r: RecordedRequest): string[] =>
  ((r.body as { messages: { content?: unknown }[] }).messages ?? []).map((m) =>
    typeof m.content === "string"
      ? m.content
      : Array.isArray(m.content)
        ? m.content.map((p: { text?: string }) => p.text ?? "").join("")
        : "",
  );
/** The first model request holding the prompt that starts with `marker` (any conversation: a broken context may match none). */
function requestFor(marker: string): RecordedRequest {
  const r = h.model.requests().find((q) => texts(q).some((t) => t.startsWith(marker)));
  assert.ok(r, `no model request holds the prompt ${marker}`);
  return r;
}

const command = (cmd: Record<string, unknown>) => rpcCommand(owner, cmd);
/** No turn running, nothing compacting and nothing queued, twice in a row. */
const quiet = () => untilQuiet(owner);
/** Prompt once quiet and wait for the run's end; a prompt that makes the model spawn returns the new subagent id. */
async function prompt(message: string): Promise<string | undefined> {
  await quiet();
  const from = owner.events.length;
  const r = await command({ type: "prompt", message });
  assert.equal(r.success, true, `pi refused the prompt: ${r.error}`);
  await until("the end of the run", () => owner.events.slice(from).some((e) => e.type === "agent_end"));
  const end = owner.events.slice(from).find((e) => e.type === "tool_execution_end" && e.toolName === "crew_spawn") as
    | Entry
    | undefined;
  return end ? (JSON.parse(end.result.content[0].text as string) as { subagent_id: string }).subagent_id : undefined;
}
const task = (taskId: string) => h.cli.request("task.get", { taskId });

let slowId = "";

test("compaction: a kept snapshot is not appended again; a dropped one is followed by a fresh snapshot of the open child that reaches the next model request", async () => {
  // pi 1.x compacts only a session with something to summarize ("Nothing to compact (session too small)"), where
  // 0.73.1 also compacts one it keeps whole: on 1.x two big first exchanges come first. The cut lands on the second
  // (the newest KEEP tokens reach back into it), so the first is what the first compaction summarizes.
  const line = testPiLine();
  if (line === "1.x") {
    await prompt("OWNER-PRE " + "filler ".repeat(KEEP));
    await prompt("OWNER-PRE2 " + "filler ".repeat(KEEP));
  }
  slowId = (await prompt("OWNER-COMPACT: one slow worker"))!;
  assert.match(slowId, /^t[0-9a-z]{11}$/);
  await h.waitFor(slowId, (r) => r.status === "running", "the slow child running");
  // A boundary after the child runs: the newest snapshot now says "running" and stays true for the whole test.
  await prompt("OWNER-PING while it runs");
  const before1 = readEntries(sessionPath()).filter(isSnapshot);
  assert.ok(
    before1.length > 0 && String(before1.at(-1)!.content).includes(slowId),
    "a snapshot listing the child was persisted",
  );

  // 1. Nothing dropped: the session is far below KEEP, so pi keeps every entry from the first user message on.
  await quiet();
  const c1 = await command({ type: "compact" });
  assert.equal(c1.success, true, `compact failed: ${c1.error}`);
  const beforeCut = (es: Entry[], firstKept: string) =>
    es.slice(
      0,
      es.findIndex((e) => e.id === firstKept),
    );
  const cut1 = beforeCut(readEntries(sessionPath()), c1.data.firstKeptEntryId as string);
  const summarized = cut1.filter(
    (e) => (e.type === "message" && e.message.role !== "system") || e.type === "custom_message",
  );
  if (line === "0.73") assert.deepEqual(summarized, [], "the first compaction kept every message");
  else {
    assert.deepEqual(summarized.filter(isSnapshot), [], "the first compaction kept every snapshot");
    assert.ok(
      summarized.some((e) => String(e.message?.content?.[0]?.text ?? "").startsWith("OWNER-PRE")),
      "it summarized the big first exchange",
    );
    assert.ok(
      !summarized.some((e) => String(e.message?.content?.[0]?.text ?? "").startsWith("OWNER-COMPACT")),
      "and kept everything from the spawn on",
    );
  }
  await prompt("OWNER-PING after a compaction that kept everything");
  let entries = readEntries(sessionPath());
  const compaction1 = entries.findIndex((e) => e.type === "compaction");
  assert.ok(compaction1 > 0, "pi recorded a compaction entry");
  assert.deepEqual(
    entries.slice(compaction1).filter(isSnapshot),
    [],
    "no snapshot appended again when none was dropped",
  );
  const req1 = requestFor("OWNER-PING after");
  assert.ok(
    texts(req1).some((t) => t.includes(SUMMARY)),
    "the request carries the compaction summary",
  );
  assert.deepEqual(
    texts(req1).filter((t) => t.startsWith('{"crew_status"')),
    before1.map((e) => String(e.content)),
    "the kept snapshots reach the model once each",
  );

  // 2. Dropped: BIG alone outweighs KEEP, so the cut lands on it and every snapshot before it is summarized away.
  await prompt(BIG);
  await quiet();
  const c2 = await command({ type: "compact" });
  assert.equal(c2.success, true, `compact failed: ${c2.error}`);
  entries = readEntries(sessionPath());
  const kept = entries.findIndex((e) => e.id === c2.data.firstKeptEntryId);
  assert.ok(
    kept > 0 && entries[kept]!.message?.content?.[0]?.text?.startsWith("OWNER-BIG"),
    "the second compaction cut at the big prompt",
  );
  assert.ok(entries.slice(0, kept).filter(isSnapshot).length === before1.length, "every snapshot lies before the cut");
  assert.deepEqual(entries.slice(kept).filter(isSnapshot), [], "no snapshot survived the cut");

  await prompt("OWNER-AFTER the compaction");
  entries = readEntries(sessionPath());
  const compaction2 = entries.findLastIndex((e) => e.type === "compaction");
  assert.ok(compaction2 > compaction1, "pi recorded a second compaction entry");
  const fresh = entries.slice(compaction2).filter(isSnapshot);
  assert.equal(fresh.length, 1, "exactly one fresh snapshot after the compaction that dropped them");
  const content = JSON.parse(String(fresh[0]!.content)) as { crew_status: { subagent_id: string; status: string }[] };
  assert.deepEqual(
    content.crew_status.map((s) => s.subagent_id),
    [slowId],
    "it lists the open child",
  );
  assert.equal(
    String(fresh[0]!.content),
    String(before1.at(-1)!.content),
    "same state as before: only the loss made it due",
  );
  const req2 = requestFor("OWNER-AFTER");
  assert.ok(texts(req2).some((t) => t.includes(SUMMARY)));
  assert.deepEqual(
    texts(req2).filter((t) => t.startsWith('{"crew_status"')),
    [String(fresh[0]!.content)],
    "the fresh snapshot reaches the model; compacted ones are not replayed",
  );
  assert.ok(
    h.model.requests().filter((r) => r.conversation === "summarize").length >= 2,
    "pi asked the model for both summaries",
  );
});

test("/fork from a user message: open subagents and their later results move to the new session; the old one gets none", async () => {
  const lateId = await prompt("OWNER-FORK: one worker that finishes later");
  assert.ok(lateId, "the owner spawned the worker");
  await prompt("OWNER-LAST words before the fork");
  const oldPath = sessionPath();
  const oldOwner = h.daemon.supervisor.tasks.get(lateId)!.rec.owner;
  assert.match((await task(lateId)).status, /^(starting|running)$/, "still open at the fork");

  const forkable = await command({ type: "get_fork_messages" });
  const at = (forkable.data.messages as { entryId: string; text: string }[]).find((m) =>
    m.text.startsWith("OWNER-LAST"),
  )!;
  await quiet();
  const forked = await command({ type: "fork", entryId: at.entryId });
  assert.equal(forked.success, true, `fork failed: ${forked.error}`);
  assert.deepEqual(forked.data, { text: at.text, cancelled: false });
  const state = (await command({ type: "get_state" })).data as { sessionId: string; sessionFile: string };
  assert.notEqual(state.sessionId, oldOwner);
  assert.notEqual(state.sessionFile, oldPath);
  const newEntries = () => readEntries(state.sessionFile);
  assert.equal(
    newEntries().some(
      (e) =>
        e.type === "message" && e.message.role === "user" && JSON.stringify(e.message.content).includes("OWNER-LAST"),
    ),
    false,
    "a fork (not a clone) ends before the chosen message",
  );

  for (const id of [lateId, slowId])
    await until(
      `${id} owned by the forked session`,
      async () => (await task(id)).owner === ownerLabel(state.sessionId),
      10_000,
    );
  await h.waitFor(lateId, (r) => r.status === "completed", "the late child's report");
  const resultIn = (es: Entry[]) =>
    es.some((e) => e.customType === "crew-result" && e.details.card.subagent_id === lateId);
  await until("the late result in the forked session", () => resultIn(newEntries()));
  assert.equal(resultIn(readEntries(oldPath)), false, "not in the session it left");
  const { tasks } = await h.cli.request("task.list", { owner: oldOwner });
  assert.deepEqual(
    tasks.map((t) => t.taskId).filter((id) => id === lateId || id === slowId),
    [],
    "the old session owns neither",
  );
  await quiet();
});
