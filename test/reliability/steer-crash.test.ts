// A steer survives a daemon crash like a follow-up (issue 25 item 8): journaled before the push, never given to pi
// twice. The daemon (its own process) SIGKILLs itself right after the durable `steered` record (the push never
// happened), or right after the child answered that pi took the steer (`steer_answer`: pi has it, the journal does
// not say so). The daemon is started again on the same home; the child reconnects, gets the pending steer pushed
// again and takes it (or, having taken it, only says so again). Real pi against the scripted model: the child's own
// session and the model's requests show the steer exactly once, within the one cycle, and the result says pi used it.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import type { RecordedRequest } from "../../fixtures/scripted-model/server.js";
import type { DaemonClient } from "../../src/client/index.js";
import { describeDifference } from "../../src/core/lifecycle/verify.js";
import { verifyTaskDir } from "../../src/cli/commands/verify.js";
import {
  cliClient,
  journal,
  makeRepo,
  startDaemonProc,
  startShared,
  until,
  type DaemonProc,
  type Shared,
} from "./proc-harness.js";
import { killUnder } from "../helpers/procs.js";

const report = (text: string) => ({
  toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: text } }],
});
const SCRIPT: Script = {
  conversations: [
    {
      name: "steer",
      match: "MARK-SCRASH",
      steps: [
        // The request that carries the steer: one more slow tool call, so the cycle still runs while a restarted
        // daemon comes back; the report follows.
        {
          match: "/STEER-NOTE-\\w+/",
          matchIn: "sinceAssistant",
          toolCalls: [{ name: "write", arguments: { path: "steer.txt", content: "steered\n" } }],
          delayMs: 3000,
        },
        // The first answer takes long: the steer, the crash and the restart all happen while pi waits for it.
        { toolCalls: [{ name: "write", arguments: { path: "a.txt", content: "a\n" } }], delayMs: 9000 },
        report("never steered"),
        report("took the steer"),
      ],
    },
  ],
};

let shared: Shared;
before(async () => {
  shared = await startShared(SCRIPT, "dsh-steer-crash-");
});
after(async () => {
  await shared?.close();
});

function texts(r: RecordedRequest): string[] {
  const body = r.body as { messages?: { content?: unknown }[] };
  return (body.messages ?? []).map((m) =>
    typeof m.content === "string"
      ? m.content
      : Array.isArray(m.content)
        ? m.content.map((c: { text?: string }) => c.text ?? "").join("")
        : "",
  );
}

/** User messages in the child's own session carrying `text`: how often pi really got it. */
function userMessagesWith(home: string, taskId: string, text: string): number {
  const p = join(home, "tasks", taskId, "session.jsonl");
  if (!existsSync(p)) return 0;
  let n = 0;
  for (const line of readFileSync(p, "utf8").split("\n")) {
    if (!line.trim()) continue;
    const e = JSON.parse(line) as { type?: string; message?: { role?: string; content?: unknown } };
    if (e.type === "message" && e.message?.role === "user" && JSON.stringify(e.message.content).includes(text)) n++;
  }
  return n;
}

for (const point of ["steered", "steer_answer"]) {
  test(`a daemon crash at ${point}: the steer reaches pi once, in the same cycle, and the cycle completes with it`, async () => {
    const dir = join(shared.dir, point);
    const repo = makeRepo(shared.dir, `repo-${point}`);
    const home = join(dir, "home");
    const marker = `MARK-SCRASH ${point}`;
    const note = `STEER-NOTE-${point.replace("_", "")} keep the old API`;
    let d: DaemonProc = await startDaemonProc(home, shared.childEnv, { env: { DSH_HERDR_CRASH_AT: point } });
    let cli: DaemonClient = await cliClient(home);
    try {
      const { taskId } = await cli.request("task.spawn", {
        model: shared.modelName,
        cwd: repo,
        prompt: marker,
        isolated: true,
      });
      await until(
        "the cycle running with the model's first request held",
        async () =>
          (await cli.request("task.get", { taskId })).status === "running" &&
          shared.model.requests().some((r) => texts(r).some((t) => t.includes(marker)))
            ? true
            : undefined,
        60_000,
      );
      // The respond dies with the daemon (its reply never comes); the steer's record is durable.
      await assert.rejects(
        cli.request("task.respond", { taskId, message: note, steer: true }),
        (e: { code?: string }) => e.code === "DAEMON_UNAVAILABLE" || e.code === "TIMEOUT",
      );
      assert.equal(await d.exited, "SIGKILL", d.stderr());
      assert.equal(journal(home, taskId).filter((e) => e.type === "steered").length, 1);
      cli.close();

      d = await startDaemonProc(home, shared.childEnv);
      cli = await cliClient(home);
      const w = await cli.request("task.wait", { taskIds: [taskId], timeoutMs: 90_000 }, { timeoutMs: 95_000 });
      const r = w.results[0]!;
      assert.equal(w.timedOut, false);
      assert.equal(r.status, "completed", JSON.stringify(r));
      assert.equal(r.summary, "took the steer");
      assert.deepEqual(r.warnings ?? [], []);

      // pi got the steer once: its own session, and every request to the model carries it at most once.
      assert.equal(userMessagesWith(home, taskId, note), 1, "the steer in the child's session once");
      const reqs = shared.model.requests().filter((q) => texts(q).some((t) => t.includes(marker)));
      for (const q of reqs) assert.ok(texts(q).filter((t) => t.includes(note)).length <= 1);
      assert.equal(userMessagesWith(home, taskId, marker), 1, "one prompt: the steer started no cycle");
      const j = journal(home, taskId);
      assert.deepEqual(
        j.filter((e) => e.type.startsWith("steer")).map((e) => e.type),
        ["steered", "steer_taken"],
        JSON.stringify(j.map((e) => e.type)),
      );
      assert.equal(j.filter((e) => e.type === "respond").length, 0);
      assert.equal(j.filter((e) => e.type === "settle").length, 1);

      await cli.request("task.close", { taskId, closePane: true });
      const v = verifyTaskDir(join(home, "tasks", taskId), taskId);
      assert.deepEqual(v.differences.map(describeDifference), []);
    } finally {
      cli.close();
      d.proc.kill("SIGTERM");
      await d.exited;
      killUnder(dir);
      killUnder(repo);
    }
  });
}
