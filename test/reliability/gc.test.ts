// gc never makes work unreachable and never deletes it unannounced (issue 13 §1): real isolated tasks (a real daemon
// process, real pi children, real git), then the real CLI's `gc` and `gc --yes` on the home.
//   - a child's commit in its worktree stays reachable (refs/dsh/archive/<id>) after its branch is deleted;
//   - gitignored files a removal deletes are named in the dry run, and --yes deletes only the ones it named;
//   - a detached worktree and one whose dsh/ branch was deleted are listed, not skipped;
//   - an interrupted task (still in `list`) keeps its worktree; `show` says a removed worktree is removed.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import type { AgentResult } from "../../src/core/types.js";
import { commitAll, git, write } from "../helpers/git.js";
import { cliClient, makeRepo, startDaemonProc, startShared, until, type Shared } from "./proc-harness.js";
import { killUnder } from "../helpers/procs.js";
import { runCliSync } from "../helpers/cli.js";

const report = (r: string) => ({
  toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: r } }],
});
const SCRIPT: Script = {
  conversations: [
    {
      name: "commit",
      match: "MARK-GC-COMMIT",
      steps: [
        {
          toolCalls: [
            {
              name: "bash",
              arguments: {
                command: "echo work > c.txt && git add c.txt && git commit -qm 'child commit' && git rev-parse HEAD",
              },
            },
          ],
        },
        report("committed"),
        { text: "ok" },
      ],
    },
    {
      name: "ignored",
      match: "MARK-GC-IGNORED",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "w.txt", content: "w\n" } }] },
        report("wrote"),
        { text: "ok" },
      ],
    },
    { name: "detached", match: "MARK-GC-DETACHED", steps: [report("nothing"), { text: "ok" }] },
    { name: "nobranch", match: "MARK-GC-NOBRANCH", steps: [report("nothing"), { text: "ok" }] },
    // Aborted by the test once running; the delay only has to outlast the four other tasks on a slow machine.
    { name: "open", match: "MARK-GC-OPEN", steps: [{ text: "thinking", delayMs: 600_000 }] },
  ],
};

let shared: Shared;
before(async () => {
  shared = await startShared(SCRIPT, "dsh-gcrel-");
});
after(async () => {
  // Backstop: children a failed test left running (only processes inside its own temp dir).
  if (shared) killUnder(shared.dir);
  await shared?.close();
});

type Item = {
  taskId: string;
  action: string;
  reason: string;
  path: string | null;
  archiveRef?: string;
  done?: boolean;
  error?: string;
  ignored?: { count: number; bytes: number; first: string[] };
};

test("gc keeps commits reachable, names ignored files and deletes only those, lists detached and branchless worktrees, spares open tasks", async () => {
  const repo = makeRepo(shared.dir);
  write(repo, ".gitignore", "*.log\n");
  commitAll(repo, "ignore logs");
  const home = join(shared.dir, "home");
  const d = await startDaemonProc(home, shared.childEnv);
  const ids: Record<string, string> = {};
  const wt: Record<string, string> = {};
  try {
    const cli = await cliClient(home);
    try {
      for (const k of ["COMMIT", "IGNORED", "DETACHED", "NOBRANCH", "OPEN"]) {
        const { taskId } = await cli.request("task.spawn", {
          model: shared.modelName,
          cwd: repo,
          prompt: `MARK-GC-${k} go`,
          isolated: true,
        });
        ids[k] = taskId;
      }
      const done = ["COMMIT", "IGNORED", "DETACHED", "NOBRANCH"].map((k) => ids[k]!);
      const w = await cli.request("task.wait", { taskIds: done, timeoutMs: 120_000 }, { timeoutMs: 125_000 });
      for (const r of w.results) assert.equal(r.status, "completed", JSON.stringify(r));
      for (const id of done) await cli.request("task.close", { taskId: id });
      // The fifth task may wait for a slot (maxParallelAgents): its worktree exists once it runs.
      let seen: AgentResult | undefined;
      await until(
        "the open task running",
        async () => (seen = await cli.request("task.get", { taskId: ids.OPEN! })).status === "running",
        60_000,
      ).catch((e: Error) => {
        throw new Error(`${e.message}; last seen: ${JSON.stringify({ status: seen?.status, error: seen?.error })}`);
      });
      for (const [k, id] of Object.entries(ids)) wt[k] = (await cli.request("task.get", { taskId: id })).worktree!.path;
      await cli.request("task.abort", { taskIds: [ids.OPEN!] });
      await until(
        "the open task interrupted",
        async () =>
          (await cli.request("task.get", { taskId: ids.OPEN! })).status === "interrupted" ? true : undefined,
        60_000,
      );
    } finally {
      cli.close();
    }
  } finally {
    d.proc.kill("SIGTERM");
    await d.exited;
  }
  const childCommit = git(wt.COMMIT!, "rev-parse", "HEAD").trim();
  assert.match(git(repo, "log", "-1", "--format=%s", childCommit), /child commit/);
  writeFileSync(join(wt.IGNORED!, "build.log"), "x".repeat(2048));
  git(wt.DETACHED!, "checkout", "-q", "--detach");
  git(repo, "update-ref", "-d", `refs/heads/dsh/${ids.NOBRANCH}`);

  const run = (...args: string[]) => {
    const r = runCliSync(args, { env: { ...process.env, DSH_HERDR_HOME: home }, timeoutMs: 120_000 });
    assert.equal(r.code, 0, `${args.join(" ")}: ${r.err}`);
    return r.out;
  };
  const gc = (...args: string[]) => {
    const out = JSON.parse(run("gc", "--json", ...args)) as { plan: Item[] };
    return (k: string) => out.plan.find((p) => p.taskId === ids[k])!;
  };

  const dry = gc();
  assert.equal(dry("COMMIT").action, "remove");
  assert.equal(dry("COMMIT").archiveRef, `refs/dsh/archive/${ids.COMMIT}`);
  assert.match(dry("COMMIT").reason, /kept at refs\/dsh\/archive\//);
  assert.equal(dry("IGNORED").action, "remove");
  assert.deepEqual(dry("IGNORED").ignored, { count: 1, bytes: 2048, first: ["build.log"] });
  assert.match(dry("IGNORED").reason, /deletes 1 ignored file\(s\), 2\.0 KiB: build\.log/);
  assert.ok(dry("DETACHED"), "the detached worktree is in the plan");
  assert.equal(dry("DETACHED").action, "keep");
  assert.match(dry("DETACHED").reason, /detached/);
  assert.ok(dry("NOBRANCH"), "the worktree whose branch was deleted is in the plan");
  assert.equal(dry("NOBRANCH").action, "keep");
  assert.match(dry("NOBRANCH").reason, /was deleted/);
  assert.equal(dry("OPEN").action, "keep");
  assert.match(dry("OPEN").reason, /still open/);
  // The human plan names the same.
  assert.match(run("gc"), /ignored file\(s\)/);

  // An ignored file the dry run did not name keeps its worktree.
  writeFileSync(join(wt.IGNORED!, "late.log"), "late\n");
  const yes = gc("--yes");
  assert.equal(yes("COMMIT").done, true, JSON.stringify(yes("COMMIT")));
  assert.ok(!existsSync(wt.COMMIT!));
  assert.match(
    git(repo, "for-each-ref", "--contains", childCommit, "--format=%(refname)"),
    new RegExp(`refs/dsh/archive/${ids.COMMIT}`),
    "the child's commit is still reachable",
  );
  assert.equal(yes("IGNORED").action, "keep", JSON.stringify(yes("IGNORED")));
  assert.match(yes("IGNORED").reason, /no dry run named/);
  assert.ok(existsSync(join(wt.IGNORED!, "late.log")) && existsSync(join(wt.IGNORED!, "build.log")));
  for (const k of ["DETACHED", "NOBRANCH", "OPEN"]) assert.ok(existsSync(wt[k]!), `${k} worktree kept`);

  // Named by a new dry run: now --yes removes it.
  assert.equal(gc()("IGNORED").ignored?.count, 2);
  assert.equal(gc("--yes")("IGNORED").done, true);
  assert.ok(!existsSync(wt.IGNORED!));

  const card = run("show", ids.COMMIT!);
  assert.match(card, /worktree: removed \(was /);
  assert.match(run("show", ids.OPEN!), new RegExp(`worktree: \\S*${ids.OPEN} \\(branch`));
});
