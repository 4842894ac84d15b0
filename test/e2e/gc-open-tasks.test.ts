// gc and the tasks still in use, with real pi children (headless) against the scripted model, a real daemon, real git
// and the real CLI's `gc`: a landed task that is still open keeps its worktree (its child may still work there); a
// follow-up into a task whose worktree is gone is refused by name (WORKTREE_GONE) instead of a cycle run in a deleted
// directory; and a landed, closed task whose only leftover is the `.env` its `--include` copied (equal to the
// checkout's) is collected: that copy is not the task's work.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { AgentResult } from "../../src/core/types.js";
import { runCli } from "../helpers/cli.js";
import { commitAll, git, write } from "../helpers/git.js";
import { startHarness, type Harness } from "./daemon-harness.js";

const writes = (m: string, path: string) => ({
  name: m,
  match: m,
  steps: [
    { toolCalls: [{ name: "write", arguments: { path, content: `${m}\n` } }] },
    { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: `wrote ${path}` } }] },
    { text: "ok" },
  ],
});
const SCRIPT = { conversations: [writes("MARK-GC-OPEN", "open.txt"), writes("MARK-GC-INCLUDED", "inc.txt")] };

let h: Harness;
before(async () => {
  h = await startHarness(SCRIPT, { runtime: "headless" });
  write(h.repo, ".gitignore", ".env\n");
  commitAll(h.repo, "ignore .env");
  write(h.repo, ".env", "OPENAI_API_KEY=sk-user-real-secret\n");
});
after(async () => {
  await h?.close();
});

type Item = { taskId: string; action: string; reason: string; done?: boolean };
async function gc(...args: string[]): Promise<(id: string) => Item> {
  const r = await runCli(["gc", "--json", ...args], { env: { ...process.env, DSH_HERDR_HOME: h.home } });
  assert.equal(r.code, 0, r.err);
  const plan = (JSON.parse(r.out) as { plan: Item[] }).plan;
  return (id) => plan.find((p) => p.taskId === id)!;
}

async function spawnLand(params: Record<string, unknown>): Promise<AgentResult> {
  const { taskId } = await h.spawn({ isolated: true, ...params });
  const r = await h.wait(taskId);
  assert.equal(r.status, "completed", JSON.stringify(r));
  const landed = await h.cli.request("task.land", {
    taskIds: [taskId],
  });
  assert.ok(landed.results[0]?.landing?.landedAs, JSON.stringify(landed));
  return r;
}

test("gc --yes keeps the worktree of a landed task that is still open; respond into a task whose worktree is gone is refused by name", async () => {
  const r = await spawnLand({ prompt: "MARK-GC-OPEN write" });
  const wt = r.worktree!.path;
  const plan = await gc("--yes");
  assert.equal(plan(r.taskId).action, "keep", JSON.stringify(plan(r.taskId)));
  assert.match(plan(r.taskId).reason, /still open/);
  assert.ok(existsSync(wt), "the open task's worktree is still there");

  // Gone anyway (removed by hand): a follow-up is refused by name, no cycle starts.
  git(h.repo, "worktree", "remove", "--force", wt);
  await assert.rejects(
    () => h.cli.request("task.respond", { taskId: r.taskId, message: "MARK-GC-OPEN again" }),
    (e: { code?: string; message: string }) => {
      assert.equal(e.code, "WORKTREE_GONE", e.message);
      assert.match(e.message, new RegExp(wt.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")));
      return true;
    },
  );
  const after = await h.cli.request("task.get", { taskId: r.taskId });
  assert.equal(after.status, "completed", "still the settled cycle");
  await h.cli.request("task.close", { taskId: r.taskId });
});

test("a landed, closed task whose only leftover is an included .env equal to the checkout's is collected", async () => {
  const r = await spawnLand({ prompt: "MARK-GC-INCLUDED write", include: [".env"] });
  const wt = r.worktree!.path;
  assert.equal(readFileSync(join(wt, ".env"), "utf8"), readFileSync(join(h.repo, ".env"), "utf8"));
  await h.cli.request("task.close", { taskId: r.taskId });
  const plan = await gc("--yes"); // no dry run before: the copy needs no announcing
  assert.equal(plan(r.taskId).action, "remove", JSON.stringify(plan(r.taskId)));
  assert.equal(plan(r.taskId).done, true, JSON.stringify(plan(r.taskId)));
  assert.ok(!existsSync(wt), "the worktree was removed");
  assert.equal(readFileSync(join(h.repo, ".env"), "utf8"), "OPENAI_API_KEY=sk-user-real-secret\n", "the source kept");
});
