// verify: each task's result.json rebuilt from its task dir (the journal replayed through the machine, the pinned
// harvest through the derivation, the session up to the pinned offset, result.md's pinned copy, diff.patch's digest)
// and compared field by field (src/core/verify.ts). Reads files only: no daemon needed.
import type { Command } from "commander";
import { createHash } from "node:crypto";
import { closeSync, constants, fstatSync, openSync, readFileSync, readSync } from "node:fs";
import { join } from "node:path";
import { DshError } from "../../core/errors.js";
import { SessionReader, type SessionFacts } from "../../core/session-reader.js";
import type { AgentResult } from "../../core/types.js";
import {
  checkTask,
  describeDifference,
  journalVerdict,
  type Difference,
  type JournalRecord,
  type VerifyRecord,
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
  /** What the task dir did not let verify check (a dir from before harvests were pinned, a relayed task). */
  unchecked?: string[];
}

export function registerVerifyCommand(program: Command, ctx: CliContext): void {
  const cmd = program
    .command("verify")
    .description(
      "rebuild each task's result from its task dir (journal, session, pinned result.md, diff.patch) and compare it with result.json (exit 1 naming each difference)",
    )
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
        for (const u of c.unchecked ?? []) ctx.io.out(`${c.taskId}  not checked: ${u}\n`);
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
  const text = readIfThere(join(dir, "result.json"));
  if (!text) return skip("no result.json yet");
  let result: AgentResult;
  try {
    result = JSON.parse(text.toString("utf8")) as AgentResult;
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
  const record = readRecord(join(dir, "task.json"));
  const patch = readIfThere(join(dir, "diff.patch"));
  const { differences, unchecked } = checkTask({
    events,
    result,
    ...(record ? { record } : {}),
    sessionUpTo: (offset) => sessionFactsUpTo(join(dir, "session.jsonl"), offset),
    readPinned: (name) => {
      if (!/^result\.c\d+\.md$/.test(name)) return undefined; // only the copies the daemon writes
      const buf = readIfThere(join(dir, name));
      return buf ? { text: buf.toString("utf8"), sha256: sha256(buf) } : undefined;
    },
    ...(patch ? { patch: { bytes: patch.length, sha256: sha256(patch) } } : {}),
  });
  return {
    taskId,
    ok: differences.length === 0,
    differences,
    ...(unchecked.length ? { unchecked } : {}),
  };
}

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** A regular file's bytes, or undefined (missing, or not a regular file: a FIFO must not hold verify in open(2)). */
function readIfThere(path: string): Buffer | undefined {
  const fd = openRegular(path);
  if (fd === undefined) return undefined;
  try {
    return readFileSync(fd);
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

function openRegular(path: string): number | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  if (!fstatSync(fd).isFile()) {
    closeSync(fd);
    return undefined;
  }
  return fd;
}

function readRecord(path: string): VerifyRecord | undefined {
  const buf = readIfThere(path);
  if (!buf) return undefined;
  try {
    const r = JSON.parse(buf.toString("utf8")) as VerifyRecord;
    return typeof r === "object" && r !== null && typeof r.taskId === "string" ? r : undefined;
  } catch {
    return undefined;
  }
}

function readJournal(path: string): JournalRecord[] {
  const text = readIfThere(path);
  if (!text) return [];
  const out: JournalRecord[] = [];
  for (const line of text.toString("utf8").split("\n")) {
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
function sessionFactsUpTo(path: string, offset: number): SessionFacts | undefined {
  const fd = openRegular(path);
  if (fd === undefined) return undefined;
  const reader = new SessionReader();
  try {
    for (let at = 0; at < offset; ) {
      // A fresh buffer per chunk: the reader keeps a partial line by reference.
      const buf = Buffer.allocUnsafe(Math.min(1024 * 1024, offset - at));
      const n = readSync(fd, buf, 0, buf.length, at);
      if (n === 0) break;
      reader.push(buf.subarray(0, n));
      at += n;
    }
  } finally {
    closeSync(fd);
  }
  return reader.facts();
}
