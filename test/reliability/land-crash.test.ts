// land under SIGKILL and hung hooks, with a real daemon process, real pi children against the scripted model, real
// git and real hooks. The daemon SIGKILLs itself inside a landing (after its intent record, after the checkout
// update, after the branch move, and inside `land --check` while the check runs); the next daemon resolves it from
// git. Each case then checks `verify`, that the checkout and the branch are exactly "before" or exactly "after",
// that a repeat land records the landing once and never merges twice, and the user's ignored files byte for byte.
// Hooks: a hung post-merge hook does not hold a landing (the checkout moves by plumbing); a hung reference-transaction
// hook is ended with its process group at land.timeoutMs, and a second landing queued behind it whose requester went
// away is never performed.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmodSync, existsSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import type { DaemonClient } from "../../src/client/index.js";
import { describeDifference } from "../../src/core/lifecycle/verify.js";
import { verifyTaskDir } from "../../src/cli/commands/verify.js";
import { dshBin } from "../helpers/cli.js";
import { git, write } from "../helpers/git.js";
import {
  cliClient,
  journal,
  makeRepo,
  processesMentioning,
  sleep,
  startDaemonProc,
  startShared,
  until,
  type DaemonProc,
  type Shared,
} from "./proc-harness.js";

const writes = (tag: string, path: string, content: string) => ({
  name: tag,
  match: `[${tag}]`,
  steps: [
    { toolCalls: [{ name: "write", arguments: { path, content } }] },
    { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: `wrote ${path}` } }] },
  ],
});

const SCRIPT: Script = {
  conversations: ["a", "b", "c", "d", "e", "f", "g", "h", "i"].map((t) => writes(`lc-${t}`, `${t}.txt`, `from ${t}\n`)),
};

// The check of `land --check`: instant in the task's worktree (at settle), long in land's scratch tree.
const CHECK = 'case "$PWD" in */tree) sleep 97;; esac';

let shared: Shared;
before(async () => {
  shared = await startShared(SCRIPT, "dsh-landcrash-");
});
after(async () => {
  await shared?.close();
});

/** A repository with the user's ignored files in its checkout. */
function userRepo(dir: string): string {
  const repo = makeRepo(dir);
  write(repo, ".gitignore", ".env\nconfig.local.json\nlocaldata/\n");
  git(repo, "add", ".gitignore");
  git(repo, "commit", "-q", "-m", "ignore the user's files");
  write(repo, ".env", "OPENAI_API_KEY=sk-user-real-secret\n");
  write(repo, "config.local.json", '{"mine":true}\n');
  write(repo, "localdata/a.db", "a\n");
  write(repo, "localdata/deep/b.db", "b\n");
  return repo;
}

function ignoredFiles(repo: string): string[] {
  return git(repo, "ls-files", "-z", "--others", "--ignored", "--exclude-standard")
    .split("\0")
    .filter(Boolean)
    .sort()
    .map((p) => `${p}:${readFileSync(join(repo, p)).toString("base64")}`);
}

/** The checkout as a person sees it: its branch, HEAD, status (ignored files too), and every file's content. */
function checkout(repo: string): unknown {
  const files = git(repo, "ls-files", "-z", "--cached", "--others")
    .split("\0")
    .filter(Boolean)
    .sort()
    .map((p) => `${p}:${existsSync(join(repo, p)) ? readFileSync(join(repo, p), "utf8") : "<missing>"}`);
  return {
    head: git(repo, "rev-parse", "HEAD").trim(),
    main: git(repo, "rev-parse", "refs/heads/main").trim(),
    status: git(repo, "status", "--porcelain=v1", "--untracked-files=all", "--ignored"),
    files,
  };
}

class Daemon {
  d!: DaemonProc;
  cli!: DaemonClient;
  constructor(
    readonly home: string,
    readonly config: object = {},
  ) {}
  async start(crashAt?: string): Promise<void> {
    this.d = await startDaemonProc(this.home, shared.childEnv, {
      env: crashAt ? { DSH_HERDR_CRASH_AT: crashAt } : {},
      config: this.config,
    });
    this.cli = await cliClient(this.home);
  }
  /** The tasks spawned: closed at the end, so no child outlives the test. */
  readonly tasks: string[] = [];
  async stop(): Promise<void> {
    if (this.d && this.d.proc.exitCode === null && this.d.proc.signalCode === null)
      for (const taskId of this.tasks)
        await this.cli?.request("task.close", { taskId, closePane: true }).catch(() => undefined);
    this.cli?.close();
    if (this.d && this.d.proc.exitCode === null && this.d.proc.signalCode === null) {
      this.d.proc.kill("SIGTERM");
      await this.d.exited;
    }
  }
}

async function spawnDone(dm: Daemon, repo: string, tag: string, checks?: string[]): Promise<string> {
  const { taskId } = await dm.cli.request("task.spawn", {
    model: shared.modelName,
    cwd: repo,
    prompt: `[lc-${tag}] write the file`,
    isolated: true,
    ...(checks ? { checks } : {}),
  });
  dm.tasks.push(taskId);
  await dm.cli.request("task.wait", { taskIds: [taskId], timeoutMs: 90_000 }, { timeoutMs: 95_000 });
  const r = await dm.cli.request("task.get", { taskId });
  assert.equal(r.status, "completed", JSON.stringify(r));
  return taskId;
}

function verified(home: string, taskId: string): void {
  const v = verifyTaskDir(join(home, "tasks", taskId), taskId);
  assert.deepEqual(v.differences.map(describeDifference), [], "verify agrees with result.json");
}

const landedEvents = (home: string, taskId: string) => journal(home, taskId).filter((e) => e.type === "landed");

interface KillPoint {
  at: string;
  check?: boolean;
}

const KILLS: KillPoint[] = [
  { at: "land_intent" },
  { at: "land_checkout_updated" },
  { at: "land_branch_moved" },
  { at: "land_check", check: true },
];

KILLS.forEach((k, i) => {
  test(`SIGKILL inside land at ${k.at}: the next daemon finds the checkout and branch exactly before or after; a repeat lands once`, {
    timeout: 240_000,
  }, async () => {
    const dir = join(shared.dir, `k${i}`);
    const repo = userRepo(dir);
    const home = join(dir, "home");
    const dm = new Daemon(home);
    try {
      await dm.start(k.at);
      const tag = ["a", "b", "c", "d"][i]!;
      const taskId = await spawnDone(dm, repo, tag, k.check ? [CHECK] : undefined);
      const ignored = ignoredFiles(repo);
      const before = checkout(repo);
      const land = dm.cli
        .request("task.land", { taskIds: [taskId], ...(k.check ? { check: true } : {}) }, { timeoutMs: 120_000 })
        .catch((e: Error) => e);
      const how = await dm.d.exited;
      assert.equal(how, "SIGKILL", `the daemon died at ${k.at}: ${dm.d.stderr()}`);
      await land;
      const oldPid = dm.d.pid;
      dm.cli.close();
      await dm.start();
      verified(home, taskId);
      const now = checkout(repo) as { head: string; files: string[] };
      const rec = await dm.cli.request("task.get", { taskId });
      if (JSON.stringify(now) === JSON.stringify(before)) {
        assert.equal(rec.landing?.landedAs, undefined, "not landed: no landedAs");
        assert.equal(landedEvents(home, taskId).length, 0);
      } else {
        // After: the branch and HEAD at the landed commit, the child's file there, nothing else changed.
        assert.equal(rec.landing?.landedAs, now.head, `landed: ${JSON.stringify(rec.landing)}`);
        assert.ok(now.files.includes(`${tag}.txt:from ${tag}\n`), JSON.stringify(now.files));
        assert.equal(git(repo, "status", "--porcelain=v1", "--untracked-files=all"), "");
        assert.equal(landedEvents(home, taskId).length, 1, "landedAs recorded once");
      }
      assert.deepEqual(ignoredFiles(repo), ignored, "the user's ignored files, byte for byte");
      if (k.check) {
        // The scratch tree of the killed daemon's check: unregistered, removed, its check ended.
        const trees = git(repo, "worktree", "list", "--porcelain")
          .split("\n")
          .filter((l) => l.startsWith("worktree "));
        assert.equal(trees.length, 2, `git worktree list: ${trees.join("; ")}`);
        const left = readdirSync(tmpdir()).filter(
          (n) => n.startsWith(`dsh-land-tree-${oldPid}-`) || n.startsWith(`dsh-land-${oldPid}-`),
        );
        assert.deepEqual(left, [], "no /tmp/dsh-land-* of the killed daemon");
        await until("the check ended", () => (processesMentioning("sleep 97").length === 0 ? true : undefined), 10_000);
      }
      // A repeat: lands now (from before) or says it already did (from after); one landed record, no second merge.
      const again = await dm.cli.request("task.land", { taskIds: [taskId] }, { timeoutMs: 120_000 });
      const head = git(repo, "rev-parse", "HEAD").trim();
      assert.equal(again.results[0]!.landing.landedAs, head);
      assert.equal(landedEvents(home, taskId).length, 1, "one landed record");
      assert.equal(
        git(repo, "rev-list", "--count", `${(before as { head: string }).head}..HEAD`).trim(),
        "1",
        "one commit landed, never two",
      );
      assert.equal(git(repo, "status", "--porcelain=v1", "--untracked-files=all"), "");
      assert.deepEqual(ignoredFiles(repo), ignored, "the user's ignored files, byte for byte");
      verified(home, taskId);
    } finally {
      await dm.stop().catch(() => undefined);
      for (const pid of processesMentioning("sleep 97")) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          /* gone */
        }
      }
    }
  });
});

test("hooks: a hung post-merge hook holds nothing; a hung reference-transaction hook is ended at land.timeoutMs; a queued land whose requester left never lands", {
  timeout: 240_000,
}, async () => {
  const dir = join(shared.dir, "hooks");
  const repo = userRepo(dir);
  const home = join(dir, "home");
  const dm = new Daemon(home, { land: { timeoutMs: 4000 } });
  const hooks = join(repo, ".git", "hooks");
  try {
    await dm.start();
    const a = await spawnDone(dm, repo, "e");
    const b = await spawnDone(dm, repo, "f");
    const c = await spawnDone(dm, repo, "g");
    const ignored = ignoredFiles(repo);
    // A post-merge hook that never ends: the landing runs no merge hook.
    write(hooks, "post-merge", "#!/bin/sh\nexec sleep 598\n");
    chmodSync(join(hooks, "post-merge"), 0o755);
    const t0 = Date.now();
    const la = await dm.cli.request("task.land", { taskIds: [a] }, { timeoutMs: 30_000 });
    assert.ok(Date.now() - t0 < 20_000, `landed in ${Date.now() - t0} ms`);
    assert.equal(la.results[0]!.landing.landedAs, git(repo, "rev-parse", "HEAD").trim());
    // A reference-transaction hook that hangs on the base branch's move.
    write(hooks, "reference-transaction", '#!/bin/sh\nif grep -q " refs/heads/main$"; then sleep 599; fi\nexit 0\n');
    chmodSync(join(hooks, "reference-transaction"), 0o755);
    const before = checkout(repo);
    const lb = dm.cli.request("task.land", { taskIds: [b] }, { timeoutMs: 60_000 }).catch((e: Error) => e);
    await until("the hook hangs", () => (processesMentioning("sleep\x00599").length > 0 ? true : undefined), 30_000);
    // A second landing in the same repository, queued behind it; its requester goes away.
    const other = await cliClient(home);
    const lc = other.request("task.land", { taskIds: [c] }, { timeoutMs: 60_000 }).catch((e: Error) => e);
    await sleep(300);
    other.close();
    await lc;
    const refused = (await lb) as Error & { code?: string };
    assert.ok(refused instanceof Error, "the hung landing failed");
    assert.equal(refused.code, "TIMEOUT", refused.message);
    assert.match(refused.message, /land\.timeoutMs/);
    assert.match(refused.message, /nothing was landed; the checkout is as it was/);
    await until(
      "the hook's group ended",
      () => (processesMentioning("sleep\x00599").length === 0 ? true : undefined),
      10_000,
    );
    assert.deepEqual(checkout(repo), before, "the checkout and branch as before");
    assert.ok(!existsSync(join(repo, ".git", "refs", "heads", "main.lock")), "no lock left on main");
    assert.ok(!existsSync(join(home, "tasks", b, "land-intent.json")), "the failed landing's intent is settled");
    // Long after: the abandoned landing never ran.
    await sleep(3000);
    assert.deepEqual(checkout(repo), before);
    assert.equal(landedEvents(home, c).length, 0, "the abandoned landing of c never happened");
    assert.equal((await dm.cli.request("task.get", { taskId: c })).landing?.landedAs, undefined);
    // Ctrl+C on `dsh-herdr land` while the hook hangs: the CLI ends at once, the daemon ends git with its hook.
    const cli = spawn(process.execPath, [dshBin, "land", c], {
      cwd: repo,
      env: { ...process.env, DSH_HERDR_HOME: home },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let err = "";
    cli.stderr!.on("data", (d) => (err += d));
    const exited = new Promise<number | null>((resolve) => cli.on("exit", (code) => resolve(code)));
    await until(
      "the hook hangs again",
      () => (processesMentioning("sleep\x00599").length > 0 ? true : undefined),
      30_000,
    );
    const hungAt = Date.now();
    cli.kill("SIGINT");
    const code = await exited;
    assert.notEqual(code, 0);
    assert.match(err, /LAND_CANCELLED: interrupted/);
    await until(
      "the hook ended by the cancel",
      () => (processesMentioning("sleep\x00599").length === 0 ? true : undefined),
      10_000,
    );
    assert.ok(Date.now() - hungAt < 3500, `ended ${Date.now() - hungAt} ms after Ctrl+C, before land.timeoutMs`);
    await sleep(1000);
    assert.deepEqual(checkout(repo), before, "the interrupted landing changed nothing");
    assert.equal(landedEvents(home, c).length, 0);
    assert.deepEqual(ignoredFiles(repo), ignored, "the user's ignored files, byte for byte");
    // The daemon stopped (SIGTERM) while a landing hangs in its hook: the hook ends, nothing lands, nothing is left.
    const ld = dm.cli.request("task.land", { taskIds: [c] }, { timeoutMs: 60_000 }).catch((e: Error) => e);
    await until(
      "the hook hangs once more",
      () => (processesMentioning("sleep\x00599").length > 0 ? true : undefined),
      30_000,
    );
    dm.d.proc.kill("SIGTERM");
    assert.equal(await dm.d.exited, "0", dm.d.stderr());
    await ld;
    assert.deepEqual(processesMentioning("sleep\x00599"), [], "the hook ended with the daemon's stop");
    assert.deepEqual(checkout(repo), before, "the landing abandoned at the stop changed nothing");
    assert.ok(!existsSync(join(home, "tasks", c, "land-intent.json")), "its intent settled before the daemon exited");
    await dm.start();
    await sleep(1000);
    assert.deepEqual(checkout(repo), before, "nor after the next start");
    assert.equal(landedEvents(home, c).length, 0);
    for (const id of [a, b, c]) verified(home, id);
  } finally {
    await dm.stop().catch(() => undefined);
    for (const pid of [...processesMentioning("sleep\x00598"), ...processesMentioning("sleep\x00599")]) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        /* gone */
      }
    }
  }
});
