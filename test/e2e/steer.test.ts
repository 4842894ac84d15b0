// `respond` to a running task steers it (issue 25 item 8): the message goes into the running turn through the child
// extension, as pi's own steer does, is journaled (`steered`, its text in steer.<cycle>.<n>.md) before the push, and
// the cycle goes on (no new cycle, no settle of its own). Real pi against the scripted model, whose first answer
// takes a while so the steer arrives mid-run; its request log shows the steer reached the model in the same cycle.
// On headless (pi --mode rpc) and tmux (pi's TUI), with the in-process daemon.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import type { RecordedRequest } from "../../fixtures/scripted-model/server.js";
import type { AgentResult } from "../../src/core/types.js";
import { privateTmux } from "../helpers/tmux.js";
import { readJournal, startHarness, type Harness } from "./daemon-harness.js";

const report = (text: string) => ({
  toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: text } }],
});
const SCRIPT: Script = {
  conversations: [
    {
      name: "steer",
      match: "MARK-STEER",
      steps: [
        // Whatever request carries the steer (after the tool result, or with the prompt) answers with it.
        { match: "/STEER-NOTE-\\w+/", matchIn: "sinceAssistant", ...report("took the steer") },
        // The model takes a while with its first answer: the steer comes while pi streams it.
        { toolCalls: [{ name: "write", arguments: { path: "a.txt", content: "a\n" } }], delayMs: 3500 },
        report("never steered"),
      ],
    },
    // Holds the only slot for a while: the next task waits queued.
    {
      name: "hold",
      match: "MARK-HOLD",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "b.txt", content: "b\n" } }], delayMs: 3000 },
        report("held"),
      ],
    },
    { name: "quick", match: "MARK-QUICK", steps: [report("quick one")] },
  ],
};

const tmux = privateTmux("dsh-steer");
let h: Harness;

before(async () => {
  h = await startHarness(SCRIPT, { maxParallelAgents: 1, tmuxSocket: tmux.socketName });
});
after(async () => {
  await h?.close();
  await tmux.kill();
});

const respond = (taskId: string, message: string, steer = true) =>
  h.cli.request("task.respond", { taskId, message, ...(steer ? { steer: true } : {}) });

/** The texts of every message of a request the model got. */
function texts(r: RecordedRequest): string[] {
  const body = r.body as { messages?: { content?: unknown }[] };
  return (body.messages ?? []).map((m) =>
    typeof m.content === "string"
      ? m.content
      : Array.isArray(m.content)
        ? m.content.map((c: { text?: string }) => c.text ?? "").join("")
        : "",
  );
}
/** The task's requests to the model (its prompt's marker), in order. */
const requestsOf = (marker: string) => h.model.requests().filter((r) => texts(r).some((t) => t.includes(marker)));

async function until<T>(what: string, fn: () => Promise<T | undefined> | T | undefined, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v as T;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

for (const runtime of ["headless", "tmux"] as const) {
  test(`${runtime}: respond to a running task steers it: the model gets the message in the same cycle, journaled before the push`, async () => {
    const tag = `MARK-STEER-${runtime}`;
    const note = `STEER-NOTE-${runtime} also write the tests`;
    const { taskId } = await h.spawn({ prompt: `${tag} write a.txt`, runtime, isolated: true });
    // pi runs the cycle (its agent_start), and the model is busy with its slow first answer.
    await h.waitFor(taskId, (r) => r.status === "running", "the cycle running");
    await until("the first model request", () => requestsOf(tag).length > 0 || undefined);

    const reply = await respond(taskId, note);
    assert.deepEqual(reply, { taskId, subagent_id: taskId, cycle: 1, steered: true });

    const r = await h.wait(taskId);
    assert.equal(r.status, "completed", JSON.stringify(r));
    assert.equal(r.summary, "took the steer");

    // The model saw the steer once, after the tool batch it was on, in cycle 1's run: no prompt was sent again.
    const reqs = requestsOf(tag);
    const withSteer = reqs.filter((q) => texts(q).some((t) => t.includes(note)));
    assert.ok(withSteer.length >= 1, "a request carried the steer");
    for (const q of withSteer) assert.equal(texts(q).filter((t) => t.includes(note)).length, 1, "the steer once");
    assert.equal(
      texts(reqs.at(-1)!).filter((t) => t.includes(tag)).length,
      1,
      "one prompt in the conversation: the steer did not start a cycle",
    );
    assert.ok(
      texts(withSteer[0]!).findIndex((t) => t.includes(note)) > texts(withSteer[0]!).findIndex((t) => t.includes(tag)),
      "the steer follows the prompt",
    );

    // Journaled: the text on disk, steered before steer_taken, one settle, no respond (no new cycle).
    const j = readJournal(h, taskId);
    const at = (type: string) => j.findIndex((e) => e.type === type);
    assert.ok(at("steered") >= 0 && at("steered") < at("steer_taken"), JSON.stringify(j.map((e) => e.type)));
    assert.deepEqual(
      j.filter((e) => e.type === "steered").map((e) => [e.cycle, e.n]),
      [[1, 1]],
    );
    assert.equal(j.filter((e) => e.type === "steer_taken").length, 1);
    assert.equal(j.filter((e) => e.type === "settle").length, 1);
    assert.equal(j.filter((e) => e.type === "respond").length, 0);
    assert.ok(at("steer_taken") < at("settle"), "taken within the cycle");
    assert.equal(readFileSync(join(h.home, "tasks", taskId, "steer.1.1.md"), "utf8"), note);
    await h.cli.request("task.close", { taskId });
  });
}

test("respond without steer (what an owner's crew_respond sends) still refuses a running task; nothing is journaled", async () => {
  const { taskId } = await h.spawn({ prompt: "MARK-STEER refused", runtime: "headless" });
  await h.waitFor(taskId, (r) => r.status === "running", "the cycle running");
  await assert.rejects(respond(taskId, "STEER-NOTE-refused", false), (e: { code?: string; message?: string }) => {
    assert.equal(e.code, "BAD_STATE");
    assert.match(e.message ?? "", /is running; respond needs a completed or blocked task/);
    return true;
  });
  assert.equal(readJournal(h, taskId).filter((e) => e.type.startsWith("steer")).length, 0);
  const r = await h.wait(taskId);
  assert.equal(r.summary, "never steered");
  await h.cli.request("task.close", { taskId });
});

test("a task queued for a slot: the steer is kept (reply pending) and joins its run when it starts", async () => {
  const hold = await h.spawn({ prompt: "MARK-HOLD keep the slot", runtime: "headless" });
  const tag = "MARK-STEER-queued";
  const note = "STEER-NOTE-queued mind the edge case";
  const { taskId, queued } = await h.spawn({ prompt: `${tag} write a.txt`, runtime: "headless", isolated: true });
  assert.equal(queued, true, "the only slot is taken");
  const reply = await respond(taskId, note);
  assert.deepEqual(reply, { taskId, subagent_id: taskId, cycle: 1, steered: true, pending: true });
  const r = await h.wait(taskId);
  assert.equal(r.summary, "took the steer");
  const j = readJournal(h, taskId);
  assert.equal(j.filter((e) => e.type === "steer_taken").length, 1);
  assert.equal(j.filter((e) => e.type === "respond").length, 0);
  assert.ok(requestsOf(tag).some((q) => texts(q).some((t) => t.includes(note))));
  await h.wait(hold.taskId);
  for (const id of [taskId, hold.taskId]) await h.cli.request("task.close", { taskId: id });
});

test("a steer its cycle ends without (aborted while queued) is missed: journaled after the settle, a warning in the result", async () => {
  const hold = await h.spawn({ prompt: "MARK-HOLD again", runtime: "headless" });
  const { taskId, queued } = await h.spawn({ prompt: "MARK-QUICK never runs", runtime: "headless" });
  assert.equal(queued, true);
  const reply = await respond(taskId, "STEER-NOTE-missed");
  assert.equal(reply.pending, true);
  const ab = await h.cli.request("task.abort", { taskIds: [taskId] });
  assert.deepEqual(ab.aborted_ids, [taskId]);
  const r = await h.wait(taskId);
  assert.equal(r.status, "interrupted");
  assert.ok(
    (r.warnings ?? []).some((w) => /steer\.1\.1\.md.*did not reach the child: cycle 1 ended before pi took it/.test(w)),
    JSON.stringify(r.warnings),
  );
  const types = readJournal(h, taskId).map((e) => e.type);
  assert.ok(types.indexOf("settle") < types.indexOf("steer_missed"), types.join(" "));
  // A settled failed/interrupted task is not steered, nor followed up.
  await assert.rejects(respond(taskId, "again"), /BAD_STATE|interrupted/);
  await h.wait(hold.taskId);
  for (const id of [taskId, hold.taskId]) await h.cli.request("task.close", { taskId: id }).catch(() => undefined);
  assert.ok(existsSync(join(h.home, "tasks", taskId, "steer.1.1.md")), "its text stays in the task dir");
});

export type { AgentResult };
