// Worktree setup with real pi children (headless) against the scripted model, a real daemon and real git: included
// ignored files (.env copied, node_modules/ linked) and a setup command in an isolated worktree, run before the child
// starts (the child reads what setup made), with the baseline taken after it (setup's files are not in the diff and
// are not landed); SETUP_FAILED with the setup's last lines, and the child never started; a hung setup cut off; the
// repository's own settings (.dsh-herdr.json, config.json repos.<root>) joined to a spawn's.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, lstatSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { commitAll, git, write } from "../helpers/git.js";
import { until } from "../helpers/wait.js";
import { processesUnder } from "../helpers/procs.js";
import { worktreePathFor } from "../../src/git/worktree.js";
import { runDaemon } from "../../src/daemon/daemon.js";
import { connect } from "../../src/client/index.js";
import { readJournal, startHarness, type Harness } from "./daemon-harness.js";
import { runCli } from "../helpers/cli.js";
import { noScope } from "../helpers/cgroup.js";

const SCRIPT = {
  conversations: [
    {
      name: "see-setup",
      match: "MARK-SEE-SETUP",
      steps: [
        {
          toolCalls: [
            {
              name: "bash",
              arguments: {
                command:
                  'S=$(git status --porcelain); cat .env node_modules/dep/index.js gen.txt > seen.txt; printf %s "$S" > status.txt',
              },
            },
          ],
        },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "read what setup made" } }] },
      ],
    },
    {
      name: "never",
      match: "MARK-NEVER-STARTS",
      steps: [{ toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "should not run" } }] }],
    },
    {
      name: "after-restart",
      match: "MARK-SETUP-RESTART",
      steps: [
        { toolCalls: [{ name: "bash", arguments: { command: "cat gen.txt > seen.txt" } }] },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "setup ran again" } }] },
      ],
    },
    {
      name: "repo-config",
      match: "MARK-REPO-CONFIG",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "work.txt", content: "work\n" } }] },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "wrote work.txt" } }] },
      ],
    },
  ],
};

let h: Harness;
let head: string;

before(async () => {
  h = await startHarness(SCRIPT, { runtime: "headless" });
  write(h.repo, ".gitignore", ".env\nnode_modules/\n");
  head = commitAll(h.repo, "ignore .env and node_modules");
  write(h.repo, ".env", "SECRET=from-the-checkout\n");
  write(h.repo, "node_modules/dep/index.js", "module.exports = 'dep';\n");
});
after(async () => {
  await h?.close();
});

const requestsOf = (marker: string) =>
  h.model.requests().filter((r) => JSON.stringify(r.body).includes(marker) && r.conversation !== null);

test("--include and --setup: .env copied, node_modules/ linked, setup ran before the child; its files are not the child's", async () => {
  const setup = "echo setting up; cat .env > from-setup.txt; echo generated > gen.txt; echo 'setup line' >> README.md";
  const { taskId } = await h.spawn({
    prompt: "MARK-SEE-SETUP read what setup made",
    isolated: true,
    include: [".env", "node_modules/"],
    setup,
  });
  const r = await h.wait(taskId);
  assert.equal(r.status, "completed", JSON.stringify(r));
  const wt = r.worktree!.path;
  // The child saw what the includes and setup made.
  assert.equal(
    readFileSync(join(wt, "seen.txt"), "utf8"),
    "SECRET=from-the-checkout\nmodule.exports = 'dep';\ngenerated\n",
  );
  assert.ok(lstatSync(join(wt, ".env")).isFile(), ".env is a copy");
  assert.ok(lstatSync(join(wt, "node_modules")).isSymbolicLink(), "node_modules is linked");
  assert.equal(readlinkSync(join(wt, "node_modules")), join(h.repo, "node_modules"));
  // The child started from a clean status: setup's files were committed as the baseline before it ran.
  assert.equal(readFileSync(join(wt, "status.txt"), "utf8"), "");
  // Only the child's files are in its diff; setup's (gen.txt, from-setup.txt, README.md's line, the link) are not.
  assert.deepEqual([...r.diff!.files].sort(), ["seen.txt", "status.txt"]);
  const base = r.diff!.baselineHead!;
  assert.equal(git(h.repo, "rev-parse", `${base}^`).trim(), head, "the baseline is setup's commit on the spawn's HEAD");
  assert.equal(git(h.repo, "log", "-1", "--format=%an", base).trim(), "dsh-herdr setup");
  assert.deepEqual(git(h.repo, "show", "--name-only", "--format=", base).trim().split("\n").sort(), [
    "README.md",
    "from-setup.txt",
    "gen.txt",
    "node_modules",
  ]);
  // setup.log in the task dir; the journal's setup record comes before the launch.
  const log = readFileSync(join(h.home, "tasks", taskId, "setup.log"), "utf8");
  assert.match(log, /setting up/);
  const j = readJournal(h, taskId);
  const si = j.findIndex((e) => e.type === "setup");
  assert.ok(si >= 0 && si < j.findIndex((e) => e.type === "launched"), JSON.stringify(j.map((e) => e.type)));
  assert.equal(j[si]!.exitCode, 0);
  assert.deepEqual(j[si]!.copied, [".env"]);
  assert.deepEqual(j[si]!.linked, ["node_modules"]);
  assert.equal(r.landing?.clean, true, JSON.stringify(r.landing));

  // land: the child's files come back; setup's do not.
  const { results } = await h.cli.request("task.land", {
    taskIds: [taskId],
  });
  assert.equal(git(h.repo, "rev-parse", "HEAD").trim(), results[0]!.landing!.landedAs);
  assert.deepEqual(git(h.repo, "diff", "--name-only", head, "HEAD").trim().split("\n").sort(), [
    "seen.txt",
    "status.txt",
  ]);
  assert.ok(!existsSync(join(h.repo, "gen.txt")));
  assert.equal(readFileSync(join(h.repo, "README.md"), "utf8"), "# demo\n");
  head = git(h.repo, "rev-parse", "HEAD").trim();
});

test("a setup that fails: failed with SETUP_FAILED and its last lines; the child never starts", async () => {
  const { taskId } = await h.spawn({
    prompt: "MARK-NEVER-STARTS do nothing",
    isolated: true,
    setup: "echo step one; echo step two; echo 'npm ERR! missing script: build' >&2; exit 7",
  });
  const r = await h.wait(taskId);
  assert.equal(r.status, "failed", JSON.stringify(r));
  assert.equal(r.error?.code, "SETUP_FAILED");
  assert.match(r.error!.message, /\(exit 7\)/);
  assert.match(r.error!.message, /step two\nnpm ERR! missing script: build/);
  assert.match(r.error!.message, /setup\.log/);
  assert.deepEqual(requestsOf("MARK-NEVER-STARTS"), [], "no model call: the child was never started");
  const j = readJournal(h, taskId);
  assert.ok(!j.some((e) => e.type === "launched"), JSON.stringify(j.map((e) => e.type)));
  assert.ok(j.some((e) => e.type === "setup" && e.ok === false && e.exitCode === 7));
});

test("a setup that hangs is cut off at its timeout by name; the daemon keeps serving", async () => {
  const { taskId } = await h.spawn({
    prompt: "MARK-NEVER-STARTS hang",
    isolated: true,
    setup: "echo about to hang; sleep 600",
    setupTimeoutMs: 1000,
  });
  const r = await h.wait(taskId, 60_000);
  assert.equal(r.error?.code, "SETUP_FAILED");
  assert.match(r.error!.message, /cut off: still running after 1 s/);
  assert.match(r.error!.message, /about to hang/);
  const st = await h.cli.request("daemon.status", {});
  assert.equal(typeof st.pid, "number");
});

test("an abort while the setup runs ends the setup's processes; the child never starts", async () => {
  const pidFile = join(h.dir, "setup.pid");
  const { taskId } = await h.spawn({
    prompt: "MARK-NEVER-STARTS aborted during setup",
    isolated: true,
    setup: `echo $$ > ${pidFile}; sleep 600`,
  });
  const pid = await until("the setup's pid", () => {
    const t = existsSync(pidFile) ? readFileSync(pidFile, "utf8").trim() : "";
    return t ? Number(t) : undefined;
  });
  const r = await h.cli.request("task.abort", { taskIds: [taskId] });
  assert.deepEqual(r.aborted_ids, [taskId]);
  const settled = await h.wait(taskId, 60_000);
  assert.equal(settled.status, "interrupted", JSON.stringify(settled));
  await until("the setup's shell to be gone", () => {
    try {
      process.kill(pid, 0);
      return false;
    } catch {
      return true;
    }
  });
  assert.deepEqual(requestsOf("aborted during setup"), []);
  assert.ok(!readJournal(h, taskId).some((e) => e.type === "launched"));
});

test("a daemon stopped while a setup runs ends the setup's processes and records no failure; the next daemon runs the setup again and the task goes on", async () => {
  const runs = join(h.dir, "setup-runs.txt");
  const mayFinish = join(h.dir, "setup-may-finish");
  // Hangs (a shell and its sleep in the worktree) until the flag exists; every run leaves a line.
  const setup = `echo run >> ${runs}; echo generated > gen.txt; if [ -f ${mayFinish} ]; then exit 0; fi; sleep 600 & wait`;
  const { taskId } = await h.spawn({ prompt: "MARK-SETUP-RESTART go on", isolated: true, setup });
  const worktree = worktreePathFor(h.home, h.repo, taskId);
  await until("the setup's processes", () => existsSync(runs) && processesUnder(worktree).length >= 2, 30_000);
  h.cli.close();
  await h.daemon.stop();
  assert.deepEqual(
    processesUnder(worktree).map((pid) => readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ")),
    [],
    "nothing of the setup runs on after its daemon stopped",
  );
  const j = readJournal(h, taskId);
  assert.ok(!j.some((e) => e.type === "setup"), `no setup record of the cut run: ${JSON.stringify(j)}`);
  assert.ok(!j.some((e) => e.type === "launched" || e.type === "settle"), JSON.stringify(j));
  writeFileSync(mayFinish, "");
  h.daemon = await runDaemon(h.home, {
    childEnv: h.childEnv,
    config: { readinessTimeoutMs: 60_000, runtime: "headless" },
  });
  h.cli = await connect(h.home, { kind: "cli", timeoutMs: 120_000 });
  const r = await h.wait(taskId);
  assert.equal(r.status, "completed", JSON.stringify(r));
  assert.equal(readFileSync(runs, "utf8"), "run\nrun\n", "the setup ran once more, in the next daemon");
  assert.equal(readFileSync(join(r.worktree!.path, "seen.txt"), "utf8"), "generated\n");
  assert.deepEqual(r.diff!.files, ["seen.txt"], "what setup made is the baseline, not the child's work");
});

/** Alive and running (a zombie runs nothing). */
const running = (pid: number): boolean => {
  try {
    return !/^\d+ \(.*\) [ZX]/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
};
const pidIn = (file: string) =>
  until("the grandchild's pid", () => {
    const t = existsSync(file) ? readFileSync(file, "utf8").trim() : "";
    return t ? Number(t) : undefined;
  });
const SCOPE_SKIP = noScope();

test("a setup's grandchild that left its group and environment (env -i setsid) ends with the setup, and with a daemon stop during it", {
  skip: SCOPE_SKIP ? `no scope possible here: ${SCOPE_SKIP}` : false,
}, async () => {
  // Ends with the setup: gone before the child even runs, so close, gc and a daemon stop find nothing of it.
  const done = join(h.dir, "escaped-done.pid");
  const { taskId } = await h.spawn({
    prompt: "MARK-SETUP-RESTART go on",
    isolated: true,
    setup: `env -i setsid sleep 1000 & echo $! > ${done}; echo generated > gen.txt`,
  });
  const r = await h.wait(taskId);
  assert.equal(r.status, "completed", JSON.stringify(r));
  const pid = await pidIn(done);
  const ended = !running(pid);
  if (!ended) process.kill(pid, "SIGKILL");
  assert.ok(ended, `the setup's setsid grandchild ${pid} outlived the setup`);
  await h.cli.request("task.close", { taskId });

  // A daemon stop during the setup ends it too (the setup runs again in the next daemon, and finishes then).
  const during = join(h.dir, "escaped-during.pid");
  const mayFinish = join(h.dir, "escaped-may-finish");
  const setup = `env -i setsid sleep 1000 & echo $! > ${during}; echo generated > gen.txt; if [ -f ${mayFinish} ]; then exit 0; fi; sleep 600 & wait`;
  const second = await h.spawn({ prompt: "MARK-SETUP-RESTART go on", isolated: true, setup });
  const pid2 = await pidIn(during);
  h.cli.close();
  await h.daemon.stop();
  const ended2 = !running(pid2);
  if (!ended2) process.kill(pid2, "SIGKILL");
  writeFileSync(mayFinish, "");
  h.daemon = await runDaemon(h.home, {
    childEnv: h.childEnv,
    config: { readinessTimeoutMs: 60_000, runtime: "headless" },
  });
  h.cli = await connect(h.home, { kind: "cli", timeoutMs: 120_000 });
  assert.ok(ended2, `the setup's setsid grandchild ${pid2} outlived the daemon stop`);
  const r2 = await h.wait(second.taskId);
  assert.equal(r2.status, "completed", JSON.stringify(r2));
  await h.cli.request("task.close", { taskId: second.taskId });
});

test("include and setup without a worktree are refused by name; a bad pattern too", async () => {
  await assert.rejects(
    () => h.spawn({ prompt: "MARK-NEVER-STARTS x", setup: "true" }),
    (e: { code?: string; message: string }) => e.code === "BAD_PARAMS" && /isolated/.test(e.message),
  );
  await assert.rejects(
    () => h.spawn({ prompt: "MARK-NEVER-STARTS x", isolated: true, include: ["# a comment"] }),
    (e: { code?: string }) => e.code === "BAD_PARAMS",
  );
});

test("the repository's settings: .dsh-herdr.json and config.json repos.<root>, joined to the spawn's own", async () => {
  writeFileSync(
    join(h.repo, ".dsh-herdr.json"),
    JSON.stringify({
      worktree: { include: [".env"], setup: "echo from-file > cfg.txt" },
      checks: ["test -f .env"],
    }),
  );
  // The file's commands apply once the person trusts its content (repo-consent.test.ts: not before).
  const trusted = await runCli(["repo", "trust", h.repo], { env: { ...process.env, DSH_HERDR_HOME: h.home } });
  assert.equal(trusted.code, 0, trusted.err);
  // config.json's entry for the repository overrides the file's setup and adds a check.
  writeFileSync(
    join(h.home, "config.json"),
    JSON.stringify({
      repos: { [h.repo]: { worktree: { setup: "echo from-config > cfg.txt" }, checks: ["test -f cfg.txt"] } },
    }),
  );
  const cfg = () => h.daemon.supervisor.deps.config();
  const deadline = Date.now() + 30_000;
  while (!cfg().repos?.[h.repo]) {
    assert.ok(Date.now() < deadline, "the daemon did not reload config.json");
    await new Promise((res) => setTimeout(res, 50));
  }
  const { taskId } = await h.spawn({
    prompt: "MARK-REPO-CONFIG write work.txt",
    isolated: true,
    include: ["node_modules/"],
    checks: ["test -f work.txt"],
  });
  const r = await h.wait(taskId);
  assert.equal(r.status, "completed", JSON.stringify(r));
  const wt = r.worktree!.path;
  assert.equal(readFileSync(join(wt, "cfg.txt"), "utf8"), "from-config\n");
  assert.ok(lstatSync(join(wt, ".env")).isFile());
  assert.ok(lstatSync(join(wt, "node_modules")).isSymbolicLink());
  assert.deepEqual(
    r.checks?.map((c) => [c.command, c.exitCode]),
    [
      ["test -f .env", 0],
      ["test -f cfg.txt", 0],
      ["test -f work.txt", 0],
    ],
  );
  assert.deepEqual(r.diff!.files, ["work.txt"]);
  // A bad .dsh-herdr.json fails the task by name before any child starts.
  writeFileSync(join(h.repo, ".dsh-herdr.json"), JSON.stringify({ worktree: { setpu: "typo" } }));
  const bad = await h.spawn({ prompt: "MARK-NEVER-STARTS bad config", isolated: true });
  const b = await h.wait(bad.taskId);
  assert.equal(b.error?.code, "CONFIG_INVALID");
  assert.match(b.error!.message, /\.dsh-herdr\.json/);
  assert.match(b.error!.message, /setpu/);
  writeFileSync(join(h.home, "config.json"), "{}");
});
