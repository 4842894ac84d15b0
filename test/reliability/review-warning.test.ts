// The reviewer warning is exact (issue 13 §6): a real reviewer pi child edits a file that was already dirty at spawn
// and creates a new one; both are named, each once, and a dirty file it left alone is not.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { commitAll, git, write } from "../helpers/git.js";
import { cliClient, makeRepo, startDaemonProc, startShared, type Shared } from "./proc-harness.js";
import { killUnder } from "../helpers/procs.js";

const SCRIPT: Script = {
  conversations: [
    {
      name: "reviewer",
      match: "MARK-REVIEW",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "feature.txt", content: "reviewer rewrote this\n" } }] },
        { toolCalls: [{ name: "write", arguments: { path: "new.txt", content: "a reviewer's new file\n" } }] },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "reviewed" } }] },
        { text: "done" },
      ],
    },
  ],
};

let shared: Shared;
before(async () => {
  shared = await startShared(SCRIPT, "dsh-review-");
});
after(async () => {
  // Backstop: children a failed test left running (only processes inside its own temp dir).
  if (shared) killUnder(shared.dir);
  await shared?.close();
});

test("a reviewer that edits an already-dirty file is named for it; every name appears once", async () => {
  const repo = makeRepo(shared.dir);
  write(repo, "feature.txt", "v1\n");
  commitAll(repo, "feature");
  // Dirty at spawn: feature.txt (the reviewer edits it again) and notes.txt (left alone).
  write(repo, "feature.txt", "the user's unfinished edit\n");
  write(repo, "notes.txt", "the user's notes\n");
  const home = join(shared.dir, "home");
  const d = await startDaemonProc(home, shared.childEnv);
  try {
    const cli = await cliClient(home);
    try {
      const { taskId } = await cli.request("task.spawn", {
        model: shared.modelName,
        cwd: repo,
        prompt: "MARK-REVIEW look at it",
        role: "reviewer",
      });
      const w = await cli.request("task.wait", { taskIds: [taskId], timeoutMs: 90_000 }, { timeoutMs: 95_000 });
      const r = w.results[0]!;
      assert.equal(r.status, "completed", JSON.stringify(r));
      assert.match(git(repo, "status", "--porcelain"), /feature\.txt/);
      const warning = (r.warnings ?? []).find((x) => x.startsWith("reviewer changed files: "));
      assert.ok(warning, `no reviewer warning in ${JSON.stringify(r.warnings)}`);
      const names = warning.slice("reviewer changed files: ".length).split(", ").sort();
      assert.deepEqual(names, ["feature.txt", "new.txt"], warning);
      assert.deepEqual(r.diff?.dirtyChanged, ["feature.txt"]);
      await cli.request("task.close", { taskId });
    } finally {
      cli.close();
    }
  } finally {
    d.proc.kill("SIGTERM");
    await d.exited;
  }
});
