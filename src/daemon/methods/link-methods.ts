// The methods another machine's daemon calls over its link (src/daemon/relay/relay.ts), served here like any other:
// task.follow pushes every status with its cycle and whether it is the cycle's settled result (so the relaying
// daemon records a settle the moment it happens, instead of asking with task.wait rounds), and task.fetch reads a
// task's result or diff.patch in pages, so a result of any size crosses the link in frames under the 1 MiB limit.
import { createHash } from "node:crypto";
import { open, stat } from "node:fs/promises";
import { DshError } from "../../core/errors.js";
import { isSettledStatus } from "../../core/result/derive.js";
import type { AgentResult } from "../../core/types.js";
import type { TaskRecordBase } from "../../store/task-store.js";
import type { MethodContext } from "./method-context.js";
import { viewOf } from "../delivery/owner-view.js";
import type { HandlerTable } from "../server/server-types.js";

/** A followed result larger than this is pushed without its body (`bytes` only); the reader fetches it in pages. */
export const FOLLOW_INLINE_MAX = 256 * 1024;
/** The largest page task.fetch answers (base64 makes it 4/3 of this in the frame). */
export const FETCH_PAGE_MAX = 512 * 1024;

interface Serialized {
  bytes: Buffer;
  /** Asked for by task.fetch only (a push needs no digest). */
  version?: string;
}

/** One serialization per result object: a result is pushed, then its pages are read, without re-encoding it. */
const encoded = new WeakMap<AgentResult, Serialized>();

function serialize(result: AgentResult): Serialized {
  let s = encoded.get(result);
  if (!s) {
    s = { bytes: Buffer.from(JSON.stringify(result), "utf8") };
    encoded.set(result, s);
  }
  return s;
}

function versionOf(s: Serialized): string {
  s.version ??= createHash("sha256").update(s.bytes).digest("hex").slice(0, 32);
  return s.version;
}

export function createLinkHandlers(ctx: MethodContext): Pick<HandlerTable, "task.follow" | "task.fetch"> {
  const { sup } = ctx;

  /** The task's current result, cycle, and whether that cycle is settled and harvested (task.wait's "done"). */
  const current = async (taskId: string): Promise<{ result: AgentResult; cycle: number; settled: boolean }> => {
    const live = sup.tasks.get(taskId);
    if (live) {
      await live.chain;
      if (live.result) {
        const ph = live.state.phase.name;
        const settled = (ph === "settled" || ph === "closed") && isSettledStatus(sup.statusOf(live));
        return { result: live.result, cycle: live.rec.cycle, settled };
      }
    }
    const stored = await sup.deps.store.readResult(taskId).catch(() => undefined);
    if (!stored) throw new DshError("TASK_NOT_FOUND", `no task ${taskId}; list tasks with \`dsh-herdr list\``);
    const rec = await sup.deps.store.readTask<TaskRecordBase & { cycle?: number }>(taskId).catch(() => undefined);
    return { result: stored, cycle: rec?.cycle ?? 1, settled: isSettledStatus(stored.status) };
  };

  return {
    "task.follow": (_p, conn) => {
      const off = sup.onStatus((live, raw, info) => {
        if (conn.kind === "owner" && live.rec.owner !== conn.ownerId) return;
        const result = viewOf(conn, raw); // owner ids as task.subscribe shows them (src/daemon/delivery/owner-view.ts)
        const { bytes } = serialize(result);
        conn.push("task.followed", {
          taskId: live.rec.taskId,
          cycle: live.rec.cycle,
          status: result.status,
          settled: info.settled,
          bytes: bytes.length,
          ...(bytes.length <= FOLLOW_INLINE_MAX ? { result } : {}),
        });
      });
      conn.onClose(off);
      return { following: true };
    },

    "task.fetch": async (p, conn) => {
      const found = await current(p.taskId);
      const now = { ...found, result: viewOf(conn, found.result) };
      const offset = p.offset ?? 0;
      const limit = Math.min(p.limit ?? FETCH_PAGE_MAX, FETCH_PAGE_MAX);
      const head = {
        taskId: p.taskId,
        part: p.part,
        cycle: now.cycle,
        status: now.result.status,
        settled: now.settled,
        offset,
      };
      if (p.part === "result") {
        const s = serialize(now.result);
        const { bytes } = s;
        const data = bytes.subarray(Math.min(offset, bytes.length), Math.min(offset + limit, bytes.length));
        return { ...head, exists: true, size: bytes.length, data: data.toString("base64"), version: versionOf(s) };
      }
      const path = sup.deps.store.taskPaths(p.taskId).diffPatch;
      const st = await stat(path).catch(() => undefined);
      if (!st?.isFile()) return { ...head, exists: false, size: 0, data: "", version: "none" };
      const fh = await open(path, "r");
      try {
        const want = Math.max(0, Math.min(limit, st.size - offset));
        const buf = Buffer.alloc(want);
        const { bytesRead } = await fh.read(buf, 0, want, offset);
        return {
          ...head,
          exists: true,
          size: st.size,
          data: buf.subarray(0, bytesRead).toString("base64"),
          version: `${st.ino}-${st.size}-${st.mtimeMs}`,
        };
      } finally {
        await fh.close();
      }
    },
  };
}
