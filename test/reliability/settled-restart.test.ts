// A settled cycle is final across a daemon restart: a task whose pi never said hello settles failed (AGENT_STALLED)
// with no runtime handle left, the daemon is killed and started again on the same home (now with a real pi that
// would run it), and the task must not run again: still failed, no launch and no model request after the restart,
// the user's checkout untouched.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { git } from "../helpers/git.js";
import {
  cliClient,
  journal,
  makeRepo,
  sleep,
  startDaemonProc,
  startShared,
  until,
  type Shared,
} from "./proc-harness.js";

const SCRIPT: Script = {
  conversations: [
    {
      name: "edit",
      match: "MARK-SETTLED",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "feature.txt", content: "late\n" } }] },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "done" } }] },
        { text: "done" },
      ],
    },
  ],
};

let shared: Shared;
before(async () => {
  shared = await startShared(SCRIPT, "dsh-settled-");
});
after(async () => {
  await shared?.close();
});

test("a task that settled failed (AGENT_STALLED, no handle) is not started again by a restarted daemon", async () => {
  const repo = makeRepo(join(shared.dir, "r"));
  const home = join(shared.dir, "home");
  // A pi that answers --version and then never says hello: the launch stalls twice and the task settles failed.
  const mute = join(shared.dir, "mute-pi");
  writeFileSync(mute, '#!/bin/sh\nif [ "$1" = --version ]; then echo 0.73.1; exit 0; fi\nexec sleep 600\n');
  chmodSync(mute, 0o755);
  const first = await startDaemonProc(
    home,
    { ...shared.childEnv, DSH_HERDR_PI_BIN: mute },
    { config: { readinessTimeoutMs: 1500 } },
  );
  const cli = await cliClient(home);
  const { taskId } = await cli.request("task.spawn", {
    model: shared.modelName,
    cwd: repo,
    prompt: "MARK-SETTLED edit the checkout",
    isolated: false,
  });
  const failed = await until(
    "the task settled failed",
    async () => {
      const r = await cli.request("task.get", { taskId });
      return r.status === "failed" ? r : undefined;
    },
    60_000,
    200,
  );
  assert.equal(failed.error?.code, "AGENT_STALLED", JSON.stringify(failed.error));
  const launchesBefore = journal(home, taskId).filter((e) => e.type === "launched").length;
  const checkout = git(repo, "status", "--porcelain");
  cli.close();
  process.kill(first.pid, "SIGKILL");
  await first.exited;

  // The real pi now: a wrong start_again would run the script, write feature.txt into the checkout and settle it.
  const second = await startDaemonProc(home, shared.childEnv, { config: { readinessTimeoutMs: 20_000 } });
  try {
    const cli2 = await cliClient(home);
    await until("the recovery record", () => journal(home, taskId).some((e) => e.type === "recovered"), 30_000);
    // Long enough for a relaunched pi to reach the model and write its file.
    await sleep(8000);
    const after = await cli2.request("task.get", { taskId });
    cli2.close();
    const recovered = journal(home, taskId).filter((e) => e.type === "recovered");
    assert.deepEqual(
      recovered.map((e) => e.plan),
      ["keep_settled"],
      JSON.stringify(recovered),
    );
    assert.equal(after.status, "failed", JSON.stringify(after));
    assert.equal(after.error?.code, "AGENT_STALLED");
    assert.equal(journal(home, taskId).filter((e) => e.type === "launched").length, launchesBefore, "no new launch");
    assert.equal(
      shared.model.requests().filter((q) => q.conversation === "edit").length,
      0,
      "the model was never asked",
    );
    assert.equal(git(repo, "status", "--porcelain"), checkout, "the checkout is unchanged");
  } finally {
    second.proc.kill("SIGTERM");
    await second.exited;
  }
});
