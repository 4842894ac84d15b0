// Consent for a repository's own commands, with real pi children (headless) against the scripted model, a real daemon,
// real git and the real CLI: a cloned repository whose committed .dsh-herdr.json carries a hostile check, setup and
// include runs none of them on a plain, an isolated or a reviewer spawn (each says so in its warnings, the CLI in
// one line); after `dsh-herdr repo trust` they run; after the file changes, they no longer do.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AgentResult } from "../../src/core/types.js";
import { runCli } from "../helpers/cli.js";
import { commitAll, initRepo, write } from "../helpers/git.js";
import { startHarness, type Harness } from "./daemon-harness.js";

const report = (m: string) => ({
  name: m,
  match: m,
  steps: [{ toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "looked" } }] }],
});
const SCRIPT = { conversations: [report("MARK-CONSENT-RUN")] };

let h: Harness;
let clone: string;
let checkMark: string;
let setupMark: string;

before(async () => {
  h = await startHarness(SCRIPT, { runtime: "headless" });
  checkMark = join(h.dir, "hostile-check-ran");
  setupMark = join(h.dir, "hostile-setup-ran");
  // Upstream commits a .dsh-herdr.json; the user clones it and has their own ignored .env.
  const upstream = initRepo(join(h.dir, "up"));
  write(upstream, ".gitignore", ".env\n");
  write(
    upstream,
    ".dsh-herdr.json",
    JSON.stringify({
      worktree: { include: [".env"], setup: `touch ${setupMark}` },
      checks: [`touch ${checkMark}; echo ran-hostile-check-in $PWD`],
    }),
  );
  commitAll(upstream, "ship settings");
  clone = join(h.dir, "clone");
  execFileSync("git", ["clone", "-q", upstream, clone]);
  write(clone, ".env", "OPENAI_API_KEY=sk-user-real-secret\n");
});
after(async () => {
  await h?.close();
});

const cliEnv = () => ({ ...process.env, DSH_HERDR_HOME: h.home });
const gone = () => !existsSync(checkMark) && !existsSync(setupMark);

async function spawnWait(params: Record<string, unknown>): Promise<AgentResult> {
  const { taskId } = await h.spawn({ cwd: clone, prompt: "MARK-CONSENT-RUN look", ...params });
  const r = await h.wait(taskId);
  assert.equal(r.status, "completed", JSON.stringify(r));
  return r;
}

test("an untrusted .dsh-herdr.json runs nothing on a plain, isolated or reviewer spawn, and says so", async () => {
  for (const params of [{}, { isolated: true }, { role: "reviewer" }]) {
    const r = await spawnWait(params);
    assert.ok(gone(), `nothing of the file ran on ${JSON.stringify(params)}`);
    assert.deepEqual(r.checks ?? [], [], "no check receipt");
    assert.ok(
      r.warnings?.some((w) => /\.dsh-herdr\.json is not trusted: its setup, checks, include did not apply/.test(w)),
      JSON.stringify(r.warnings),
    );
    if (r.worktree) assert.ok(!existsSync(join(r.worktree.path, ".env")), "the include did not apply");
    await h.cli.request("task.close", { taskId: r.taskId });
  }
  // The CLI says so in one line.
  const s = await runCli(["spawn", "--cwd", clone, "--model", h.modelName, "--prompt", "MARK-CONSENT-RUN cli"], {
    env: cliEnv(),
  });
  assert.equal(s.code, 0, s.err);
  const lines = s.err.split("\n").filter((l) => l.includes(".dsh-herdr.json"));
  assert.equal(lines.length, 1, s.err);
  assert.match(lines[0]!, /not trusted: .* review it, then `dsh-herdr repo trust /);
  const r = await h.wait(s.out.trim());
  assert.ok(gone());
  await h.cli.request("task.close", { taskId: r.taskId });
});

test("repo trust lets the file's commands run; a changed file needs trust again", async () => {
  const st = await runCli(["repo", "status", clone, "--json"], { env: cliEnv() });
  assert.equal((JSON.parse(st.out) as { state: string }).state, "untrusted", st.out + st.err);
  const t = await runCli(["repo", "trust", clone], { env: cliEnv() });
  assert.equal(t.code, 0, t.err);
  assert.match(t.out, /trusted .*\.dsh-herdr\.json/);
  assert.match(t.out, /check: touch /);
  const r = await spawnWait({ isolated: true });
  assert.ok(existsSync(setupMark), "the trusted setup ran");
  assert.ok(existsSync(checkMark), "the trusted check ran");
  assert.ok(existsSync(join(r.worktree!.path, ".env")), "the trusted include applied");
  assert.equal(r.checks?.[0]?.exitCode, 0);
  await h.cli.request("task.close", { taskId: r.taskId });

  // The file changes (a pull): untrusted again until trusted anew.
  rmSync(checkMark);
  rmSync(setupMark);
  writeFileSync(
    join(clone, ".dsh-herdr.json"),
    JSON.stringify({ worktree: { setup: `touch ${setupMark}` }, checks: [`touch ${checkMark}`] }),
  );
  for (const params of [{}, { isolated: true }]) {
    const again = await spawnWait(params);
    assert.ok(gone(), `the changed file ran nothing on ${JSON.stringify(params)}`);
    assert.ok(
      again.warnings?.some((w) => /changed since you trusted it/.test(w)),
      JSON.stringify(again.warnings),
    );
    await h.cli.request("task.close", { taskId: again.taskId });
  }
  assert.match((await runCli(["repo", "status", clone], { env: cliEnv() })).out, /changed since you trusted it/);
  const u = await runCli(["repo", "untrust", clone, "--json"], { env: cliEnv() });
  assert.deepEqual(JSON.parse(u.out), { root: clone, removed: true });
});
