// A spend cap seen from a real owner pi: a subagent definition's maxCost reaches task.spawn through crew_spawn; when
// the child's spend reaches it, the owner's model hears an error-shaped delivery ({status:"blocked", error}) naming
// the cap, the spend and the command a person runs, never a report the child did not make. The model's crew_respond
// is refused by name (CAP_NEEDS_PERSON) and the task stays paused: a spend cap is lifted by a person (the CLI's
// respond), not by the model it limits.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { RpcPi } from "../../fixtures/scripted-model/rpc-child.js";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { rpcCommand, until, untilQuiet } from "../helpers/wait.js";
import { startHarness, type Harness } from "./daemon-harness.js";
import { startOwnerPi } from "./owner-harness.js";

// Only output tokens cost: 500 of them are 1.00 $.
const PRICES = { input: 0, output: 2000, cacheRead: 0, cacheWrite: 0 };
const write = (path: string, extra: object = {}) => ({
  toolCalls: [{ name: "write", arguments: { path, content: "x\n" } }],
  usage: { prompt: 1000, completion: 500 },
  ...extra,
});
const respondArgs: Record<string, unknown> = { subagent_id: "", message: "go on" };
const SUMMARY = "cost cap 1.50 $ reached (2.00 $ spent); respond to continue with another 1.50 $";
const SCRIPT: Script = {
  conversations: [
    {
      name: "child",
      match: "CHILD-CAPPED",
      steps: [
        write("capped-a.txt"),
        write("capped-b.txt"),
        write("capped-c.txt", { delayMs: 3000 }),
        {
          toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "Capped work done" } }],
          usage: { prompt: 1000, completion: 10 },
        },
      ],
    },
    {
      name: "owner",
      match: "OWNER-",
      steps: [
        {
          match: "OWNER-CAP",
          matchIn: "sinceAssistant",
          toolCalls: [
            {
              name: "crew_spawn",
              arguments: {
                subagent: "thrifty",
                brief: "capped",
                task: {
                  goal: "CHILD-CAPPED write three files",
                  context: [],
                  instructions: ["Report with crew_report."],
                },
              },
            },
          ],
          usage: { prompt: 100, completion: 1 },
        },
        {
          match: "DO-RESPOND",
          matchIn: "sinceAssistant",
          toolCalls: [{ name: "crew_respond", arguments: respondArgs }],
          usage: { prompt: 100, completion: 1 },
        },
        { match: '"brief"', text: "Noted.", usage: { prompt: 100, completion: 1 } },
        { text: "Waiting for the subagent.", usage: { prompt: 100, completion: 1 } },
      ],
    },
  ],
};

let h: Harness;
let owner: RpcPi;
before(async () => {
  h = await startHarness(SCRIPT, { runtime: "headless" }, {}, { cost: PRICES });
  // A project definition with a cost cap: crew_spawn hands it to task.spawn.
  mkdirSync(join(h.repo, ".pi", "agents"), { recursive: true });
  writeFileSync(
    join(h.repo, ".pi", "agents", "thrifty.md"),
    "---\nname: thrifty\ndescription: a worker on a budget\nmaxCost: 1.5\n---\nDo the task; report with crew_report.\n",
  );
  owner = startOwnerPi(h, { sessionPath: join(h.dir, "owner", "owner.jsonl"), lifetimeMs: 300_000 });
});
after(async () => {
  await owner?.close().catch(() => undefined);
  await h?.close();
});

/** The owner model's requests: every text it was shown. */
const ownerTexts = (): string[] =>
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
    );
const prompt = async (message: string) => {
  await untilQuiet(owner);
  const r = await rpcCommand(owner, { type: "prompt", message });
  assert.equal(r.success, true, `pi refused the prompt: ${r.error}`);
};

test("a definition's maxCost pauses the subagent; the owner's model hears a blocked error naming the person's command; its crew_respond is refused and only a person's respond continues it", async () => {
  await prompt("OWNER-CAP: delegate on a budget");
  const task = await until("the capped subagent's task", async () => {
    const { tasks } = await h.cli.request("task.list", {});
    return tasks.find((t) => t.brief === "capped");
  });
  const taskJson = () =>
    JSON.parse(readFileSync(join(h.home, "tasks", task.taskId, "task.json"), "utf8")) as {
      caps?: Record<string, unknown>;
    };
  assert.deepEqual(taskJson().caps, { cost: { limit: 1.5, step: 1.5 } }, "the definition's cap");
  const paused = await h.wait(task.taskId);
  assert.equal(paused.status, "blocked");
  assert.equal(paused.summary, SUMMARY);
  // The owner's model got an error-shaped delivery: status blocked, the cap, the spend and the person's command.
  type Heard = { subagent_id: string; brief: string; status?: string; error?: string; result?: unknown };
  const heard = await until("the blocked delivery in the owner model's context", () =>
    ownerTexts()
      .filter((t) => t.startsWith('{"subagent_id"'))
      .map((t) => JSON.parse(t) as Heard)
      // The delivery, not crew_spawn's `{subagent_id}` acknowledgement.
      .find((d) => d.subagent_id === task.taskId && d.brief !== undefined),
  );
  assert.equal(heard.result, undefined, `no report the child did not make: ${JSON.stringify(heard)}`);
  assert.equal(heard.status, "blocked");
  assert.equal(heard.brief, "capped");
  assert.match(heard.error!, /^CAP_REACHED: cost cap 1\.50 \$ reached \(2\.00 \$ spent\)/);
  assert.ok(heard.error!.includes(`dsh-herdr respond ${task.taskId} --max-cost 1.5 "go on"`), heard.error);
  assert.ok(!ownerTexts().some((t) => t.includes(task.taskId) && t.includes('"outcome"')));

  // The owner model answers with crew_respond anyway: refused by name, telling it to ask the person; nothing moves.
  respondArgs.subagent_id = task.taskId;
  await prompt("DO-RESPOND now");
  const refused = (await owner.waitFor(
    (e) => e.type === "tool_execution_end" && e.toolName === "crew_respond",
    30_000,
  )) as { isError: boolean; result: { content: { text: string }[] } };
  assert.equal(refused.isError, true);
  const said = refused.result.content[0]!.text;
  assert.match(said, /CAP_NEEDS_PERSON/);
  assert.match(said, /ask the user/i);
  assert.ok(said.includes(`dsh-herdr respond ${task.taskId} --max-cost 1.5`), said);
  await untilQuiet(owner);
  const still = await h.cli.request("task.get", { taskId: task.taskId });
  assert.equal(still.status, "blocked");
  assert.deepEqual(taskJson().caps, { cost: { limit: 1.5, step: 1.5 } }, "the cap is not raised");
  const journal = readFileSync(join(h.home, "tasks", task.taskId, "events.jsonl"), "utf8");
  assert.ok(!journal.includes('"type":"respond"'), "no follow-up cycle started");

  // The person raises it (the CLI's respond): the same subagent goes on, with another 1.50 $.
  await h.cli.request("task.respond", { taskId: task.taskId, message: "go on", steer: true, maxCost: 1.5 });
  const done = await until(
    "the continued cycle completed",
    async () => {
      const r = await h.cli.request("task.get", { taskId: task.taskId });
      return r.status === "completed" && r;
    },
    90_000,
  );
  assert.equal(done.summary, "Capped work done");
  assert.deepEqual(taskJson().caps, { cost: { limit: 3.5, step: 1.5 } });
});
