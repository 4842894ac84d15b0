// verify: each task's result.json checked against its task dir (the journal's verdict, the session up to the offset
// the settled record pinned, diff.patch), field by field (src/core/verify.ts). Reads files only: no daemon needed.
import type { Command } from "commander";
import { closeSync, existsSync, openSync, readFileSync, readSync, statSync } from "node:fs";
import { join } from "node:path";
import { DshError } from "../../core/errors.js";
import { SessionReader } from "../../core/session-reader.js";
import type { AgentResult } from "../../core/types.js";
import {
  describeDifference,
  journalVerdict,
  verifyTask,
  type Difference,
  type JournalRecord,
} from "../../core/verify.js";
import type { CliContext } from "../context.js";
import { EXIT } from "../exit-codes.js";
import { printJson } from "../io.js";
import { knownTaskIds, resolveId, taskDir } from "../task-files.js";
import { examples, jsonOption } from "./shared.js";

export interface TaskVerification {
  taskId: string;
  ok: boolean;
  /** Why the task was not checked (no result.json yet, a cycle still running). */
  skipped?: string;
  differences: Difference[];
}

export function registerVerifyCommand(program: Command, ctx: CliContext): void {
  const cmd = program
    .command("verify")
    .description("check each task's result.json against its journal, session and diff (exit 1 naming each difference)")
    .argument("[ids...]", "task ids, unique suffixes or prefixes")
    .option("--all", "every task in the home");
  jsonOption(cmd);
  examples(cmd, ["dsh-herdr verify tmg3", "dsh-herdr verify --all --json | jq '.[] | select(.ok | not)'"]);
  cmd.action((ids: string[], o: { all?: boolean; json?: boolean }) => {
    if (!o.all && ids.length === 0)
      throw new DshError("BAD_PARAMS", "verify needs task ids or --all (e.g. dsh-herdr verify --all)", { usage: true });
    if (o.all && ids.length > 0)
      throw new DshError("BAD_PARAMS", "verify takes task ids or --all, not both", { usage: true });
    const taskIds = o.all ? knownTaskIds(ctx.home) : ids.map((id) => resolveId(ctx.home, id));
    const checked = taskIds.map((taskId) => verifyTaskDir(taskDir(ctx.home, taskId), taskId));
    if (o.json) printJson(ctx.io, checked);
    else {
      for (const c of checked) {
        if (c.skipped) ctx.io.out(`${c.taskId}  skipped: ${c.skipped}\n`);
        else if (c.ok) ctx.io.out(`${c.taskId}  ok\n`);
        else for (const d of c.differences) ctx.io.out(`${c.taskId}  ${describeDifference(d)}\n`);
      }
      const bad = checked.filter((c) => !c.ok).length;
      const skipped = checked.filter((c) => c.skipped).length;
      ctx.io.out(
        `${checked.length - bad - skipped} agree, ${bad} differ${skipped ? `, ${skipped} skipped` : ""} (of ${checked.length})\n`,
      );
    }
    if (checked.some((c) => !c.ok)) ctx.exitCode = EXIT.failed;
  });
}

export function verifyTaskDir(dir: string, taskId: string): TaskVerification {
  const skip = (why: string): TaskVerification => ({ taskId, ok: true, skipped: why, differences: [] });
  const resultPath = join(dir, "result.json");
  if (!existsSync(resultPath)) return skip("no result.json yet");
  let result: AgentResult;
  try {
    result = JSON.parse(readFileSync(resultPath, "utf8")) as AgentResult;
  } catch (e) {
    const why = `result.json is not JSON (${(e as Error).message})`;
    return {
      taskId,
      ok: false,
      differences: [{ field: "result.json", stored: why, expected: "JSON", source: "the file" }],
    };
  }
  const events = readJournal(join(dir, "events.jsonl"));
  const j = journalVerdict(events);
  if (
    j.lastStatus === undefined ||
    !["completed", "failed", "gone", "interrupted", "blocked", "closed"].includes(j.lastStatus)
  )
    return skip(`not settled yet (${j.lastStatus ?? result.status})`);
  const session =
    result.agent.machine === undefined && j.sessionOffset !== undefined
      ? sessionFactsUpTo(join(dir, "session.jsonl"), j.sessionOffset)
      : undefined;
  const patch = join(dir, "diff.patch");
  const differences = verifyTask({
    events,
    result,
    ...(session ? { session } : {}),
    ...(existsSync(patch) ? { patchBytes: statSync(patch).size } : {}),
  });
  return { taskId, ok: differences.length === 0, differences };
}

function readJournal(path: string): JournalRecord[] {
  if (!existsSync(path)) return [];
  const out: JournalRecord[] = [];
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (!line.trim()) continue;
    try {
      const e = JSON.parse(line) as unknown;
      if (typeof e === "object" && e !== null && typeof (e as { type?: unknown }).type === "string")
        out.push(e as JournalRecord);
    } catch {
      /* a torn last line: the journal's reader skips it too */
    }
  }
  return out;
}

/** The session's facts from its first `offset` bytes (what the harvest had read), in 1 MiB chunks. */
function sessionFactsUpTo(path: string, offset: number) {
  if (!existsSync(path)) return undefined;
  const reader = new SessionReader();
  const fd = openSync(path, "r");
  try {
    const buf = Buffer.alloc(1024 * 1024);
    for (let at = 0; at < offset; ) {
      const n = readSync(fd, buf, 0, Math.min(buf.length, offset - at), at);
      if (n === 0) break;
      reader.push(buf.subarray(0, n));
      at += n;
    }
  } finally {
    closeSync(fd);
  }
  return reader.facts();
}
