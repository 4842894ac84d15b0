// What a real owner pi's model hears is what the child said, and only what it can act on. A child whose cycle ended
// with a validated crew_report while Herdr said `blocked` is delivered with that report exactly (Herdr's word stays in
// the AgentResult's herdrStatus and status), with where its isolated work is; a child sharing a dirty checkout is
// delivered without our bookkeeping warnings ("not isolated…"), which stay in the AgentResult.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { RpcPi } from "../../fixtures/scripted-model/rpc-child.js";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { startFakeHerdr, type FakeHerdr } from "../../fixtures/fake-herdr/server.js";
import { rpcCommand, until, untilQuiet } from "../helpers/wait.js";
import { startHarness, type Harness } from "./daemon-harness.js";
import { startOwnerPi } from "./owner-harness.js";

const task = (goal: string) => ({ goal, context: [], instructions: ["Do it and report with crew_report."] });
const REPORT = "Wrote feature.txt.\n\nIt holds the new feature.";

const SCRIPT: Script = {
  conversations: [
    {
      name: "child-herdr-blocked",
      match: "CHILD-HERDR-BLOCKED",
      steps: [
        // Slow enough for the test to make the fake Herdr say blocked while the child still works.
        { toolCalls: [{ name: "write", arguments: { path: "feature.txt", content: "new\n" } }], delayMs: 4000 },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: REPORT } }] },
        { text: "done" },
      ],
    },
    {
      name: "child-shared",
      match: "CHILD-SHARED",
      steps: [
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "Nothing to change." } }] },
        { text: "done" },
      ],
    },
    {
      name: "owner",
      match: "OWNER-",
      steps: [
        {
          match: "OWNER-BLOCKED",
          matchIn: "sinceAssistant",
          toolCalls: [
            {
              name: "crew_spawn",
              arguments: { subagent: "worker", brief: "herdr-blocked", task: task("CHILD-HERDR-BLOCKED") },
            },
          ],
        },
        {
          match: "OWNER-SHARED",
          matchIn: "sinceAssistant",
          toolCalls: [
            { name: "crew_spawn", arguments: { subagent: "sharer", brief: "shared", task: task("CHILD-SHARED") } },
          ],
        },
        { text: "Noted." },
      ],
    },
  ],
};

let fake: FakeHerdr;
let h: Harness;
let owner: RpcPi;
before(async () => {
  fake = await startFakeHerdr({ quietMs: 1000 });
  h = await startHarness(SCRIPT, { runtime: "herdr", herdrSocketPath: fake.socketPath });
  mkdirSync(join(h.repo, ".pi", "agents"), { recursive: true });
  writeFileSync(
    join(h.repo, ".pi", "agents", "sharer.md"),
    "---\nname: sharer\ndescription: works in the checkout itself\nisolated: false\n---\nDo the task; report with crew_report.\n",
  );
  owner = startOwnerPi(h, { sessionPath: join(h.dir, "owner", "owner.jsonl"), lifetimeMs: 300_000 });
});
after(async () => {
  await owner?.close().catch(() => undefined);
  await h?.close();
  await fake?.close();
});

type Heard = Record<string, unknown> & { subagent_id: string; brief?: string };
/** The deliveries the owner's model was shown (not crew_spawn's `{subagent_id}` acknowledgements). */
const deliveriesHeard = (): Heard[] =>
  h.model
    .requests()
    .filter((r) => r.conversation === "owner")
    .flatMap((r) =>
      ((r.body as { messages: { content?: unknown }[] }).messages ?? []).map((m) =>
        typeof m.content === "string"
          ? m.content
          : Array.isArray(m.content)
            ? m.content.map((p: { text?: string }) => p.text ?? "").join("")
            : "",
      ),
    )
    .filter((t) => t.startsWith('{"subagent_id"'))
    .map((t) => JSON.parse(t) as Heard)
    .filter((d) => d.brief !== undefined);
const prompt = async (message: string) => {
  await untilQuiet(owner);
  const r = await rpcCommand(owner, { type: "prompt", message });
  assert.equal(r.success, true, `pi refused the prompt: ${r.error}`);
};
const taskOf = (brief: string) =>
  until(`the ${brief} task`, async () => {
    const { tasks } = await h.cli.request("task.list", {});
    return tasks.find((t) => t.brief === brief);
  });

test("a validated crew_report is delivered exactly as the child made it while Herdr says blocked, with where the work is", async () => {
  await prompt("OWNER-BLOCKED: delegate");
  const { taskId } = await taskOf("herdr-blocked");
  const paneId = await until("the child's pane", () => h.daemon.supervisor.tasks.get(taskId)?.rec.handle?.paneId);
  // The fake knows a pane's agent once pi is its foreground process (as Herdr detects it), a moment after the start.
  await until("the fake Herdr saying blocked for the child's agent", () =>
    fake.setAgentStatus(paneId, "blocked").then(
      () => true,
      () => false,
    ),
  );
  const heard = await until(
    "the delivery in the owner model's context",
    () => deliveriesHeard().find((d) => d.subagent_id === taskId),
    120_000,
  );
  assert.deepEqual(heard, {
    subagent_id: taskId,
    brief: "herdr-blocked",
    result: { outcome: "completed", report: REPORT },
    work: { branch: `dsh/${taskId}`, landed: false },
  });
  // Herdr's word stays where the contract puts it.
  const r = await h.cli.request("task.get", { taskId });
  assert.equal(r.herdrStatus, "blocked");
  assert.equal(r.status, "blocked");
});

test("a child sharing a dirty checkout: the AgentResult keeps 'not isolated', the owner's model does not get it", async () => {
  writeFileSync(join(h.repo, "notes.txt"), "my unsaved work\n");
  await prompt("OWNER-SHARED: delegate");
  const { taskId } = await taskOf("shared");
  const res = await h.wait(taskId, 120_000);
  assert.ok(
    (res.warnings ?? []).some((w) => w.startsWith("not isolated")),
    JSON.stringify(res.warnings),
  );
  const heard = await until(
    "the delivery in the owner model's context",
    () => deliveriesHeard().find((d) => d.subagent_id === taskId),
    60_000,
  );
  assert.deepEqual(heard, {
    subagent_id: taskId,
    brief: "shared",
    result: { outcome: "completed", report: "Nothing to change." },
  });
});
