// The bundled `worker` definition keeps the user's checkout untouched: a crew_spawn of it from a real owner pi in a
// git repository runs the child in a worktree (isolated: auto), and a child that shares a repository holding
// uncommitted changes carries a warning from its spawn on.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { RpcPi } from "../../fixtures/scripted-model/rpc-child.js";
import type { Script } from "../../fixtures/scripted-model/script.js";
import type { AgentResult } from "../../src/core/types.js";
import { git, initRepo } from "../helpers/git.js";
import { rpcCommand, untilQuiet } from "../helpers/wait.js";
import { startHarness, type Harness } from "./daemon-harness.js";
import { startOwnerPi } from "./owner-harness.js";

const task = (goal: string) => ({ goal, context: [], instructions: ["Do it and report with crew_report."] });
const report = (r: string) => ({ name: "crew_report", arguments: { outcome: "completed", report: r } });

const SCRIPT: Script = {
  conversations: [
    {
      name: "child-edit",
      match: "CHILD-EDIT",
      steps: [
        {
          toolCalls: [
            { name: "write", arguments: { path: "feature.txt", content: "new feature\n" } },
            { name: "write", arguments: { path: "README.md", content: "changed by the child\n" } },
          ],
        },
        { toolCalls: [report("Wrote feature.txt and changed README.md")] },
        { text: "done" },
      ],
    },
    { name: "child-plain", match: "CHILD-PLAIN", steps: [{ toolCalls: [report("Nothing to change")] }] },
    {
      name: "owner",
      match: "OWNER-",
      steps: [
        {
          match: "OWNER-EDIT",
          matchIn: "sinceAssistant",
          toolCalls: [
            { name: "crew_spawn", arguments: { subagent: "worker", brief: "edit", task: task("CHILD-EDIT") } },
          ],
        },
        { text: "Waiting for the subagent." },
      ],
    },
  ],
};

let h: Harness;
let owner: RpcPi | undefined;
before(async () => {
  h = await startHarness(SCRIPT, { runtime: "headless" });
});
after(async () => {
  await owner?.close().catch(() => undefined);
  await h?.close();
});

const SETTLED = ["completed", "failed", "gone", "closed", "interrupted"];
const porcelain = (dir: string) => git(dir, "status", "--porcelain=v1", "--untracked-files=all");

test("crew_spawn of the bundled worker in a git repo works in a worktree: the user's checkout is untouched", async () => {
  const readmeBefore = readFileSync(join(h.repo, "README.md"), "utf8");
  assert.equal(porcelain(h.repo), "", "the checkout starts clean");
  owner = startOwnerPi(h, { sessionPath: join(h.dir, "owner", "owner.jsonl"), lifetimeMs: 300_000 });
  await untilQuiet(owner);
  const r = await rpcCommand(owner, { type: "prompt", message: "OWNER-EDIT: delegate the edit" });
  assert.equal(r.success, true, `pi refused the prompt: ${r.error}`);
  const end = (await owner.waitFor(
    (e) => e.type === "tool_execution_end" && e.toolName === "crew_spawn",
    60_000,
  )) as Record<string, any>;
  const text = end.result.content[0].text as string;
  assert.match(text, /^\{"subagent_id":"t[0-9a-z]{11}"\}$/, text);
  const { subagent_id: id } = JSON.parse(text) as { subagent_id: string };

  const res = await h.wait(id, 120_000);
  assert.equal(res.status, "completed", JSON.stringify(res));
  assert.ok(res.worktree, "the worker ran in a worktree");
  assert.notEqual(res.worktree.path, h.repo);
  assert.equal(res.worktree.branch, `dsh/${id}`);
  assert.equal(readFileSync(join(res.worktree.path, "feature.txt"), "utf8"), "new feature\n");
  assert.deepEqual([...(res.diff?.files ?? [])].sort(), ["README.md", "feature.txt"]);
  // The user's working tree: as before the spawn.
  assert.equal(existsSync(join(h.repo, "feature.txt")), false, "feature.txt was not written into the checkout");
  assert.equal(readFileSync(join(h.repo, "README.md"), "utf8"), readmeBefore);
  assert.equal(porcelain(h.repo), "");
  assert.ok(!(res.warnings ?? []).some((w) => w.startsWith("not isolated")), JSON.stringify(res.warnings));
});

test("isolated auto outside a git repository, or in one without a commit, runs in the directory itself", async () => {
  const plain = join(h.dir, "plain");
  mkdirSync(plain);
  const empty = join(h.dir, "empty");
  mkdirSync(empty);
  git(empty, "init", "-q");
  for (const cwd of [plain, empty]) {
    const { taskId } = await h.spawn({ cwd, isolated: "auto", prompt: "CHILD-PLAIN" });
    const res = await h.wait(taskId, 120_000);
    assert.equal(res.status, "completed", JSON.stringify(res));
    assert.equal(res.worktree, undefined, `${cwd}: no worktree`);
  }
});

test("a non-isolated spawn in a repository with uncommitted changes carries a warning naming them and the fix", async () => {
  const dirty = initRepo(h.dir, "dirty");
  writeFileSync(join(dirty, "README.md"), "my unsaved work\n");
  writeFileSync(join(dirty, "notes.txt"), "scratch\n");
  const { taskId } = await h.spawn({ cwd: dirty, prompt: "CHILD-PLAIN" });
  const running = await h.waitFor(
    taskId,
    (r) => (r.warnings ?? []).some((w) => w.startsWith("not isolated")) || SETTLED.includes(r.status),
    "the spawn's warnings",
  );
  const warning = (running.warnings ?? []).find((w) => w.startsWith("not isolated"));
  assert.ok(warning, JSON.stringify(running.warnings));
  assert.match(warning, /2 uncommitted change\(s\) \((README\.md, notes\.txt|notes\.txt, README\.md)\)/);
  assert.match(warning, /--isolated/);
  const res: AgentResult = await h.wait(taskId, 120_000);
  assert.ok((res.warnings ?? []).includes(warning), "the result keeps the warning");

  // A clean shared repository and an isolated spawn in the dirty one carry no such warning.
  const clean = initRepo(h.dir, "clean");
  for (const p of [{ cwd: clean }, { cwd: dirty, isolated: true }]) {
    const { taskId: t } = await h.spawn({ ...p, prompt: "CHILD-PLAIN" });
    const r = await h.wait(t, 120_000);
    assert.ok(!(r.warnings ?? []).some((w) => w.startsWith("not isolated")), JSON.stringify(r.warnings));
  }
});
