// spawn --check → check → land → gc through the real bin/dsh-herdr against a real daemon (headless runtime) with
// real pi children against the scripted model, in a real git repository: receipts with a passing and a failing
// check, a hung check cut off by name, landability, a fast-forward and a merge landing, a repeat, refusals that
// change nothing (dirty checkout, conflict, --check failing on the merged tree), and gc after land.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AgentResult } from "../../src/core/types.js";
import { git } from "../helpers/git.js";
import { startCliHarness, type CliHarness } from "./cli-harness.js";

const writes = (tag: string, path: string, content: string) => ({
  name: tag,
  match: `[${tag}]`,
  steps: [
    { toolCalls: [{ name: "write", arguments: { path, content } }] },
    { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: `wrote ${path}` } }] },
  ],
});

const script = {
  conversations: [
    writes("t-a", "a.txt", "from a\n"),
    writes("t-b", "b.txt", "from b\n"),
    writes("t-c", "README.md", "# the child's readme\n"),
    writes("t-d", "d.txt", "from d\n"),
    writes("t-e", "e.txt", "from e\n"),
    writes("t-f", ".env", "CHILD=placeholder\n"),
  ],
};

let h: CliHarness;

before(async () => {
  h = await startCliHarness(script);
});

after(async () => {
  await h?.close();
});

async function spawnWait(tag: string, checks: string[], extra: string[] = []): Promise<AgentResult> {
  const args = ["spawn", "--isolated", "--prompt", `[${tag}] do it`, ...extra];
  for (const c of checks) args.push("--check", c);
  const s = await h.cli([...args, "--wait", "--json"], { timeoutMs: 120_000 });
  const r = JSON.parse(s.out) as { results: AgentResult[] };
  assert.equal(r.results[0]?.status, "completed", s.out);
  // A completed task whose check failed exits 4 (docs/cli.md); one whose checks passed, 0.
  assert.equal(s.code, r.results[0]?.verified === false ? 4 : 0, s.err);
  return r.results[0]!;
}

const resultOf = (taskId: string) =>
  JSON.parse(readFileSync(join(h.home, "tasks", taskId, "result.json"), "utf8")) as AgentResult;
const journal = (taskId: string) =>
  readFileSync(join(h.home, "tasks", taskId, "events.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { type: string; [k: string]: unknown });
const repoState = () => [git(h.repo, "rev-parse", "HEAD"), git(h.repo, "status", "--porcelain=v1")];

let a: AgentResult;

test("check: a passing and a failing check get receipts; verified false and a warning naming the command", async () => {
  a = await spawnWait("t-a", ["test -f a.txt", "echo nope >&2; exit 4"]);
  const c = await h.cli(["check", a.taskId, "--json"]);
  assert.equal(c.code, 1, "a failing check fails the command");
  const res = JSON.parse(c.out) as { checks: AgentResult["checks"]; verified: boolean; warnings: string[] };
  assert.equal(res.verified, false);
  assert.deepEqual(
    res.checks!.map((r) => [r.command, r.exitCode]),
    [
      ["test -f a.txt", 0],
      ["echo nope >&2; exit 4", 4],
    ],
  );
  assert.match(res.checks![1]!.outputTail, /nope/);
  assert.ok(existsSync(res.checks![1]!.logPath));
  const stored = resultOf(a.taskId);
  assert.deepEqual(stored.checks, res.checks);
  assert.equal(stored.verified, false);
  assert.ok(
    stored.warnings?.some((w) => w.startsWith("check `echo nope >&2; exit 4` failed (exit 4)")),
    String(stored.warnings),
  );
  const j = journal(a.taskId).find((e) => e.type === "checks");
  assert.ok(j && j.verified === false, JSON.stringify(j));
  const human = await h.cli(["check", a.taskId.slice(0, 8)]);
  assert.match(human.out, /^ok\s+\S+\s+test -f a\.txt/m);
  assert.match(human.out, /^FAILED \(exit 4\)/m);
});

test("land: dry run says clean; a dirty checkout is refused naming its file, by the dry run too; then a fast-forward; a repeat says landed", async () => {
  const dry = await h.cli(["land", a.taskId, "--dry-run", "--json"]);
  assert.equal(dry.code, 0, dry.err);
  const d = (JSON.parse(dry.out) as { results: { landing: AgentResult["landing"] }[] }).results[0]!;
  assert.deepEqual(
    { ...d.landing, checkedAt: 0 },
    {
      baseBranch: "main",
      baseHead: git(h.repo, "rev-parse", "HEAD").trim(),
      clean: true,
      conflicts: [],
      checkedAt: 0,
    },
  );
  assert.equal(resultOf(a.taskId).landing?.clean, true, "the landing is in result.json");

  writeFileSync(join(h.repo, "README.md"), "# demo\nan unsaved edit\n");
  const before = repoState();
  // The dry run refuses as land would: it never says "lands cleanly" for a checkout land then refuses.
  for (const args of [["--dry-run"], []]) {
    const dirty = await h.cli(["land", a.taskId, ...args]);
    assert.equal(dirty.code, 1, dirty.out);
    assert.match(dirty.err, /CHECKOUT_DIRTY: .*README\.md/);
    assert.doesNotMatch(dirty.out, /lands cleanly/);
    assert.deepEqual(repoState(), before, "nothing changed");
  }
  git(h.repo, "checkout", "-q", "--", "README.md");

  const l = await h.cli(["land", a.taskId]);
  assert.equal(l.code, 0, l.err);
  assert.match(l.out, /landed on main as [0-9a-f]{12}: a fast-forward/);
  assert.match(l.out, /uncommitted changes were committed first/);
  const r = resultOf(a.taskId);
  assert.equal(r.landing?.strategy, "fast-forward");
  assert.equal(git(h.repo, "rev-parse", "HEAD").trim(), r.landing?.landedAs);
  assert.equal(readFileSync(join(h.repo, "a.txt"), "utf8"), "from a\n");
  assert.equal(
    git(h.repo, "log", "-1", "--format=%an <%ae>").trim(),
    `${a.agent.name} <${a.taskId}@dsh-herdr.invalid>`,
  );
  assert.ok(journal(a.taskId).some((e) => e.type === "landed" && e.commit === r.landing?.landedAs));

  const again = await h.cli(["land", a.taskId]);
  assert.equal(again.code, 0, again.err);
  assert.match(again.out, /already landed/);
});

test("land after the base moved: a merge commit, --check on the merged tree; gc then removes the landed task", async () => {
  // The check passes only where the base's new file exists: on the merged tree, not in the task's own worktree.
  const b = await spawnWait("t-b", ["test -f b.txt && test -f moved.txt"]);
  writeFileSync(join(h.repo, "moved.txt"), "the base moved\n");
  git(h.repo, "add", "moved.txt");
  git(h.repo, "commit", "-q", "-m", "base moves");
  const moved = git(h.repo, "rev-parse", "HEAD").trim();
  const own = await h.cli(["check", b.taskId, "--json"]);
  assert.equal(own.code, 1, "in its own worktree the check fails");
  const l = await h.cli(["land", b.taskId, "--check", "--json"]);
  assert.equal(l.code, 0, l.err);
  const out = (JSON.parse(l.out) as { results: { said: string; checks: AgentResult["checks"] }[] }).results[0]!;
  assert.match(out.said, /merge commit \(main moved/);
  assert.equal(out.checks?.[0]?.exitCode, 0);
  assert.equal(out.checks?.[0]?.on, "merged");
  assert.equal(git(h.repo, "log", "-1", "--format=%P").trim().split(" ")[0], moved);
  assert.equal(resultOf(b.taskId).verified, true, "the merged tree's receipt replaced the failing one");

  // gc: the landed tasks' worktrees and branches go once they are closed (the base holds what they landed as); an
  // open one keeps its worktree, its child may still work there (gc-open-tasks.test.ts).
  const done = await h.cli(["done", a.taskId, b.taskId]);
  assert.equal(done.code, 0, done.err);
  const plan = await h.cli(["gc", "--json"]);
  const rows = (JSON.parse(plan.out) as { plan: { taskId: string; action: string; reason: string }[] }).plan;
  for (const id of [a.taskId, b.taskId]) {
    const row = rows.find((p) => p.taskId === id);
    assert.equal(row?.action, "remove", JSON.stringify(rows));
    assert.match(row!.reason, /landed as/);
  }
  const yes = await h.cli(["gc", "--yes"]);
  assert.equal(yes.code, 0, yes.err);
  assert.ok(!existsSync(b.worktree!.path));
  assert.equal(git(h.repo, "branch", "--list", `dsh/${a.taskId}`, `dsh/${b.taskId}`), "");
});

test("refusals change nothing: a conflict names the path; --check failing on the merged tree; a hung check cut off", async () => {
  const c = await spawnWait("t-c", []);
  writeFileSync(join(h.repo, "README.md"), "# the user's readme\n");
  git(h.repo, "commit", "-q", "-am", "base edits the readme");
  let before = repoState();
  const conflict = await h.cli(["land", c.taskId]);
  assert.equal(conflict.code, 1);
  assert.match(conflict.err, /LAND_CONFLICT: .*README\.md/);
  assert.deepEqual(repoState(), before);
  // The refusal leaves the record saying what it found, not the settle's `clean: true` until a dry run.
  const recorded = resultOf(c.taskId).landing;
  assert.equal(recorded?.clean, false, JSON.stringify(recorded));
  assert.deepEqual(recorded?.conflicts, ["README.md"]);
  assert.equal(recorded?.baseHead, git(h.repo, "rev-parse", "HEAD").trim());
  const dry = JSON.parse((await h.cli(["land", c.taskId, "--dry-run", "--json"])).out) as {
    results: { landing: { clean: boolean; conflicts: string[] } }[];
  };
  assert.deepEqual(dry.results[0]!.landing.conflicts, ["README.md"]);

  const d = await spawnWait("t-d", ["sleep 600"], ["--check-timeout", "1s"]);
  const hung = await h.cli(["check", d.taskId, "--json"]);
  assert.equal(hung.code, 1);
  const receipt = (JSON.parse(hung.out) as { checks: NonNullable<AgentResult["checks"]> }).checks[0]!;
  assert.equal(receipt.cutOff, "timeout");
  assert.equal(receipt.exitCode, null);
  assert.ok(resultOf(d.taskId).warnings?.some((w) => /^check `sleep 600` was cut off/.test(w)));
  const status = await h.cli(["daemon", "status", "--json"]);
  assert.equal(status.code, 0, "the daemon keeps serving");

  before = repoState();
  const refused = await h.cli(["land", d.taskId, "--check"]);
  assert.equal(refused.code, 1);
  assert.match(refused.err, /CHECK_FAILED: check `sleep 600` failed on the merged tree/);
  assert.deepEqual(repoState(), before);
  assert.ok(!existsSync(join(h.repo, "d.txt")));
});

test("--check refuses a merged tree whose tests fail though the task's own worktree passes them; nothing changes", async () => {
  const check = "test ! -f forbidden.txt";
  const e = await spawnWait("t-e", [check]);
  assert.equal(e.verified, true, "in its own worktree the check passes");
  // The base moves in a way that breaks the check once the two are merged.
  writeFileSync(join(h.repo, "forbidden.txt"), "the base adds what the check forbids\n");
  git(h.repo, "add", "forbidden.txt");
  git(h.repo, "commit", "-q", "-m", "base adds forbidden.txt");
  const dry = JSON.parse((await h.cli(["land", e.taskId, "--dry-run", "--json"])).out) as {
    results: { landing: { clean: boolean } }[];
  };
  assert.equal(dry.results[0]!.landing.clean, true, "git sees no conflict: only the tests can tell");
  const before = repoState();
  const branchBefore = git(h.repo, "rev-parse", `dsh/${e.taskId}`);
  const refused = await h.cli(["land", e.taskId, "--check"]);
  assert.equal(refused.code, 1);
  assert.match(
    refused.err,
    /CHECK_FAILED: check `test ! -f forbidden\.txt` failed on the merged tree .*\(exit 1\); nothing was landed/,
  );
  assert.deepEqual(repoState(), before, "the checkout is as it was");
  assert.equal(git(h.repo, "rev-parse", `dsh/${e.taskId}`), branchBefore, "the task branch is as it was");
  assert.ok(!existsSync(join(h.repo, "e.txt")));
  const r = resultOf(e.taskId);
  assert.equal(r.verified, false, "the merged tree's failing receipt is the newest");
  assert.deepEqual(
    r.checks?.map((c) => [c.command, c.exitCode, c.on]),
    [[check, 1, "merged"]],
  );
  assert.ok(r.warnings?.some((w) => w.startsWith(`check \`${check}\` failed on the merged tree (exit 1)`)));
  // Without --check it lands (the person's call): the checks are a gate only when asked for.
  const l = await h.cli(["land", e.taskId]);
  assert.equal(l.code, 0, l.err);
  assert.ok(existsSync(join(h.repo, "e.txt")));
});

test("land and its dry run refuse, naming it, a path the user's checkout holds ignored (.env); the secret stays", async () => {
  const f = await spawnWait("t-f", []);
  // The user ignores .env and keeps a secret there; the child's work (its worktree predates the rule) holds one too.
  writeFileSync(join(h.repo, ".gitignore"), ".env\n");
  git(h.repo, "add", ".gitignore");
  git(h.repo, "commit", "-q", "-m", "ignore .env");
  writeFileSync(join(h.repo, ".env"), "OPENAI_API_KEY=sk-user-real-secret\n");
  const before = [...repoState(), git(h.repo, "status", "--porcelain=v1", "--ignored")];
  for (const args of [["--dry-run"], []]) {
    const r = await h.cli(["land", f.taskId, ...args]);
    assert.equal(r.code, 1, r.out);
    assert.match(r.err, /CHECKOUT_IN_THE_WAY: .*\.env \(ignored file\).*nothing was changed/);
    assert.deepEqual([...repoState(), git(h.repo, "status", "--porcelain=v1", "--ignored")], before);
    assert.equal(readFileSync(join(h.repo, ".env"), "utf8"), "OPENAI_API_KEY=sk-user-real-secret\n");
  }
  assert.equal(resultOf(f.taskId).landing?.landedAs, undefined);
});
