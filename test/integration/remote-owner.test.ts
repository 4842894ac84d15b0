// A real owner pi (RPC mode, with the owner extension) delegates to another machine: its crew_spawn names
// `machine: builder` (or a definition's `machine:` frontmatter does), the local in-process daemon relays the spawn
// over real OpenSSH to a second Unix user's daemon (test/helpers/sshd.ts), real pi runs the child there against the
// scripted model, and the result comes back to the owner as an ordinary delivery: one per settled cycle.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startScriptedModel, type RecordedRequest, type ScriptedModel } from "../../fixtures/scripted-model/server.js";
import { preparePiAgentDir } from "../../fixtures/scripted-model/agent-dir.js";
import { startRpcPi, type RpcPi } from "../../fixtures/scripted-model/rpc-child.js";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { runDaemon, type RunningDaemon } from "../../src/daemon/daemon.js";
import { connect, type DaemonClient } from "../../src/client/index.js";
import type { AgentResult } from "../../src/core/types.js";
import { readOutbox } from "../../src/store/outbox.js";
import { initRepo } from "../helpers/git.js";
import { freePort, sshdUnavailable, startSshd, type TestSshd } from "../helpers/sshd.js";

const skip = sshdUnavailable();
const root = join(import.meta.dirname, "..", "..", "..");
const ownerExt = join(root, "dist", "src", "extensions", "owner.js");
const task = (goal: string) => ({ goal, context: [], instructions: ["Do it and report with crew_report."] });
const report = (r: string) => ({ name: "crew_report", arguments: { outcome: "completed", report: r } });

// Filled in once the remote repo exists: the server reads the script object on every request.
const byArg: Record<string, unknown> = {
  subagent: "worker",
  brief: "remote by arg",
  task: task("RCHILD-ARG"),
  machine: "builder",
};
const byDef: Record<string, unknown> = {
  subagent: "far-worker",
  brief: "remote by definition",
  task: task("RCHILD-DEF"),
};

const SCRIPT: Script = {
  conversations: [
    {
      name: "rchild-arg",
      match: "RCHILD-ARG",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "remote.txt", content: "made there\n" } }] },
        { toolCalls: [report("Wrote remote.txt on the builder")] },
      ],
    },
    { name: "rchild-def", match: "RCHILD-DEF", steps: [{ toolCalls: [report("Definition child done")] }] },
    {
      name: "owner",
      match: "OWNER-",
      steps: [
        { match: "OWNER-ARG", matchIn: "sinceAssistant", toolCalls: [{ name: "crew_spawn", arguments: byArg }] },
        { match: "OWNER-DEF", matchIn: "sinceAssistant", toolCalls: [{ name: "crew_spawn", arguments: byDef }] },
        {
          match: "OWNER-BAD",
          matchIn: "sinceAssistant",
          toolCalls: [
            {
              name: "crew_spawn",
              arguments: {
                subagent: "worker",
                brief: "b",
                task: task("RCHILD-ARG"),
                machine: "atlantis",
                cwd: "/srv/repo",
              },
            },
            {
              name: "crew_spawn",
              arguments: {
                subagent: "worker",
                brief: "b",
                task: task("RCHILD-ARG"),
                machine: "nowhere",
                cwd: "/srv/repo",
              },
            },
          ],
        },
        { match: '"brief"', text: "Noted." },
        { text: "Waiting for the subagents." },
      ],
    },
  ],
};

describe("crew_spawn {machine} from a real owner pi (real ssh, real pi on both sides)", {
  skip,
  timeout: 600_000,
}, () => {
  let sshd: TestSshd;
  let model: ScriptedModel;
  let dir: string;
  let home: string;
  let repo: string;
  let remoteRepo: string;
  let daemon: RunningDaemon;
  let cli: DaemonClient;
  let owner: RpcPi;
  let modelName: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "dsh-remote-owner-"));
    model = await startScriptedModel({ script: SCRIPT, logPath: join(dir, "requests.jsonl") });
    sshd = await startSshd();
    const agent = preparePiAgentDir(dir, model.url);
    modelName = agent.model;
    cpSync(join(dir, "agent"), sshd.user.piDir, { recursive: true });
    remoteRepo = initRepo(sshd.user.home, "repo");
    // The remote daemon's own config: headless children there (its runtime is its own business, not the owner's).
    mkdirSync(sshd.user.dshHome, { recursive: true, mode: 0o700 });
    writeFileSync(join(sshd.user.dshHome, "config.json"), JSON.stringify({ runtime: "headless" }), { mode: 0o600 });
    sshd.giveToUser(join(sshd.user.home, ".dsh"));
    sshd.giveToUser(sshd.user.piDir);
    sshd.giveToUser(remoteRepo);
    byArg["cwd"] = remoteRepo;
    byDef["cwd"] = remoteRepo;
    // The owner's project has a definition that names the machine itself.
    repo = initRepo(dir, "repo");
    mkdirSync(join(repo, ".pi", "agents"), { recursive: true });
    writeFileSync(
      join(repo, ".pi", "agents", "far-worker.md"),
      "---\nname: far-worker\ndescription: works on the builder\nmachine: builder\n---\nWork carefully.\n",
    );
    home = join(dir, "home-dsh");
    const deadPort = await freePort();
    daemon = await runDaemon(home, {
      config: {
        runtime: "headless",
        machines: {
          builder: sshd.machine,
          nowhere: { ssh: "nobody@127.0.0.1", port: deadPort, identity: sshd.clientKey, knownHosts: sshd.knownHosts },
        },
      },
    });
    cli = await connect(home, { kind: "cli", timeoutMs: 120_000 });
    owner = startRpcPi({
      env: { ...agent.env, DSH_HERDR_HOME: home },
      cwd: repo,
      sessionPath: join(dir, "owner", "owner.jsonl"),
      model: agent.model,
      extensionPaths: [ownerExt],
      lifetimeMs: 600_000,
    });
  });
  after(async () => {
    await owner?.close().catch(() => undefined);
    cli?.close();
    await daemon?.stop();
    await sshd?.close();
    await model?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const ownerRequests = (): RecordedRequest[] => model.requests().filter((r) => r.conversation === "owner");
  const texts = (r: RecordedRequest): string[] =>
    ((r.body as { messages: { content?: unknown }[] }).messages ?? []).map((m) =>
      typeof m.content === "string"
        ? m.content
        : Array.isArray(m.content)
          ? m.content.map((p: { text?: string }) => p.text ?? "").join("")
          : "",
    );
  /** Result deliveries as the owner's model saw them, once each. */
  const deliveriesSeen = (): Record<string, unknown>[] => {
    const seen = new Map<string, Record<string, unknown>>();
    for (const r of ownerRequests())
      for (const t of texts(r)) {
        if (!t.startsWith('{"subagent_id"')) continue;
        const j = JSON.parse(t) as Record<string, unknown>;
        if ("brief" in j) seen.set(t, j);
      }
    return [...seen.values()];
  };
  async function until<T>(what: string, fn: () => T | undefined | false | Promise<T | undefined | false>, ms = 90_000) {
    const end = Date.now() + ms;
    for (;;) {
      const v = await fn();
      if (v) return v;
      if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  let seq = 0;
  async function command(cmd: Record<string, unknown>): Promise<{ success: boolean; data?: any; error?: string }> {
    const id = `r${++seq}`;
    const from = owner.events.length;
    owner.send({ ...cmd, id } as Parameters<RpcPi["send"]>[0]);
    return until(
      `pi's response to ${String(cmd.type)}`,
      () => owner.events.slice(from).find((e) => e.type === "response" && e.id === id) as never,
      30_000,
    );
  }
  /** The owner runs no turn and holds no queued message, twice in a row (pi refuses a prompt mid-turn). */
  async function quiet(): Promise<void> {
    for (let calm = 0, tries = 0; calm < 2; tries++) {
      if (tries > 300) assert.fail("the owner pi never went quiet");
      const r = await command({ type: "get_state" });
      calm = r.data && !r.data.isStreaming && r.data.pendingMessageCount === 0 ? calm + 1 : 0;
      await new Promise((res) => setTimeout(res, 200));
    }
  }
  async function prompt(message: string): Promise<void> {
    await quiet();
    const r = await command({ type: "prompt", message });
    assert.equal(r.success, true, `pi refused the prompt: ${r.error}`);
  }
  const toolEnd = (name: string) =>
    owner.waitFor((e) => e.type === "tool_execution_end" && e.toolName === name, 90_000) as Promise<
      Record<string, any>
    >;
  const sessionResults = (taskId: string) =>
    readFileSync(join(dir, "owner", "owner.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, any>)
      .filter((e) => e.customType === "crew-result" && e.details?.card?.subagent_id === taskId);

  /** The spawned task's id from the tool's result, checked as relayed to the builder. */
  async function spawnedRemote(end: Record<string, any>): Promise<AgentResult> {
    assert.equal(end.isError, false, JSON.stringify(end.result));
    const { subagent_id } = JSON.parse(end.result.content[0].text as string) as { subagent_id: string };
    const live = daemon.supervisor.tasks.get(subagent_id);
    assert.ok(live?.rec.remote, "relayed to another machine");
    assert.equal(live.rec.remote.label, "builder");
    const r = await cli.request("task.get", { taskId: subagent_id });
    assert.equal(r.agent.machine, "builder");
    assert.equal(r.agent.model, modelName, "a definition without a model runs on the owner's model, there too");
    return r;
  }

  async function oneDelivery(taskId: string, brief: string, reportText: string): Promise<void> {
    const seen = await until("the delivery in the owner's model context", () =>
      deliveriesSeen().find((d) => d.subagent_id === taskId),
    );
    // An isolated one's work is on its branch on that machine (this project's additive `work`).
    const r = await cli.request("task.get", { taskId });
    const work = r.worktree ? { work: { branch: r.worktree.branch, landed: false, machine: "builder" } } : {};
    assert.deepEqual(seen, {
      subagent_id: taskId,
      brief,
      result: { outcome: "completed", report: reportText },
      ...work,
    });
    await until("the crew-result in the owner's session", () => sessionResults(taskId).length > 0);
    const ownerId = daemon.supervisor.tasks.get(taskId)!.rec.owner;
    const id = `${taskId}-c1-completed`;
    await until("the delivery acked", async () =>
      (await readOutbox(home, ownerId)).some((r) => r.deliveryId === id && r.state === "acked"),
    );
    const queued = (await readOutbox(home, ownerId)).filter((r) => r.taskId === taskId && r.state === "queued");
    assert.deepEqual(
      queued.map((r) => r.deliveryId),
      [id],
      "one delivery for the settled cycle",
    );
    assert.equal(sessionResults(taskId).length, 1, "injected once");
  }

  test("crew_spawn with machine (and a cwd there): the result arrives as an ordinary delivery", async () => {
    await prompt("OWNER-ARG: delegate to the builder");
    const r = await spawnedRemote(await toolEnd("crew_spawn"));
    // The child worked as the remote user in a worktree of the remote repo (the bundled worker is isolated: auto).
    await until("the remote file", async () => {
      const t = await cli.request("task.get", { taskId: r.taskId });
      try {
        return t.worktree !== undefined && readFileSync(join(t.worktree.path, "remote.txt"), "utf8") === "made there\n";
      } catch {
        return false;
      }
    });
    assert.equal(existsSync(join(remoteRepo, "remote.txt")), false, "the remote checkout is untouched");
    await oneDelivery(r.taskId, "remote by arg", "Wrote remote.txt on the builder");
    const settled = await cli.request("task.get", { taskId: r.taskId });
    assert.equal(settled.status, "completed");
    assert.ok(settled.sessionPath?.startsWith(sshd.user.home), `the session is the remote's: ${settled.sessionPath}`);
  });

  test("a definition's machine: frontmatter runs the subagent there", async () => {
    await prompt("OWNER-DEF: delegate by definition");
    const r = await spawnedRemote(await toolEnd("crew_spawn"));
    await oneDelivery(r.taskId, "remote by definition", "Definition child done");
  });

  test("an unknown and an unreachable machine are tool errors the owner's model sees, with ssh's own line", async () => {
    const before = daemon.supervisor.tasks.size;
    await prompt("OWNER-BAD: two bad machines");
    const ends = [await toolEnd("crew_spawn"), await toolEnd("crew_spawn")];
    const errors = ends.map((e) => {
      assert.equal(e.isError, true, JSON.stringify(e.result));
      return (JSON.parse(e.result.content[0].text as string) as { error: string }).error;
    });
    const unknown = errors.find((e) => e.startsWith("MACHINE_UNKNOWN"));
    const down = errors.find((e) => e.startsWith("MACHINE_UNREACHABLE"));
    assert.ok(unknown, JSON.stringify(errors));
    assert.match(unknown, /atlantis/);
    assert.ok(down, JSON.stringify(errors));
    assert.match(down, /nowhere/);
    assert.match(down, /Connection refused/, "ssh's own line");
    // The model got them as its tool results.
    await until("the errors in the owner's next request", () =>
      ownerRequests().some((q) => texts(q).some((t) => t.includes("MACHINE_UNREACHABLE"))),
    );
    assert.equal(daemon.supervisor.tasks.size, before, "no task was created for either");
  });
});
