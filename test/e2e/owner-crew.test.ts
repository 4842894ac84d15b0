// A real owner pi 0.73.1 (RPC mode, with the owner extension) and real child pi processes (headless), all against
// the scripted model, through an in-process daemon: spawn, delivery, follow-ups, aborts, reconnects, bad input.
import { after, before, test } from "node:test";
import { completeJsonLines } from "../helpers/jsonl.js";
import assert from "node:assert/strict";
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import type { RpcPi } from "../../fixtures/scripted-model/rpc-child.js";
import type { RecordedRequest } from "../../fixtures/scripted-model/server.js";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { readOutbox } from "../../src/store/outbox.js";
import { ownerLabel } from "../../src/daemon/delivery/owner-view.js";
import { readJournal, startHarness, type Harness } from "./daemon-harness.js";
import { startOwnerPi } from "./owner-harness.js";
import { rpcCommand, until, untilQuiet } from "../helpers/wait.js";

const task = (goal: string) => ({ goal, context: [], instructions: ["Do it and report with crew_report."] });
const spawn = (brief: string, goal: string) => ({
  name: "crew_spawn",
  arguments: { subagent: "worker", brief, task: task(goal) },
});
const report = (r: string) => ({ name: "crew_report", arguments: { outcome: "completed", report: r } });

// Filled in by the tests once the ids exist: the server reads the script object on every request.
const respondArgs: Record<string, unknown> = { subagent_id: "", message: "Use blue" };
const doneArgs: Record<string, unknown> = { subagent_id: "" };
const abortArgs: Record<string, unknown> = { subagent_ids: [] };

const SCRIPT: Script = {
  // Owner steps match anything since the last assistant message: the owner extension may append a status snapshot
  // right after the prompt (a child's status changed meanwhile), which then ends the request (pi 1.x, under load).
  conversations: [
    { name: "child-a", match: "CHILD-DONE-A", steps: [{ toolCalls: [report("Report A\n\nwith *markdown*")] }] },
    { name: "child-b", match: "CHILD-DONE-B", steps: [{ toolCalls: [report("Report B")], delayMs: 300 }] },
    {
      name: "child-ask",
      match: "CHILD-ASK",
      steps: [
        {
          toolCalls: [
            { name: "crew_report", arguments: { outcome: "needs_input", report: "Half way.", needs: "Which color?" } },
          ],
        },
        { match: "Use blue", toolCalls: [report("Painted it blue")] },
      ],
    },
    { name: "child-slow", match: "CHILD-SLOW", steps: [{ text: "slow", delayMs: 60_000 }] },
    {
      name: "child-lazy",
      match: "CHILD-LAZY",
      steps: [
        { text: "I think it is done." },
        { match: "/^FINALIZE/", toolCalls: [report("Finalized after the reminder")] },
      ],
    },
    { name: "child-never", match: "CHILD-NEVER", afterEnd: "repeat", steps: [{ text: "No report from me." }] },
    {
      name: "child-wrong",
      match: "CHILD-WRONG",
      steps: [
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "done", report: "x" } }] },
        { toolCalls: [report("Right the second time")] },
      ],
    },
    {
      name: "child-later",
      match: "CHILD-LATER",
      steps: [{ toolCalls: [report("Produced while the owner was away")], delayMs: 5000 }],
    },
    { name: "child-fork-quick", match: "CHILD-FORK-QUICK", steps: [{ toolCalls: [report("Quick before the clone")] }] },
    {
      name: "child-fork-slow",
      match: "CHILD-FORK-SLOW",
      steps: [{ toolCalls: [report("Finished after the clone")], delayMs: 8000 }],
    },
    {
      name: "owner",
      match: "OWNER-",
      steps: [
        {
          match: "OWNER-TWO",
          matchIn: "sinceAssistant",
          toolCalls: [spawn("first", "CHILD-DONE-A"), spawn("second", "CHILD-DONE-B")],
        },
        {
          match: "OWNER-FLOW",
          matchIn: "sinceAssistant",
          toolCalls: [spawn("ask", "CHILD-ASK"), spawn("slow", "CHILD-SLOW")],
        },
        {
          match: "OWNER-LAZY",
          matchIn: "sinceAssistant",
          toolCalls: [spawn("lazy", "CHILD-LAZY"), spawn("never", "CHILD-NEVER"), spawn("wrong", "CHILD-WRONG")],
        },
        { match: "OWNER-AWAY", matchIn: "sinceAssistant", toolCalls: [spawn("later", "CHILD-LATER")] },
        {
          match: "OWNER-FORK",
          matchIn: "sinceAssistant",
          toolCalls: [spawn("fork-quick", "CHILD-FORK-QUICK"), spawn("fork-slow", "CHILD-FORK-SLOW")],
        },
        {
          match: "DO-RESPOND",
          matchIn: "sinceAssistant",
          toolCalls: [{ name: "crew_respond", arguments: respondArgs }],
        },
        { match: "DO-DONE", matchIn: "sinceAssistant", toolCalls: [{ name: "crew_done", arguments: doneArgs }] },
        { match: "DO-ABORT", matchIn: "sinceAssistant", toolCalls: [{ name: "crew_abort", arguments: abortArgs }] },
        {
          match: "DO-BAD",
          matchIn: "sinceAssistant",
          toolCalls: [
            { name: "crew_spawn", arguments: { subagent: "worker", brief: "  ", task: task("x") } },
            { name: "crew_spawn", arguments: { subagent: "nobody", brief: "b", task: task("x") } },
            { name: "crew_respond", arguments: { subagent_id: "tzzzzzzzzzzz", message: "hi" } },
            { name: "crew_done", arguments: { subagent_id: "tzzzzzzzzzzz", force: true } },
            { name: "crew_abort", arguments: {} },
          ],
        },
        { match: '"brief"', text: "Noted." },
        { text: "Waiting for the subagents." },
      ],
    },
  ],
};

let h: Harness;
let owner: RpcPi;
let sessionPath: string;

/** A fresh owner pi (the /clone test starts a second one). */
function startOwner(name: string): void {
  sessionPath = join(h.dir, name, `${name}.jsonl`);
  owner = startOwnerPi(h, {
    sessionPath,
    // The whole file runs against this owner; under load it outlives the fixture's 120 s safety net.
    lifetimeMs: 600_000,
  });
}

before(async () => {
  // No defaultModel: a crew_spawn of a definition without a model (the built-in worker) runs on the owner's model.
  h = await startHarness(SCRIPT, { runtime: "headless", maxParallelAgents: 6 });
  startOwner("owner");
});
after(async () => {
  await owner?.close().catch(() => undefined);
  await h?.close();
});

const ownerRequests = (): RecordedRequest[] => h.model.requests().filter((r) => r.conversation === "owner");
const texts = (r: RecordedRequest): string[] =>
  ((r.body as { messages: { content?: unknown }[] }).messages ?? []).map((m) =>
    typeof m.content === "string"
      ? m.content
      : Array.isArray(m.content)
        ? m.content.map((p: { text?: string }) => p.text ?? "").join("")
        : "",
  );
const deliveriesSeen = (): Record<string, unknown>[] => {
  const seen = new Map<string, Record<string, unknown>>();
  for (const r of ownerRequests())
    for (const t of texts(r)) {
      if (!t.startsWith('{"subagent_id"')) continue;
      const j = JSON.parse(t) as Record<string, unknown>;
      if ("brief" in j) seen.set(t, j);
    }
  return [...seen.values()];
};
/** Send an RPC command with an id and wait for pi's response to it. */
const command = (cmd: Record<string, unknown>) => rpcCommand(owner, cmd);
/**
 * Until the owner pi runs no turn and holds no queued message, twice in a row: a delivery starts a turn of its own,
 * and pi refuses a prompt while a turn runs ("Agent is already processing").
 */
const quiet = () => untilQuiet(owner);
const prompt = async (message: string) => {
  await quiet();
  const r = await command({ type: "prompt", message });
  assert.equal(r.success, true, `pi refused the prompt: ${r.error}`);
};
const idle = () => owner.waitFor((e) => e.type === "agent_end", 60_000);
const sessionEntries = () => completeJsonLines<Record<string, any>>(sessionPath);
const toolEnd = (name: string) =>
  owner.waitFor((e) => e.type === "tool_execution_end" && e.toolName === name, 30_000) as Promise<Record<string, any>>;
const ownedTasks = async (brief: string) => {
  const { tasks } = await h.cli.request("task.list", {});
  return tasks.filter((t) => t.brief === brief);
};

test("two crew_spawn calls → {subagent_id} each; both results arrive as JSON custom messages and start owner turns", async () => {
  await prompt("OWNER-TWO: run two workers");
  // The two calls run as one parallel batch, so their results can end in either order: tell them apart by brief.
  const ends = [await toolEnd("crew_spawn"), await toolEnd("crew_spawn")].map(
    (e) => e.result.content[0].text as string,
  );
  for (const text of ends) assert.match(text, /^\{"subagent_id":"t[0-9a-z]{11}"\}$/);
  const ids = ends.map((t) => (JSON.parse(t) as { subagent_id: string }).subagent_id);
  const briefOf = async (id: string) => (await h.cli.request("task.get", { taskId: id })).brief;
  const briefs = await Promise.all(ids.map(briefOf));
  assert.deepEqual([...briefs].sort(), ["first", "second"]);
  // The worker definition names no model and the daemon has no defaultModel: the owner session's model it is.
  for (const id of ids) assert.equal((await h.cli.request("task.get", { taskId: id })).agent.model, h.modelName);
  const idA = ids[briefs.indexOf("first")]!;
  const idB = ids[briefs.indexOf("second")]!;
  const seen = await until("both deliveries in the model's requests", () => {
    const d = deliveriesSeen();
    return d.length >= 2 ? d : undefined;
  });
  assert.deepEqual(
    seen.find((d) => d.subagent_id === idA),
    {
      subagent_id: idA,
      brief: "first",
      result: { outcome: "completed", report: "Report A\n\nwith *markdown*" },
      // Where the isolated worker's work is: its branch, not landed (this project's additive field).
      work: { branch: `dsh/${idA}`, landed: false },
    },
  );
  assert.deepEqual(
    seen.find((d) => d.subagent_id === idB),
    {
      subagent_id: idB,
      brief: "second",
      result: { outcome: "completed", report: "Report B" },
      work: { branch: `dsh/${idB}`, landed: false },
    },
  );
  await until(
    "the owner idle again",
    () =>
      (ownerRequests().at(-1) && sessionEntries().filter((e) => e.customType === "crew-result").length === 2) ||
      undefined,
  );
  const results = sessionEntries().filter((e) => e.type === "custom_message" && e.customType === "crew-result");
  assert.deepEqual(new Set(results.map((e) => e.details.deliveryId)).size, 2, "each delivery injected once");
  assert.ok(results.every((e) => e.display === true && e.details.card.report));
});

test("the provider-bound message prefix never changes between consecutive owner requests (snapshots only append)", async () => {
  const reqs = ownerRequests();
  assert.ok(reqs.length >= 3);
  for (let i = 1; i < reqs.length; i++) {
    const prev = (reqs[i - 1]!.body as { messages: unknown[] }).messages;
    const cur = (reqs[i]!.body as { messages: unknown[] }).messages;
    assert.deepEqual(
      cur.slice(0, prev.length),
      prev,
      `request ${reqs[i]!.seq} rewrote the prefix of ${reqs[i - 1]!.seq}`,
    );
  }
  const snapshots = reqs.flatMap(texts).filter((t) => t.startsWith('{"crew_status"'));
  assert.ok(snapshots.length > 0, "a crew_status snapshot reached the model");
});

test("needs_input → crew_respond → completed → crew_done; crew_abort reports aborted, missing and foreign ids", async () => {
  await prompt("OWNER-FLOW: ask and slow");
  await toolEnd("crew_spawn");
  await toolEnd("crew_spawn");
  const askTask = (await ownedTasks("ask"))[0]!;
  const slowTask = (await ownedTasks("slow"))[0]!;
  await until("the needs_input delivery", () => deliveriesSeen().find((d) => d.subagent_id === askTask.taskId));
  assert.deepEqual(
    deliveriesSeen().find((d) => d.subagent_id === askTask.taskId),
    {
      subagent_id: askTask.taskId,
      brief: "ask",
      result: { outcome: "needs_input", report: "Half way.", needs: "Which color?" },
      work: { branch: `dsh/${askTask.taskId}`, landed: false },
    },
  );
  await idle();
  respondArgs.subagent_id = askTask.taskId;
  await prompt("DO-RESPOND");
  const responded = await toolEnd("crew_respond");
  assert.equal(responded.isError, false);
  assert.equal(responded.result.content[0].text, JSON.stringify({ subagent_id: askTask.taskId }));
  await until("the completed delivery", () =>
    deliveriesSeen().find(
      (d) =>
        d.subagent_id === askTask.taskId && (d.result as { outcome?: string } | undefined)?.outcome === "completed",
    ),
  );
  await idle();
  doneArgs.subagent_id = askTask.taskId;
  await prompt("DO-DONE");
  assert.equal((await toolEnd("crew_done")).result.content[0].text, JSON.stringify({ subagent_id: askTask.taskId }));
  assert.equal((await h.cli.request("task.get", { taskId: askTask.taskId })).status, "closed");
  await idle();

  // A running subagent cannot receive follow-up messages (the pi-crew protocol): crew_respond is refused, never a
  // steer (a person's `dsh-herdr respond` steers; the owner's model does not).
  respondArgs.subagent_id = slowTask.taskId;
  await prompt("DO-RESPOND");
  const refused = await toolEnd("crew_respond");
  assert.equal(refused.isError, true);
  assert.match(
    (JSON.parse(refused.result.content[0].text) as { error: string }).error,
    /is not waiting for a response \(status: running\)/,
  );
  assert.equal(
    readJournal(h, slowTask.taskId).filter((e) => e.type.startsWith("steer") || e.type === "respond").length,
    0,
  );
  await idle();

  const { taskId: foreign } = await h.spawn({
    prompt: "CHILD-SLOW foreign work",
    brief: "foreign",
    runtime: "headless",
  });
  abortArgs.subagent_ids = [slowTask.taskId, foreign, "tzzzzzzzzzzz"];
  await prompt("DO-ABORT");
  const aborted = await toolEnd("crew_abort");
  assert.deepEqual(JSON.parse(aborted.result.content[0].text), {
    aborted_ids: [slowTask.taskId],
    missing_ids: ["tzzzzzzzzzzz"],
    foreign_ids: [foreign],
  });
  assert.equal(
    (await h.cli.request("task.get", { taskId: foreign })).status === "interrupted",
    false,
    "the foreign task was not touched",
  );
  await idle();
  // The abort card is TUI-only: recorded in the session, never in a model request.
  await until("the abort card", () =>
    sessionEntries().find((e) => e.customType === "crew-abort" && e.details.card.subagent_id === slowTask.taskId),
  );
  await prompt("OWNER-CHECK after abort");
  await idle();
  assert.ok(
    !ownerRequests()
      .flatMap(texts)
      .some((t) => t.includes("⏹")),
    "no abort card in model context",
  );
  await h.cli.request("task.abort", { taskIds: [foreign] });
});

test('a reportless child gets one finalization follow-up; twice → contract error delivered as {status:"error"}; a wrong outcome is an {error}', async () => {
  await prompt("OWNER-LAZY: three children");
  for (let i = 0; i < 3; i++) await toolEnd("crew_spawn");
  const lazy = (await ownedTasks("lazy"))[0]!;
  const never = (await ownedTasks("never"))[0]!;
  const wrong = (await ownedTasks("wrong"))[0]!;
  await until(
    "three deliveries",
    () => [lazy, never, wrong].every((t) => deliveriesSeen().some((d) => d.subagent_id === t.taskId)) || undefined,
    90_000,
  );
  assert.deepEqual(
    deliveriesSeen().find((d) => d.subagent_id === lazy.taskId),
    {
      subagent_id: lazy.taskId,
      brief: "lazy",
      result: { outcome: "completed", report: "Finalized after the reminder" },
      work: { branch: `dsh/${lazy.taskId}`, landed: false },
    },
  );
  const err = deliveriesSeen().find((d) => d.subagent_id === never.taskId)!;
  assert.equal(err.status, "error");
  assert.equal(err.brief, "never");
  assert.match(String(err.error), /^CONTRACT_ERROR: .*crew_report/);
  assert.equal("result" in err, false, "never a fabricated result");
  const neverReqs = h.model.requests().filter((r) => r.conversation === "child-never");
  assert.equal(
    neverReqs.filter((r) => texts(r).at(-1)!.startsWith("FINALIZE")).length,
    1,
    "exactly one follow-up prompt",
  );
  assert.equal((await h.cli.request("task.get", { taskId: never.taskId })).status, "failed");
  const wrongReq = h.model
    .requests()
    .filter((r) => r.conversation === "child-wrong")
    .at(-1)!;
  const toolMsg = (wrongReq.body as { messages: { role: string; content: unknown }[] }).messages.find(
    (m) => m.role === "tool",
  )!;
  assert.match(
    String(typeof toolMsg.content === "string" ? toolMsg.content : JSON.stringify(toolMsg.content)),
    /\{\\?"error\\?":\\?"outcome must be/,
  );
  assert.deepEqual((deliveriesSeen().find((d) => d.subagent_id === wrong.taskId) as { result: unknown }).result, {
    outcome: "completed",
    report: "Right the second time",
  });
  await idle();
});

test('every owner tool\'s bad input is an {"error"} naming the problem', async () => {
  await prompt("DO-BAD");
  // pi runs a batch's tools in parallel: their ends arrive in completion order, not in batch order.
  const ends: Record<string, any>[] = [];
  for (let i = 0; i < 5; i++)
    ends.push((await owner.waitFor((e) => e.type === "tool_execution_end", 30_000)) as Record<string, any>);
  const errs = (name: string) =>
    ends
      .filter((e) => e.toolName === name)
      .map((e) => {
        assert.equal(e.isError, true, `${name} should fail`);
        return (JSON.parse(e.result.content[0].text) as { error: string }).error;
      });
  assert.deepEqual(ends.map((e) => e.toolName).sort(), [
    "crew_abort",
    "crew_done",
    "crew_respond",
    "crew_spawn",
    "crew_spawn",
  ]);
  const spawnErrs = errs("crew_spawn");
  assert.ok(
    spawnErrs.some((e) => /brief is required/.test(e)),
    JSON.stringify(spawnErrs),
  );
  assert.ok(
    spawnErrs.some((e) => /Unknown subagent: "nobody"/.test(e)),
    JSON.stringify(spawnErrs),
  );
  assert.match(errs("crew_respond")[0]!, /No subagent with id "tzzzzzzzzzzz"/);
  assert.match(errs("crew_done")[0]!, /unknown field\(s\) force/);
  assert.match(errs("crew_abort")[0]!, /exactly one of: subagent_id, subagent_ids, or all=true/);
  await idle();
});

test("owner away (/new): the result waits; back (/resume): delivered once; a redelivery of the same id is not injected twice", async () => {
  await prompt("OWNER-AWAY: one slow child");
  await toolEnd("crew_spawn");
  await idle();
  const later = (await ownedTasks("later"))[0]!;
  // The CLI sees a label (src/daemon/delivery/owner-view.ts): the id is the daemon's record's.
  const ownerId = h.daemon.supervisor.tasks.get(later.taskId)!.rec.owner;
  assert.equal(later.owner, ownerLabel(ownerId));
  const raw = (cmd: Record<string, unknown>) => owner.child.stdin!.write(JSON.stringify(cmd) + "\n");
  raw({ type: "new_session", id: "n1" });
  await owner.waitFor((e) => e.type === "response" && e.id === "n1");
  await h.waitFor(later.taskId, (r) => r.status === "completed", "the child's report");
  let box = await readOutbox(h.home, ownerId);
  for (let i = 0; i < 300 && !box.some((r) => r.taskId === later.taskId); i++) {
    await new Promise((r) => setTimeout(r, 100));
    box = await readOutbox(h.home, ownerId);
  }
  assert.deepEqual(
    box.filter((r) => r.taskId === later.taskId).map((r) => r.state),
    ["queued"],
    "not pushed to a session that is away",
  );
  raw({ type: "switch_session", sessionPath, id: "s1" });
  await owner.waitFor((e) => e.type === "response" && e.id === "s1");
  await until("the delivery after the owner returned", () =>
    deliveriesSeen().find((d) => d.subagent_id === later.taskId),
  );
  const injectedOnce = () =>
    sessionEntries().filter((e) => e.customType === "crew-result" && e.details.card.subagent_id === later.taskId);
  await until("persisted", () => injectedOnce().length === 1 || undefined);
  // Simulate a crash between injection and ack: the daemon pushes the same id again on the next attach.
  const id = injectedOnce()[0]!.details.deliveryId as string;
  appendFileSync(
    join(h.home, "owners", ownerId, "outbox.jsonl"),
    JSON.stringify({ deliveryId: id, state: "sent", ts: Date.now() }) + "\n",
  );
  raw({ type: "new_session", id: "n2" });
  await owner.waitFor((e) => e.type === "response" && e.id === "n2");
  raw({ type: "switch_session", sessionPath, id: "s2" });
  await owner.waitFor((e) => e.type === "response" && e.id === "s2");
  const end = Date.now() + 30_000;
  while (Date.now() < end) {
    const states = (await readOutbox(h.home, ownerId)).filter((r) => r.deliveryId === id).map((r) => r.state);
    if (states.at(-1) === "acked") break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal((await readOutbox(h.home, ownerId)).filter((r) => r.deliveryId === id).at(-1)?.state, "acked");
  assert.equal(injectedOnce().length, 1, "the redelivered id was acked, not injected again");
});

test("every status message persisted in the session (snapshots, reminders) is in the next model request, in session order", async () => {
  await prompt("OWNER-CHECK status context after a resume");
  await idle();
  const isStatus = (t: string) => t.startsWith('{"crew_status"') || t.startsWith('{"crew_reminder"');
  const persisted = sessionEntries()
    .filter((e) => e.type === "custom_message" && (e.customType === "crew_status" || e.customType === "crew_reminder"))
    .map((e) => String(e.content));
  const sent = texts(ownerRequests().at(-1)!).filter(isStatus);
  assert.ok(persisted.length >= 2, `snapshots were persisted: ${persisted.length}`);
  // The extension's context hook puts back what pi's own message list lacks (after /new and /resume here), at its
  // recorded place; nothing is dropped or reordered. At most one snapshot may follow the last request (turn end).
  assert.deepEqual(sent, persisted.slice(0, sent.length));
  assert.ok(persisted.length - sent.length <= 1, `${persisted.length} persisted, ${sent.length} sent`);
});

test("/clone: the open subagents (awaiting the owner or running) and their later results move to the new session", async () => {
  await owner.close();
  startOwner("owner-fork");
  const raw = (cmd: Record<string, unknown>) => owner.child.stdin!.write(JSON.stringify(cmd) + "\n");
  await prompt("OWNER-FORK: a quick and a slow child");
  await toolEnd("crew_spawn");
  await toolEnd("crew_spawn");
  const quick = (await ownedTasks("fork-quick"))[0]!;
  const slow = (await ownedTasks("fork-slow"))[0]!;
  const oldOwner = h.daemon.supervisor.tasks.get(quick.taskId)!.rec.owner;
  await until(
    "the quick result in the old session",
    () =>
      sessionEntries().some((e) => e.customType === "crew-result" && e.details.card.subagent_id === quick.taskId) ||
      undefined,
  );
  await idle();
  assert.match(
    (await h.cli.request("task.get", { taskId: slow.taskId })).status,
    /^(starting|running)$/,
    "still open at the clone",
  );
  raw({ type: "clone", id: "c1" });
  await owner.waitFor((e) => e.type === "response" && e.id === "c1");
  raw({ type: "get_state", id: "g1" });
  const state = (await owner.waitFor((e) => e.type === "response" && e.id === "g1")) as {
    data: { sessionId: string; sessionFile: string };
  };
  const newOwner = state.data.sessionId;
  assert.notEqual(newOwner, oldOwner);
  // The CLI sees the owner's label, never its id (src/daemon/delivery/owner-view.ts).
  const ownerOf = async (taskId: string) => (await h.cli.request("task.get", { taskId })).owner;
  const newLabel = ownerLabel(newOwner);
  const end = Date.now() + 10_000;
  while (Date.now() < end && ((await ownerOf(quick.taskId)) !== newLabel || (await ownerOf(slow.taskId)) !== newLabel))
    await new Promise((r) => setTimeout(r, 100));
  assert.equal(await ownerOf(quick.taskId), newLabel, "a completed subagent awaiting the owner moves");
  assert.equal(await ownerOf(slow.taskId), newLabel, "a running subagent moves");
  await h.waitFor(slow.taskId, (r) => r.status === "completed", "the slow child's report");
  const newEntries = () => completeJsonLines<Record<string, any>>(state.data.sessionFile);
  await until(
    "the slow result in the new session",
    () =>
      newEntries().some((e) => e.customType === "crew-result" && e.details.card.subagent_id === slow.taskId) ||
      undefined,
  );
  assert.equal(
    sessionEntries().some((e) => e.customType === "crew-result" && e.details.card.subagent_id === slow.taskId),
    false,
    "not in the session it left",
  );
  // The clone copied the quick result's entry: it is not injected a second time.
  assert.equal(
    newEntries().filter((e) => e.customType === "crew-result" && e.details.card.subagent_id === quick.taskId).length,
    1,
  );
  const { tasks } = await h.cli.request("task.list", { owner: oldOwner });
  assert.deepEqual(
    tasks.filter((t) => t.taskId === quick.taskId || t.taskId === slow.taskId),
    [],
    "the old session owns neither any more",
  );
  await idle();
});
