// A real owner pi (RPC mode) with the owner extension loaded from a copy of the package (so a reload can load another
// copy with another runtime version, as an upgrade does; owner-versioned-ext.ts), real headless children and the scripted model (issue 29): /fork at
// the first user message (pi 0.73 writes no forked session before its first assistant message, so the entries
// holding the owner secret are not copied) still moves the work; /reload keeps the work, unless the runtime version
// changed, when the stale runtime's subagents are aborted (TUI-only cards, no owner turn) before the new one attaches.
import { after, before, test } from "node:test";
import { completeJsonLines } from "../helpers/jsonl.js";
import assert from "node:assert/strict";
import { cpSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { RpcPi } from "../../fixtures/scripted-model/rpc-child.js";
import type { RecordedRequest } from "../../fixtures/scripted-model/server.js";
import type { Script } from "../../fixtures/scripted-model/script.js";
import type { AgentResult } from "../../src/core/types.js";
import { ownerLabel } from "../../src/daemon/delivery/owner-view.js";
import { repoRoot } from "../helpers/pi.js";
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

const SCRIPT: Script = {
  conversations: [
    {
      name: "child-late",
      match: "CHILD-FORK-LATE",
      steps: [
        {
          toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "Finished after the fork" } }],
          delayMs: 6000,
        },
      ],
    },
    { name: "child-slow", match: "CHILD-SLOW", steps: [{ text: "slow", delayMs: 120_000 }] },
    {
      // The forked session starts empty: its first message is the late result. Owner steps look at everything since
      // the last answer (a status message may end the request).
      name: "owner",
      match: '/OWNER-|"brief":"fork-late"/',
      matchIn: "any",
      afterEnd: "repeat",
      steps: [
        { match: "OWNER-FORK", matchIn: "sinceAssistant", toolCalls: [spawn("fork-late", "CHILD-FORK-LATE")] },
        { match: "OWNER-RUN", matchIn: "sinceAssistant", toolCalls: [spawn("reload-slow", "CHILD-SLOW")] },
        { text: "Noted." },
      ],
    },
  ],
};

let h: Harness;
let owner: RpcPi;
const reloadCommand = join(repoRoot, "dist", "test", "e2e", "owner-reload-command.js");

/** A copy of the built package at `dir` (its code and package.json; node_modules and agents linked). */
function packageCopy(dir: string): void {
  mkdirSync(join(dir, "dist"), { recursive: true });
  cpSync(join(repoRoot, "dist", "src"), join(dir, "dist", "src"), { recursive: true });
  cpSync(join(repoRoot, "package.json"), join(dir, "package.json"));
  symlinkSync(join(repoRoot, "node_modules"), join(dir, "node_modules"));
  symlinkSync(join(repoRoot, "agents"), join(dir, "agents"));
}
/** The package whose owner extension pi loads next (see owner-versioned-ext.ts). */
function usePackage(dir: string): void {
  mkdirSync(join(h.dir, "home"), { recursive: true });
  writeFileSync(join(h.dir, "home", "owner-extension-path"), join(dir, "dist", "src", "extensions", "owner.js"));
}

before(async () => {
  h = await startHarness(SCRIPT, {
    runtime: "headless",
    defaultModel: "scripted/scripted-model",
    maxParallelAgents: 4,
  });
  packageCopy(join(h.dir, "pkg-v1"));
  usePackage(join(h.dir, "pkg-v1"));
  owner = startOwnerPi(h, {
    sessionPath: join(h.dir, "owner", "owner.jsonl"),
    lifetimeMs: 600_000,
    extensionPaths: [join(repoRoot, "dist", "test", "e2e", "owner-versioned-ext.js"), reloadCommand],
  });
});
after(async () => {
  await owner?.close().catch(() => undefined);
  await h?.close();
});

type Entry = Record<string, any>;
const readEntries = (path: string): Entry[] => completeJsonLines<Entry>(path);
const ownerRequests = (): RecordedRequest[] => h.model.requests().filter((r) => r.conversation === "owner");
const command = (cmd: Record<string, unknown>) => rpcCommand(owner, cmd);
const state = async () => (await command({ type: "get_state" })).data as { sessionId: string; sessionFile: string };
async function prompt(message: string): Promise<void> {
  await untilQuiet(owner);
  const r = await command({ type: "prompt", message });
  assert.equal(r.success, true, `pi refused the prompt: ${r.error}`);
  await untilQuiet(owner);
}
const byBrief = async (brief: string) => {
  const { tasks } = await h.cli.request("task.list", {});
  const t = tasks.find((x) => x.brief === brief);
  assert.ok(t, `no task with brief ${brief}`);
  return t;
};
const get = (taskId: string) => h.cli.request("task.get", { taskId });

test("/fork at the first user message, before the forked session has an assistant message: the work moves with it", async () => {
  await prompt("OWNER-FORK one worker that finishes later");
  const late = await byBrief("fork-late");
  const oldOwner = h.daemon.supervisor.tasks.get(late.taskId)!.rec.owner;
  assert.match((await get(late.taskId)).status, /^(starting|running)$/, "still running at the fork");
  const forkable = await command({ type: "get_fork_messages" });
  const first = (forkable.data.messages as { entryId: string; text: string }[]).find((m) =>
    m.text.startsWith("OWNER-FORK"),
  );
  assert.ok(first, "the first user message can be forked from");
  await untilQuiet(owner);
  const forked = await command({ type: "fork", entryId: first.entryId });
  assert.equal(forked.success, true, `fork failed: ${forked.error}`);
  const now = await state();
  assert.notEqual(now.sessionId, oldOwner, "a new session");
  await until(
    "the worker owned by the forked session",
    async () => (await get(late.taskId)).owner === ownerLabel(now.sessionId),
    15_000,
  );
  await h.waitFor(late.taskId, (r) => r.status === "completed", "the late child's report");
  // The result starts a turn in the forked session; its answer makes pi write the session file.
  await until(
    "the late result in the forked session",
    () =>
      readEntries(now.sessionFile).some(
        (e) => e.customType === "crew-result" && e.details?.card?.subagent_id === late.taskId,
      ),
    30_000,
  );
  const { tasks } = await h.cli.request("task.list", { owner: oldOwner });
  assert.deepEqual(
    tasks.filter((t) => t.taskId === late.taskId),
    [],
    "the session it left owns nothing",
  );
  await untilQuiet(owner);
});

let slow: AgentResult;

test("/reload with the same runtime version keeps the work running and its owner", async () => {
  await prompt("OWNER-RUN a slow worker");
  slow = await byBrief("reload-slow");
  await h.waitFor(slow.taskId, (r) => r.status === "running", "the slow child running");
  const me = (await state()).sessionId;
  await prompt("/test-reload");
  await prompt("OWNER-PING after the reload");
  const t = await get(slow.taskId);
  assert.equal(t.status, "running", "not aborted by a reload");
  assert.equal(t.owner, ownerLabel(me), "still this session's");
  assert.equal((await state()).sessionId, me, "the same session after the reload");
  assert.ok(!readEntries((await state()).sessionFile).some((e) => e.customType === "crew-abort"), "no abort card");
});

test("/reload with a changed runtime version aborts the stale runtime's subagents: TUI-only cards, no owner turn", async () => {
  // The next version of the package: the same code with another runtime version.
  packageCopy(join(h.dir, "pkg-v2"));
  const runtimeFile = join(h.dir, "pkg-v2", "dist", "src", "extensions", "owner-runtime.js");
  const code = readFileSync(runtimeFile, "utf8");
  assert.match(code, /OWNER_RUNTIME_VERSION = 1;/);
  writeFileSync(runtimeFile, code.replace("OWNER_RUNTIME_VERSION = 1;", "OWNER_RUNTIME_VERSION = 2;"));
  usePackage(join(h.dir, "pkg-v2"));
  const { sessionFile } = await state();
  const requestsBefore = ownerRequests().length;
  await prompt("/test-reload");
  await h.waitFor(slow.taskId, (r) => r.status === "interrupted", "the stale runtime's subagent aborted");
  const late = await byBrief("fork-late");
  // A completed one awaiting the owner is aborted too: the abort of a settled cycle closes it, its verdict kept (a
  // completed cycle is never relabelled interrupted).
  const lateNow = await get(late.taskId);
  assert.equal(lateNow.status, "closed", "a completed one awaiting the owner is aborted (closed) too");
  assert.equal(lateNow.nextAction, "none");
  await until(
    "the abort card in the session",
    () =>
      readEntries(sessionFile).some(
        (e) => e.customType === "crew-abort" && e.display === true && e.details?.card?.subagent_id === slow.taskId,
      ),
    30_000,
  );
  await untilQuiet(owner);
  assert.equal(ownerRequests().length, requestsBefore, "the aborts started no owner turn");
  // The new runtime works: a prompt after it reaches the model, without the abort cards in its context.
  await prompt("OWNER-PING after the upgrade");
  assert.equal(ownerRequests().length, requestsBefore + 1);
  const last = JSON.stringify(ownerRequests().at(-1)!.body);
  assert.ok(!last.includes("⏹"), "no abort card in model context");
});
