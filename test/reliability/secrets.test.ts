// Secrets in the environment never reach what the daemon writes or answers: API-key-looking values in the daemon's
// own env and in every child's env (real pi children, scripted model, headless runtime) are searched for in
// daemon.log (default level, then debug), every file under tasks/<id>/, task.get / task.list replies and the owner
// outbox.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import type { DaemonClient } from "../../src/client/index.js";
import { connectOwner, ownerSecret as readOwnerSecret } from "../helpers/owner-client.js";
import { killUnder, processesUnder } from "../helpers/procs.js";
import {
  cliClient,
  makeRepo,
  startDaemonProc,
  startShared,
  until,
  type DaemonProc,
  type Shared,
} from "./proc-harness.js";

const SCRIPT: Script = {
  conversations: [
    {
      name: "secret",
      match: "MARK-SECRET",
      steps: [
        // Proves the child really holds the keys (so a leak had something to leak) without printing them.
        {
          toolCalls: [
            {
              name: "bash",
              arguments: {
                command: 'test -n "$OPENAI_API_KEY" && test -n "$DSH_TEST_CHILD_API_KEY" && echo KEYS-PRESENT-IN-CHILD',
              },
            },
          ],
        },
        { toolCalls: [{ name: "write", arguments: { path: "note.txt", content: "done\n" } }] },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "wrote note.txt" } }] },
        { text: "all done" },
      ],
    },
  ],
};

const rnd = () => randomBytes(12).toString("hex");
const SECRETS = {
  OPENAI_API_KEY: `sk-test-${rnd()}`,
  ANTHROPIC_API_KEY: `sk-ant-api03-${rnd()}`,
  GITHUB_TOKEN: `ghp_${rnd()}`,
};
/** Given only to children (through the daemon's childEnv), not to the daemon's own env. */
const CHILD_SECRET = { DSH_TEST_CHILD_API_KEY: `sk-child-${rnd()}` };
const ALL = [...Object.values(SECRETS), ...Object.values(CHILD_SECRET)];

let shared: Shared;
before(async () => {
  shared = await startShared(SCRIPT, "dsh-secrets-");
});
after(async () => {
  await shared?.close();
});

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    const st = statSync(p);
    return st.isDirectory() ? filesUnder(p) : st.isFile() ? [p] : [];
  });
}

function assertClean(what: string, text: string): void {
  for (const s of ALL) assert.ok(!text.includes(s), `${what} contains the secret ${s.slice(0, 10)}…`);
}

async function oneTask(home: string, repo: string, ownerId: string, level: string | undefined): Promise<string> {
  const d: DaemonProc = await startDaemonProc(
    home,
    { ...shared.childEnv, ...CHILD_SECRET },
    {
      env: { ...SECRETS, ...(level ? { DSH_HERDR_LOG_LEVEL: level } : {}) },
    },
  );
  // The owner's own secret (issued to its first hello, presented again after the restart) is a secret too.
  const owner: DaemonClient = await connectOwner(home, ownerId, { timeoutMs: 120_000 });
  const cli = await cliClient(home);
  try {
    await owner.request("owner.attach", {});
    const { taskId } = await owner.request("task.spawn", {
      model: shared.modelName,
      cwd: repo,
      prompt: `MARK-SECRET ${level ?? "info"}`,
      isolated: true,
    });
    const w = await cli.request("task.wait", { taskIds: [taskId], timeoutMs: 90_000 }, { timeoutMs: 95_000 });
    assert.equal(w.results[0]?.status, "completed", JSON.stringify(w.results[0]));
    assert.match(
      readFileSync(join(home, "tasks", taskId, "session.jsonl"), "utf8"),
      /KEYS-PRESENT-IN-CHILD/,
      "the child ran with the keys",
    );
    assertClean("task.get", JSON.stringify(await owner.request("task.get", { taskId })));
    assertClean("task.list", JSON.stringify(await cli.request("task.list", {})));
    assertClean("task.wait", JSON.stringify(w));
    await owner.request("task.close", { taskId, closePane: true });
    await until("the child gone after close", () => (processesUnder(home).length === 0 ? true : undefined), 30_000);
    assertClean("task.get after close", JSON.stringify(await cli.request("task.get", { taskId })));
    return taskId;
  } finally {
    owner.close();
    cli.close();
    d.proc.kill("SIGTERM");
    await d.exited;
    killUnder(home);
    assertClean("daemon stderr", d.stderr());
  }
}

test("API keys in the daemon's and the children's env appear in no log, task file, reply or outbox (info and debug logs)", async () => {
  const dir = join(shared.dir, "s");
  const repo = makeRepo(dir);
  const home = join(dir, "home");
  const ownerId = `5ec2e7${"ab12".repeat(2)}-owner`;
  const ids = [await oneTask(home, repo, ownerId, undefined)];
  const infoLog = readFileSync(join(home, "daemon.log"), "utf8");
  ids.push(await oneTask(home, repo, ownerId, "debug"));
  const log = readFileSync(join(home, "daemon.log"), "utf8");
  assert.doesNotMatch(infoLog, /launching child/, "the default level keeps debug lines out");
  assert.match(
    log.slice(infoLog.length),
    /"level":20,.*"launching child"/,
    "the second run logged the launch at debug level",
  );
  assertClean("daemon.log", log);
  const ownerSecret = readOwnerSecret(home, ownerId);
  assert.match(ownerSecret ?? "", /^[0-9a-f]{64}$/);
  assert.ok(!log.includes(ownerSecret!), "the owner's secret is not in daemon.log");
  for (const id of ids) {
    const files = filesUnder(join(home, "tasks", id));
    for (const f of ["task.json", "events.jsonl", "prompt.md", "result.json", "result.md"])
      assert.ok(
        files.some((p) => p.endsWith(`/${f}`)),
        `${id} has ${f}`,
      );
    for (const f of files) assertClean(f, readFileSync(f, "utf8"));
  }
  const outbox = join(home, "owners", ownerId, "outbox.jsonl");
  assert.ok(existsSync(outbox), "the owner got deliveries");
  assert.ok(readFileSync(outbox, "utf8").includes(ids[0]!), "the outbox holds the first task's delivery");
  assertClean("owner outbox", readFileSync(outbox, "utf8"));
  // Everything else the daemon wrote in its home (index, owner state), worktrees included.
  for (const f of filesUnder(home)) if (!f.endsWith("daemon.sock")) assertClean(f, readFileSync(f, "latin1"));
});
