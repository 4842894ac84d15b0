// A real owner pi whose home has no daemon running: its first crew_spawn starts the daemon, as `dsh-herdr spawn`
// does, and the TUI says so; the spawn then goes through. (The other owner files run a daemon in the test process.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { execa } from "execa";
import { join } from "node:path";
import { startRpcPi } from "../../fixtures/scripted-model/rpc-child.js";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { daemonStatus, stopDaemon } from "../../src/client/daemon-control.js";
import { dshBin } from "../helpers/cli.js";
import { initRepo } from "../helpers/git.js";
import { startPiHarness } from "../helpers/pi.js";
import { rpcCommand, until } from "../helpers/wait.js";
import { ownerExt } from "./owner-harness.js";

const SCRIPT: Script = {
  conversations: [
    {
      name: "child",
      match: "CHILD-START",
      steps: [{ toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "Done." } }] }],
    },
    {
      name: "owner",
      steps: [
        {
          toolCalls: [
            {
              name: "crew_spawn",
              arguments: {
                subagent: "worker",
                brief: "start check",
                task: { goal: "CHILD-START", context: [], instructions: ["Report with crew_report."] },
              },
            },
          ],
        },
        { text: "Spawned." },
      ],
    },
  ],
};

test("crew_spawn with no daemon running starts it, says so in the TUI, and spawns", { timeout: 180_000 }, async () => {
  const h = await startPiHarness({ script: SCRIPT, prefix: "dsh-owner-start-" });
  const home = join(h.dir, "dsh-home");
  const env = { ...h.env, DSH_HERDR_HOME: home };
  // Headless, so the worker opens no pane on the user's tmux server.
  execFileSync(process.execPath, [dshBin, "config", "set", "runtime", "headless"], { env: { ...process.env, ...env } });
  const repo = initRepo(h.dir);
  const pi = startRpcPi({
    env,
    cwd: repo,
    sessionPath: join(h.dir, "owner.jsonl"),
    model: h.modelName,
    extensionPaths: [ownerExt],
    lifetimeMs: 150_000,
  });
  try {
    assert.equal((await daemonStatus(home)).running, false);
    const r = await rpcCommand(pi, { type: "prompt", message: "delegate this" });
    assert.equal(r.success, true, r.error);
    const end = await until(
      "crew_spawn's result",
      () => pi.events.find((e) => e.type === "tool_execution_end" && e.toolName === "crew_spawn"),
      90_000,
    );
    assert.equal(end.isError, false, JSON.stringify(end.result));
    const notice = pi.events.find(
      (e) => e.type === "extension_ui_request" && e.method === "notify" && /started the daemon/.test(String(e.message)),
    );
    assert.ok(notice, "the TUI was told the daemon was started");
    assert.match(String(notice.message), new RegExp(`started the daemon \\(pid \\d+\\) at ${home}`));
    assert.equal((await daemonStatus(home)).running, true);
  } finally {
    // The worker settles on its own (it reports at once); closing it ends its headless child. Not execFileSync: the
    // scripted model the worker calls runs on this process's event loop.
    const cli = (...args: string[]) =>
      execa(process.execPath, [dshBin, ...args], { env: { ...process.env, ...env }, reject: false, stdin: "ignore" });
    const { tasks } = JSON.parse((await cli("list", "--json")).stdout) as { tasks: { taskId: string }[] };
    for (const t of tasks) await cli("wait", t.taskId, "--timeout", "60s");
    await cli("close", "--settled", "--yes");
    await stopDaemon(home).catch(() => undefined);
    await pi.close();
    await h.cleanup();
  }
});
