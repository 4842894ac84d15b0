// A real owner pi (RPC mode, owner extension) whose model takes ~2 s per reply, as real ones do, with real headless
// children and the scripted model (issue 29): status snapshots and reminders never start an owner turn (no model
// request whose only new content is one), the provider-bound prefix only grows, and crew_respond / crew_done /
// crew_abort take what the CLI takes (a 4-character suffix, an agent name); an ambiguous id names the candidates.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import type { RpcPi } from "../../fixtures/scripted-model/rpc-child.js";
import type { RecordedRequest } from "../../fixtures/scripted-model/server.js";
import type { Script, ScriptStep } from "../../fixtures/scripted-model/script.js";
import type { AgentResult } from "../../src/core/types.js";
import { startHarness, type Harness } from "./daemon-harness.js";
import { startOwnerPi } from "./owner-harness.js";
import { rpcCommand, until, untilQuiet } from "../helpers/wait.js";

/** Every owner reply takes this long: a status change lands while one streams. */
const SLOW = 2000;
const LOOPS = 11;

const task = (goal: string) => ({ goal, context: [], instructions: ["Do it and report with crew_report."] });
const spawn = (brief: string, goal: string) => ({
  name: "crew_spawn",
  arguments: { subagent: "worker", brief, task: task(goal) },
});
const report = (r: string) => ({ name: "crew_report", arguments: { outcome: "completed", report: r } });

// Filled in by the tests once the ids exist: the server reads the script object on every request.
const respondArgs: Record<string, unknown> = { subagent_id: "", message: "Use blue" };
const doneArgs: Record<string, unknown> = { subagent_id: "" };
const abortArgs: Record<string, unknown> = { subagent_id: "" };
const ambiguousArgs: Record<string, unknown> = { subagent_id: "t", message: "hi" };

const since = (match: string | RegExp, rest: Omit<ScriptStep, "match" | "matchIn">): ScriptStep => ({
  match: match instanceof RegExp ? match : match,
  matchIn: "sinceAssistant",
  delayMs: SLOW,
  ...rest,
});
// LOOP-k → bash `echo LOOP-(k+1)`: a run of model calls with nothing changing, so a reminder comes due.
const loop: ScriptStep[] = Array.from({ length: LOOPS }, (_, i) =>
  i + 1 < LOOPS
    ? {
        match: new RegExp(`LOOP-${i + 1}\\b`),
        matchIn: "sinceAssistant" as const,
        toolCalls: [{ name: "bash", arguments: { command: `echo LOOP-${i + 2}` } }],
      }
    : { match: new RegExp(`LOOP-${LOOPS}\\b`), matchIn: "sinceAssistant" as const, text: "Loop done.", delayMs: SLOW },
);

const SCRIPT: Script = {
  conversations: [
    { name: "child-run", match: "CHILD-RUN", steps: [{ text: "slow", delayMs: 120_000 }] },
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
    {
      name: "owner",
      match: "OWNER-",
      afterEnd: "repeat",
      steps: [
        since("OWNER-SPAWN", { toolCalls: [spawn("runner", "CHILD-RUN")] }),
        since("OWNER-ASK", { toolCalls: [spawn("asker", "CHILD-ASK")] }),
        since("OWNER-LOOP", { toolCalls: [{ name: "bash", arguments: { command: "echo LOOP-1" } }], delayMs: 0 }),
        ...loop,
        since("DO-RESPOND", { toolCalls: [{ name: "crew_respond", arguments: respondArgs }] }),
        since("DO-AMBIGUOUS", { toolCalls: [{ name: "crew_respond", arguments: ambiguousArgs }] }),
        since("DO-DONE", { toolCalls: [{ name: "crew_done", arguments: doneArgs }] }),
        since("DO-ABORT", { toolCalls: [{ name: "crew_abort", arguments: abortArgs }] }),
        { text: "Noted.", delayMs: SLOW },
      ],
    },
  ],
};

let h: Harness;
let owner: RpcPi;

before(async () => {
  h = await startHarness(SCRIPT, {
    runtime: "headless",
    defaultModel: "scripted/scripted-model",
    maxParallelAgents: 4,
  });
  owner = startOwnerPi(h, { sessionPath: join(h.dir, "owner", "owner.jsonl"), lifetimeMs: 600_000 });
});
after(async () => {
  await owner?.close().catch(() => undefined);
  await h?.close();
});

type Msg = { role: string; content?: unknown };
const ownerRequests = (): RecordedRequest[] => h.model.requests().filter((r) => r.conversation === "owner");
const messagesOf = (r: RecordedRequest): Msg[] => (r.body as { messages?: Msg[] }).messages ?? [];
const textOf = (m: Msg): string =>
  typeof m.content === "string"
    ? m.content
    : Array.isArray(m.content)
      ? m.content.map((p: { text?: string }) => p.text ?? "").join("")
      : "";
const isStatus = (t: string) => t.startsWith('{"crew_status"') || t.startsWith('{"crew_reminder"');
/** What a request added since the model's last answer. */
const newContent = (r: RecordedRequest): string[] => {
  const ms = messagesOf(r);
  const last = ms.map((m) => m.role).lastIndexOf("assistant");
  return ms.slice(last + 1).map(textOf);
};
/** Requests whose only new content is status messages: turns nobody asked for. */
const statusOnly = () =>
  ownerRequests().filter((r) => {
    const added = newContent(r);
    return added.length > 0 && added.every(isStatus);
  });

const command = (cmd: Record<string, unknown>) => rpcCommand(owner, cmd);
/** Prompt once quiet and wait until the owner is quiet again (the run and any turn a delivery starts). */
async function prompt(message: string): Promise<void> {
  await untilQuiet(owner);
  const r = await command({ type: "prompt", message });
  assert.equal(r.success, true, `pi refused the prompt: ${r.error}`);
  await until("the prompt's run to start", () =>
    ownerRequests().some((q) => newContent(q).some((t) => t.startsWith(message))),
  );
  await untilQuiet(owner);
}
const toolEnds = (name: string) =>
  owner.events.filter((e) => e.type === "tool_execution_end" && e.toolName === name) as Record<string, any>[];
const byBrief = async (brief: string) => {
  const { tasks } = await h.cli.request("task.list", {});
  const t = tasks.find((x) => x.brief === brief);
  assert.ok(t, `no task with brief ${brief}`);
  return t;
};
const get = (taskId: string) => h.cli.request("task.get", { taskId });

let runner: AgentResult;
let asker: AgentResult;

test("a child's status changing while a 2 s reply streams: the snapshot rides with the next request, never one of its own", async () => {
  await prompt("OWNER-SPAWN one runner");
  runner = await byBrief("runner");
  await h.waitFor(runner.taskId, (r) => r.status === "running", "the runner running");
  // The owner is quiet: a change now waits for the next request that happens anyway (the prompt below).
  await untilQuiet(owner);
  assert.equal(ownerRequests().length, 2, "the spawn call and its answer, nothing else");
  await prompt("OWNER-PING while it runs");
  assert.deepEqual(
    statusOnly().map((r) => r.seq),
    [],
    "no request whose only new content is a status message",
  );
  assert.equal(ownerRequests().length, 3, "one more request: the prompt's");
  const snapshots = ownerRequests()
    .flatMap((r) => newContent(r))
    .filter(isStatus);
  assert.ok(
    snapshots.some((t) => t.includes(runner.taskId) && t.includes('"running"')),
    `a snapshot of the running child reached the model: ${JSON.stringify(snapshots)}`,
  );
});

test("a needs_input delivery, then ten model calls: the reminder rides along with one of them; nothing starts a turn alone", async () => {
  await prompt("OWNER-ASK one question");
  asker = await byBrief("asker");
  await h.waitFor(asker.taskId, (r) => r.status === "blocked" || r.status === "completed", "the asker's result");
  await until("the needs_input delivery reached the model", () =>
    ownerRequests().some((r) => newContent(r).some((t) => t.startsWith(`{"subagent_id":"${asker.taskId}","brief"`))),
  );
  await untilQuiet(owner);
  const before = ownerRequests().length;
  await prompt("OWNER-LOOP eleven shell calls");
  assert.equal(ownerRequests().length - before, LOOPS + 1, "one request per loop step and the final answer");
  const reminders = ownerRequests()
    .slice(before)
    .flatMap((r) => newContent(r))
    .filter((t) => t.startsWith('{"crew_reminder"'));
  assert.deepEqual(
    reminders,
    [JSON.stringify({ crew_reminder: [{ subagent_id: asker.taskId, status: "needs_input" }] })],
    "one reminder, listing only the session awaiting the owner",
  );
  assert.deepEqual(
    statusOnly().map((r) => r.seq),
    [],
    "no request whose only new content is a status message",
  );
});

test("crew_respond, crew_done and crew_abort by the 4-character suffix or the agent name act on the right task", async () => {
  respondArgs.subagent_id = asker.taskId.slice(-4);
  await prompt("DO-RESPOND by suffix");
  const responded = toolEnds("crew_respond").at(-1)!;
  assert.equal(responded.isError, false, JSON.stringify(responded.result));
  assert.equal(
    responded.result.content[0].text,
    JSON.stringify({ subagent_id: asker.taskId }),
    "the full id comes back",
  );
  await h.waitFor(asker.taskId, (r) => r.status === "completed", "the asker's second cycle");
  await until("the completed delivery reached the model", () =>
    ownerRequests().some((r) => newContent(r).some((t) => t.includes("Painted it blue"))),
  );
  assert.match((await get(runner.taskId)).status, /^(starting|running)$/, "the runner was not touched");

  doneArgs.subagent_id = (await get(asker.taskId)).agent.name;
  assert.match(
    String(doneArgs.subagent_id),
    new RegExp(`-${asker.taskId.slice(-4)}$`),
    "an agent name ends in the suffix",
  );
  await prompt("DO-DONE by agent name");
  const done = toolEnds("crew_done").at(-1)!;
  assert.equal(done.isError, false, JSON.stringify(done.result));
  assert.equal(done.result.content[0].text, JSON.stringify({ subagent_id: asker.taskId }));
  assert.equal((await get(asker.taskId)).status, "closed");

  abortArgs.subagent_id = runner.taskId.slice(-4);
  await prompt("DO-ABORT by suffix");
  const aborted = toolEnds("crew_abort").at(-1)!;
  assert.equal(aborted.isError, false, JSON.stringify(aborted.result));
  assert.deepEqual(JSON.parse(aborted.result.content[0].text), {
    aborted_ids: [runner.taskId],
    missing_ids: [],
    foreign_ids: [],
  });
  await h.waitFor(runner.taskId, (r) => r.status === "interrupted", "the runner aborted");
});

test("an id that matches several of the session's subagents is an {error} naming the candidates", async () => {
  await prompt("DO-AMBIGUOUS the prefix t");
  const end = toolEnds("crew_respond").at(-1)!;
  assert.equal(end.isError, true);
  const { error } = JSON.parse(end.result.content[0].text) as { error: string };
  assert.match(error, /"t" matches 2 subagents/);
  for (const id of [runner.taskId, asker.taskId]) assert.ok(error.includes(id), `${id} named in: ${error}`);
  assert.deepEqual(
    statusOnly().map((r) => r.seq),
    [],
    "still no request of a status message alone",
  );
});

test("over the whole file, the provider-bound message prefix never changes between consecutive owner requests", () => {
  const reqs = ownerRequests();
  for (let i = 1; i < reqs.length; i++) {
    const prev = messagesOf(reqs[i - 1]!);
    const cur = messagesOf(reqs[i]!);
    assert.deepEqual(
      cur.slice(0, prev.length),
      prev,
      `request ${reqs[i]!.seq} rewrote the prefix of ${reqs[i - 1]!.seq}`,
    );
  }
});
