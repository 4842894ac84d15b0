// A task's session file truncated or replaced mid-task (issue 13 §5), under a real pi child: while pi waits on the
// scripted model, the test cuts the file back to its header (same inode, smaller), or swaps in a longer copy under
// the same name (a new inode). The reader starts again from 0: the result warns, and usage matches the file as it is
// at the end (recomputed, not frozen at the old file's count nor read from the middle of a line).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, renameSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { cliClient, makeRepo, startDaemonProc, startShared, until, type Shared } from "./proc-harness.js";
import { killUnder } from "../helpers/procs.js";

const conversation = (mark: string) => ({
  name: mark,
  match: mark,
  steps: [
    { toolCalls: [{ name: "write", arguments: { path: `${mark}.txt`, content: "one\n" } }] },
    // The test swaps the file during this delay (pi writes nothing while it waits on the model).
    {
      toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: `${mark} reported` } }],
      delayMs: 6000,
    },
    { text: `${mark} done` },
  ],
});
const SCRIPT: Script = { conversations: [conversation("MARK-TRUNCATE"), conversation("MARK-REPLACE")] };

let shared: Shared;
before(async () => {
  shared = await startShared(SCRIPT, "dsh-sessrepl-");
});
after(async () => {
  // Backstop: children a failed test left running (only processes inside its own temp dir).
  if (shared) killUnder(shared.dir);
  await shared?.close();
});

type Line = { type: string; message?: { role?: string; content?: { type: string }[] } };
function usageOfFile(path: string): { assistant: number; toolCalls: number } {
  const lines = readFileSync(path, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Line);
  const assistants = lines.filter((l) => l.type === "message" && l.message?.role === "assistant");
  return {
    assistant: assistants.length,
    toolCalls: assistants.reduce(
      (n, a) => n + (a.message?.content ?? []).filter((b) => b.type === "toolCall").length,
      0,
    ),
  };
}

for (const how of ["truncate", "replace"] as const) {
  test(`session file ${how === "truncate" ? "truncated to its header (smaller, same inode)" : "replaced by a longer copy (new inode)"} mid-task: read again from 0, the result warns, usage recomputed`, async () => {
    const dir = join(shared.dir, how);
    const repo = makeRepo(dir);
    const home = join(dir, "home");
    const d = await startDaemonProc(home, shared.childEnv);
    const cli = await cliClient(home);
    try {
      const mark = how === "truncate" ? "MARK-TRUNCATE" : "MARK-REPLACE";
      const { taskId } = await cli.request("task.spawn", {
        model: shared.modelName,
        cwd: repo,
        prompt: `${mark} go`,
        isolated: true,
      });
      const sessionPath = (await cli.request("task.get", { taskId })).sessionPath!;
      // The write's tool result is in the file: pi now waits (6 s) for the model's next answer.
      await until(
        "the first tool result in the session",
        () => {
          try {
            return readFileSync(sessionPath, "utf8").includes('"role":"toolResult"') ? true : undefined;
          } catch {
            return undefined;
          }
        },
        60_000,
      );
      const text = readFileSync(sessionPath, "utf8");
      const header = text.slice(0, text.indexOf("\n") + 1);
      const inode = statSync(sessionPath).ino;
      if (how === "truncate") {
        truncateSync(sessionPath, header.length);
      } else {
        // Same entries after a long extra line: bytes at the old offset are now mid-line.
        const pad =
          JSON.stringify({
            type: "custom",
            customType: "rotation-note",
            data: { note: "x".repeat(4096) },
            id: "feedbeef",
            parentId: null,
            timestamp: new Date().toISOString(),
          }) + "\n";
        writeFileSync(`${sessionPath}.new`, header + pad + text.slice(header.length));
        renameSync(`${sessionPath}.new`, sessionPath);
        assert.notEqual(statSync(sessionPath).ino, inode);
      }
      const w = await cli.request("task.wait", { taskIds: [taskId], timeoutMs: 90_000 }, { timeoutMs: 95_000 });
      const r = w.results[0]!;
      assert.equal(r.status, "completed", JSON.stringify(r));
      assert.ok(
        (r.warnings ?? []).some((x) => /session file was truncated or replaced mid-task/.test(x)),
        JSON.stringify(r.warnings),
      );
      assert.ok(!(r.warnings ?? []).some((x) => /invalid line/.test(x)), JSON.stringify(r.warnings));
      const inFile = usageOfFile(sessionPath);
      assert.equal(r.usage?.assistant, inFile.assistant, JSON.stringify({ usage: r.usage, inFile }));
      assert.equal(r.usage?.toolCalls, inFile.toolCalls, JSON.stringify({ usage: r.usage, inFile }));
      // The truncated file lost the first write call; the replaced one still holds it.
      assert.equal(inFile.toolCalls, how === "truncate" ? 1 : 2);
      await cli.request("task.close", { taskId });
    } finally {
      cli.close();
      d.proc.kill("SIGTERM");
      await d.exited;
    }
  });
}
