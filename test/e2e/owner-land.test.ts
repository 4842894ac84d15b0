// A real owner pi 0.73.1 (RPC mode, the owner extension) and real child pi processes (headless) against the
// scripted model, a real daemon and real git: the owner's model sees a failing check's receipt (the request log shows
// it) and crew_responds; the check passes on the next cycle. crew_land exists only when config owner.mayLand is true
// (read when the owner pi loads the extension), lands the owner's own subagent's work in the checkout and returns the
// landing outcome as JSON; the daemon refuses task.land from an owner without the setting, or for another owner's task.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { RpcPi } from "../../fixtures/scripted-model/rpc-child.js";
import type { RecordedRequest } from "../../fixtures/scripted-model/server.js";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { connect } from "../../src/client/index.js";
import { setConfigValue } from "../../src/store/config.js";
import { git, write } from "../helpers/git.js";
import { rpcCommand, until, untilQuiet } from "../helpers/wait.js";
import { startHarness, type Harness } from "./daemon-harness.js";
import { startOwnerPi } from "./owner-harness.js";

const task = (goal: string) => ({ goal, context: [], instructions: ["Do it and report with crew_report."] });
const report = (r: string) => ({ name: "crew_report", arguments: { outcome: "completed", report: r } });
const CHECK = "test -f fixed.txt || { echo 'fixed.txt is missing'; exit 1; }";

// Filled in once the ids exist: the server reads the script object on every request.
const respondArgs: Record<string, unknown> = { subagent_id: "", message: "FIX-IT: the check failed, add fixed.txt" };
const landArgs: Record<string, unknown> = { subagent_id: "" };

const SCRIPT: Script = {
  conversations: [
    {
      name: "child-checked",
      match: "CHILD-CHECKED",
      // The follow-up's reactive write is the third model call: the call after it replays the last step (its report).
      afterEnd: "repeat",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "work.txt", content: "work\n" } }] },
        { toolCalls: [report("wrote work.txt")] },
        { toolCalls: [report("added fixed.txt")] },
        { match: "FIX-IT", toolCalls: [{ name: "write", arguments: { path: "fixed.txt", content: "fixed\n" } }] },
      ],
    },
    {
      name: "child-land",
      match: "CHILD-LAND",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "landed.txt", content: "landed by the owner\n" } }] },
        { toolCalls: [report("wrote landed.txt")] },
      ],
    },
    {
      name: "owner-a",
      match: "OWNER-A",
      steps: [
        {
          match: "OWNER-A-SPAWN",
          matchIn: "sinceAssistant",
          toolCalls: [
            {
              name: "crew_spawn",
              arguments: { subagent: "checked-worker", brief: "checked", task: task("CHILD-CHECKED") },
            },
          ],
        },
        {
          match: '"verified":false',
          matchIn: "sinceAssistant",
          toolCalls: [{ name: "crew_respond", arguments: respondArgs }],
        },
        { match: '"verified":true', matchIn: "sinceAssistant", text: "The checks pass now." },
        { text: "Waiting for the subagent." },
      ],
    },
    {
      name: "owner-b",
      match: "OWNER-B",
      steps: [
        {
          match: "OWNER-B-SPAWN",
          matchIn: "sinceAssistant",
          toolCalls: [
            { name: "crew_spawn", arguments: { subagent: "worker", brief: "landme", task: task("CHILD-LAND") } },
          ],
        },
        {
          match: '"brief":"landme","result"',
          matchIn: "sinceAssistant",
          toolCalls: [{ name: "crew_land", arguments: landArgs }],
        },
        { match: '"landed":true', text: "Landed." },
        { text: "Waiting for the subagent." },
      ],
    },
  ],
};

let h: Harness;
const owners: RpcPi[] = [];

before(async () => {
  h = await startHarness(SCRIPT, { runtime: "headless", maxParallelAgents: 4 });
  // A project definition of the owner's repository: an isolated worker whose work the daemon checks.
  write(
    h.repo,
    ".pi/agents/checked-worker.md",
    `---\nname: checked-worker\ndescription: A worker whose work the daemon checks\nisolated: true\nchecks:\n  - "${CHECK}"\n---\nDo the work, then report.\n`,
  );
});
after(async () => {
  for (const o of owners) await o.close().catch(() => undefined);
  await h?.close();
});

function startOwner(name: string): RpcPi {
  const o = startOwnerPi(h, { sessionPath: join(h.dir, name, `${name}.jsonl`), lifetimeMs: 600_000 });
  owners.push(o);
  return o;
}

async function prompt(o: RpcPi, message: string): Promise<void> {
  await untilQuiet(o);
  const r = await rpcCommand(o, { type: "prompt", message });
  assert.equal(r.success, true, `pi refused the prompt: ${r.error}`);
}

/** The first tool_execution_end of `tool` after event index `from` (the events are not consumed). */
const toolEnd = (o: RpcPi, tool: string, from = 0, timeoutMs = 120_000) =>
  until(
    `${tool}'s result`,
    () =>
      o.events.slice(from).find((e) => e.type === "tool_execution_end" && e.toolName === tool) as
        | Record<string, any>
        | undefined,
    timeoutMs,
  );

const requestsOf = (conversation: string): RecordedRequest[] =>
  h.model.requests().filter((r) => r.conversation === conversation);
const bodyText = (r: RecordedRequest) => JSON.stringify(r.body);
const toolNames = (r: RecordedRequest): string[] =>
  ((r.body as { tools?: { function?: { name?: string } }[] }).tools ?? []).map((t) => t.function?.name ?? "");

let checkedId = "";
let ownerA = "";

test("the owner's model sees a failing check's receipt and responds; the next cycle's check passes; no crew_land", async () => {
  const o = startOwner("owner-a");
  await prompt(o, "OWNER-A-SPAWN: delegate to the checked worker");
  const spawned = await toolEnd(o, "crew_spawn");
  checkedId = (JSON.parse(spawned.result.content[0].text as string) as { subagent_id: string }).subagent_id;
  respondArgs.subagent_id = checkedId;
  // The first cycle's result arrives with the failing receipt; the owner's model answers with crew_respond.
  const responded = await toolEnd(o, "crew_respond");
  assert.equal(responded.isError, false, JSON.stringify(responded.result));
  const seen = requestsOf("owner-a").find((r) => bodyText(r).includes('\\"verified\\":false'));
  assert.ok(seen, "an owner request carried the delivery with verified false");
  const delivery = bodyText(seen);
  assert.ok(
    delivery.includes(CHECK.replace(/'/g, "'").replace(/"/g, '\\\\\\"')) || delivery.includes("test -f fixed.txt"),
  );
  assert.match(delivery, /\\"exitCode\\":1/);
  assert.match(delivery, /fixed\.txt is missing/, "the failing check's output tail reached the model");
  // The follow-up cycle adds fixed.txt: its check passes, and that delivery reaches the model too.
  const r = await h.waitFor(
    checkedId,
    (x) => x.status === "completed" && x.verified === true,
    "the passing cycle",
    120_000,
  );
  assert.deepEqual(
    r.checks?.map((c) => [c.command, c.exitCode]),
    [[CHECK, 0]],
  );
  ownerA = r.owner!;
  await until("the owner's model seeing verified true", () =>
    requestsOf("owner-a").some((x) => bodyText(x).includes('\\"verified\\":true')),
  );
  // Without owner.mayLand the owner has no crew_land, and the daemon refuses an owner's task.land.
  for (const req of requestsOf("owner-a")) assert.ok(!toolNames(req).includes("crew_land"), toolNames(req).join(","));
  assert.ok(toolNames(requestsOf("owner-a")[0]!).includes("crew_spawn"), "the tools are in the request log");
  const raw = await connect(h.home, { kind: "owner", ownerId: ownerA, timeoutMs: 30_000 });
  try {
    await assert.rejects(
      () => raw.request("task.land", { taskIds: [checkedId] }),
      (e: { code?: string; message: string }) => e.code === "FORBIDDEN" && /owner\.mayLand/.test(e.message),
    );
  } finally {
    raw.close();
  }
  assert.equal(git(h.repo, "ls-files", "work.txt"), "", "nothing was landed");
});

test("with owner.mayLand: crew_land exists, lands the owner's subagent's work and returns the outcome; not another owner's", async () => {
  await setConfigValue(h.home, "owner.mayLand", "true");
  await until("the daemon reloading config.json", () => h.daemon.supervisor.deps.config().owner?.mayLand === true);
  const head = git(h.repo, "rev-parse", "HEAD").trim();
  const o = startOwner("owner-b");
  await prompt(o, "OWNER-B-SPAWN: delegate, then land it");
  const spawned = await toolEnd(o, "crew_spawn");
  const id = (JSON.parse(spawned.result.content[0].text as string) as { subagent_id: string }).subagent_id;
  landArgs.subagent_id = id.slice(-4); // a short id, as the cards show it
  const landed = await toolEnd(o, "crew_land");
  assert.equal(landed.isError, false, JSON.stringify(landed.result));
  const out = JSON.parse(landed.result.content[0].text as string) as Record<string, unknown>;
  const now = git(h.repo, "rev-parse", "HEAD").trim();
  assert.deepEqual(
    [out.subagent_id, out.landed, out.landedAs, out.baseBranch, out.strategy],
    [id, true, now, "main", "fast-forward"],
  );
  assert.match(String(out.said), /fast-forward/);
  assert.match(String(out.committed), /^[0-9a-f]{40}$/, "the child's uncommitted work was committed first");
  assert.equal(git(h.repo, "rev-parse", `${now}^`).trim(), head);
  assert.equal(readFileSync(join(h.repo, "landed.txt"), "utf8"), "landed by the owner\n");
  const r = await h.cli.request("task.get", { taskId: id });
  assert.equal(r.landing?.landedAs, now);
  assert.equal(git(h.repo, "log", "-1", "--format=%ae").trim(), `${id}@dsh-herdr.invalid`, "the child is the author");
  // The tool was in owner B's requests; the model saw the outcome.
  assert.ok(requestsOf("owner-b").some((x) => toolNames(x).includes("crew_land")));
  await until("the model seeing the landing", () =>
    requestsOf("owner-b").some((x) => bodyText(x).includes('\\"landed\\":true')),
  );
  // The daemon lands for an owner only its own tasks.
  const raw = await connect(h.home, { kind: "owner", ownerId: ownerA, timeoutMs: 30_000 });
  try {
    await assert.rejects(
      () => raw.request("task.land", { taskIds: [id] }),
      (e: { code?: string }) => e.code === "NOT_OWNER",
    );
  } finally {
    raw.close();
  }
  assert.ok(!existsSync(join(h.repo, "work.txt")), "owner A's task was never landed");
});
