// Reading a relayed task's result or diff.patch from its machine in pages (task.fetch, src/daemon/methods/link-methods.ts):
// a result of any size crosses the link in frames under the 1 MiB frame limit. Every page is checked (its task, its
// size against the bound, the same version as the first page); a violation is a RemoteViolation naming the field.
import { isSettledStatus } from "../../core/result/derive.js";
import { DshError } from "../../core/errors.js";
import type { AgentStatus } from "../../core/types.js";
import type { MachineLink } from "../../link/link.js";
import { checkSize, RemoteViolation } from "./remote-check.js";

/** The page size asked for (the remote's own cap is 512 KiB). */
const PAGE_BYTES = 512 * 1024;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export interface Fetched {
  cycle: number;
  status: AgentStatus;
  /** The remote's cycle is settled and harvested (or the task is closed there). */
  settled: boolean;
  /** false: the task has no such part there (no diff.patch). */
  exists: boolean;
  bytes: Buffer;
}

interface Page {
  taskId: string;
  part: string;
  cycle: number;
  status: AgentStatus;
  settled: boolean;
  exists: boolean;
  size: number;
  offset: number;
  data: string;
  version: string;
}

/** The page as the protocol promises it (schema/protocol/task.fetch.json), or a RemoteViolation. */
function checkPage(raw: unknown, taskId: string, part: string, offset: number): Page {
  const p = raw as Partial<Page> | null;
  const bad = (field: string, why: string) => new RemoteViolation(`task.fetch.${field}`, why);
  if (typeof p !== "object" || p === null) throw bad("result", "is not an object");
  if (p.taskId !== taskId) throw bad("taskId", `is ${String(p.taskId)}, not ${taskId}`);
  if (p.part !== part) throw bad("part", `is ${String(p.part)}, not ${part}`);
  if (!Number.isSafeInteger(p.cycle) || p.cycle! < 1) throw bad("cycle", "is not a cycle number");
  if (typeof p.status !== "string") throw bad("status", "is not a string");
  if (typeof p.settled !== "boolean" || typeof p.exists !== "boolean") throw bad("settled", "is not a boolean");
  if (p.settled && !isSettledStatus(p.status)) throw bad("status", `is ${p.status}, no settled status, yet settled`);
  if (!Number.isSafeInteger(p.size) || p.size! < 0) throw bad("size", "is not a byte count");
  if (p.offset !== offset) throw bad("offset", `is ${String(p.offset)}, not the ${offset} asked for`);
  if (typeof p.data !== "string" || !BASE64.test(p.data)) throw bad("data", "is not base64");
  if (typeof p.version !== "string") throw bad("version", "is not a string");
  return p as Page;
}

/**
 * The whole part, page by page, bounded by `maxBytes` (announced and actual size); started again (up to 3 times)
 * when its version changes meanwhile (a new harvest there), then REMOTE_CHANGING. Link errors pass through as they are.
 */
export async function fetchPart(
  link: MachineLink,
  taskId: string,
  part: "result" | "patch",
  maxBytes: number,
  timeoutMs: number,
): Promise<Fetched> {
  const field = part === "result" ? "result" : "diff.patch";
  for (let attempt = 0; attempt < 3; attempt++) {
    const get = async (offset: number) =>
      checkPage(
        await link.request("task.fetch", { taskId, part, offset, limit: PAGE_BYTES }, { timeoutMs }),
        taskId,
        part,
        offset,
      );
    const first = await get(0);
    checkSize(field, first.size, maxBytes);
    const chunks = [Buffer.from(first.data, "base64")];
    let got = chunks[0]!.length;
    let changed = false;
    while (got < first.size) {
      const page = await get(got);
      if (page.version !== first.version || page.size !== first.size) {
        changed = true;
        break;
      }
      const data = Buffer.from(page.data, "base64");
      if (data.length === 0) throw new RemoteViolation(`task.fetch.data`, `is empty at offset ${got} of ${first.size}`);
      chunks.push(data);
      got += data.length;
    }
    if (changed) continue;
    if (got !== first.size) throw new RemoteViolation(field, `is ${got} bytes, not the ${first.size} announced`);
    return {
      cycle: first.cycle,
      status: first.status,
      settled: first.settled,
      exists: first.exists,
      bytes: Buffer.concat(chunks),
    };
  }
  // Not a violation: a task that runs (or a follow-up under way) changes its result, and the machine said so by
  // its version. Refusing would settle the cycle failed on the machine's honest word. The caller says what next:
  // the relay reads a running task again later; a close fails and can be run again.
  throw new DshError(
    "REMOTE_CHANGING",
    `task ${taskId}'s ${field} changed there during each of 3 reads in pages; nothing of it was taken`,
  );
}
