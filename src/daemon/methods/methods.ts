import { statSync } from "node:fs";
import { open } from "node:fs/promises";
import { join } from "node:path";
import { DshError } from "../../core/errors.js";
import { isSettledStatus } from "../../core/result/derive.js";
import type { AgentResult } from "../../core/types.js";
import { respondAs } from "../../core/lifecycle/task-cycle.js";
import { spawnTask } from "./spawn-method.js";
import { assertMayRaiseCaps } from "./cap-consent.js";
import { createLandHandlers } from "./land-methods.js";
import { createLinkHandlers } from "./link-methods.js";
import { respondOnce } from "./request-memo.js";
import { listTasks } from "./listing.js";
import type { Connection, HandlerTable } from "../server/server.js";
import type { Live } from "../task/live.js";
import type { Runner, SteerReply } from "../task/runner-types.js";
import type { Result } from "../../protocol/methods.js";
import type { MethodContext } from "./method-context.js";
import { knownOwners, resolveOwner, shownOwner, viewOf } from "../delivery/owner-view.js";
import { tamperedView } from "../../store/task-verify.js";

export type { MethodContext } from "./method-context.js";

/** task.patch answers at most this much of a diff.patch, so the reply fits one frame. */
const PATCH_REPLY_CAP = 512 * 1024;

/** Stored results already checked against their task dir, by the identity (size, mtime, inode) of the files read. */
const checkedResults = new Map<string, { key: string; result: AgentResult }>();
const CHECKED_MAX = 512;

/**
 * A result read back from disk (a closed task's) as it may be served: checked against its task dir as `verify` does,
 * so a result.json a leftover child process rewrote is named tampered instead of served with a forged `verified`.
 */
function checkedStored(dir: string, stored: AgentResult): AgentResult {
  const ids = ["result.json", "task.json", "events.jsonl"].map((f) => {
    const st = statSyncOrUndefined(join(dir, f));
    return st ? `${st.size}-${st.mtimeMs}-${st.ino}` : "";
  });
  const key = ids[0] ? ids.join("/") : "";
  const hit = checkedResults.get(stored.taskId);
  if (hit && key && hit.key === key) return hit.result;
  const { result } = tamperedView(dir, stored);
  if (key) {
    if (checkedResults.size >= CHECKED_MAX) checkedResults.delete(checkedResults.keys().next().value!);
    checkedResults.set(stored.taskId, { key, result });
  }
  return result;
}

function statSyncOrUndefined(path: string) {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

/** An owner connection may act only on its own tasks; the CLI (a person) may act on any. */
function mayAct(conn: Connection, live: Live): boolean {
  return conn.kind === "cli" || live.rec.owner === conn.ownerId;
}

/** Every request method the daemon serves but hello and frame.page (the server's own) and owner.* (delivery). */
export type TaskHandlers = Omit<HandlerTable, "hello" | "frame.page" | "owner.attach" | "owner.ack" | "owner.move">;

export function createHandlers(ctx: MethodContext): TaskHandlers {
  const { sup } = ctx;
  const cfg = () => sup.deps.config();

  const liveOf = (taskId: string): Runner => {
    const live = sup.tasks.get(taskId);
    if (!live) throw new DshError("TASK_NOT_FOUND", `no open task ${taskId}; list tasks with \`dsh-herdr list\``);
    return live;
  };
  const resultOf = async (taskId: string): Promise<AgentResult> => {
    const live = sup.tasks.get(taskId);
    if (live) {
      await live.chain;
      if (live.result) return live.result;
    }
    const stored = await sup.deps.store.readResult(taskId).catch(() => undefined);
    if (!stored) throw new DshError("TASK_NOT_FOUND", `no task ${taskId}; list tasks with \`dsh-herdr list\``);
    return checkedStored(sup.deps.store.taskPaths(taskId).dir, stored);
  };
  const owned = (conn: Connection, taskId: string): Runner => {
    const live = liveOf(taskId);
    if (!mayAct(conn, live))
      throw new DshError(
        "NOT_OWNER",
        `task ${taskId} belongs to owner ${shownOwner(conn, live.rec.owner)}; only its owner (or the CLI) may change it`,
      );
    return live;
  };

  return {
    "daemon.status": () => ctx.status(),
    "daemon.stop": () => {
      setImmediate(() => ctx.stop());
      return { stopping: true };
    },

    "task.spawn": (p, conn) => spawnTask(ctx, p, conn),

    "task.get": async (p, conn) => viewOf(conn, await resultOf(p.taskId)),

    "task.list": async (p, conn) => {
      const q = p.owner !== undefined ? { ...p, owner: resolveOwner(p.owner, () => knownOwners(sup)) } : p;
      const page = await listTasks(sup, q);
      const out: Result<"task.list"> = {
        ...page,
        tasks: page.tasks.map((t) => viewOf(conn, t)),
      };
      if (p.external) out.external = ctx.externalAgents ? await ctx.externalAgents() : [];
      return out;
    },

    "task.wait": async (p, conn) => {
      for (const id of p.taskIds) await resultOf(id);
      const mode = p.mode ?? "all";
      const done = () => {
        const settled = p.taskIds.filter((id) => {
          const live = sup.tasks.get(id);
          if (!live) return true; // closed earlier: its stored result is final
          // Settled by the machine and harvested: a queued follow-up or a pending settle harvest is not done yet.
          const ph = live.state.phase.name;
          return (ph === "settled" || ph === "closed") && isSettledStatus(sup.statusOf(live));
        });
        return mode === "any" ? settled.length > 0 : settled.length === p.taskIds.length;
      };
      let timedOut = false;
      if (!done()) {
        await new Promise<void>((resolve) => {
          // Only a status of a waited task can finish the wait: with 100 waits and 100 tasks settling, checking
          // every wait on every status was 10,000 checks a burst.
          const waited = new Set(p.taskIds);
          const off = sup.onStatus((live) => {
            if (waited.has(live.rec.taskId) && done()) finish();
          });
          const timer =
            p.timeoutMs !== undefined ? setTimeout(() => ((timedOut = true), finish()), p.timeoutMs) : undefined;
          function finish() {
            off();
            if (timer) clearTimeout(timer);
            resolve();
          }
        });
      }
      // After the record is written: a caller may read result.json next (`dsh-herdr show`).
      const results = await Promise.all(p.taskIds.map(async (id) => viewOf(conn, await resultOf(id))));
      return { results, timedOut };
    },

    "task.respond": async (p, conn) => {
      const live = owned(conn, p.taskId);
      await live.chain;
      assertMayRaiseCaps(cfg(), conn, live, p);
      // `steer`: a cycle in flight takes the message into its running turn (src/daemon/task/steer.ts). Without it a
      // running task is refused, as the pi-crew protocol has it for crew_respond.
      if (p.steer && respondAs(live.state.phase, sup.statusOf(live)) === "steer")
        return {
          taskId: p.taskId,
          subagent_id: p.taskId,
          ...(await steerOrRefuse(live, ctx.relay?.owns(live) === true, p.message)),
        };
      // Relay: a remote task's follow-up goes to its machine's daemon. A follow-up with a request id (a relaying
      // daemon's) runs once: a repeat gets the first answer (src/daemon/methods/request-memo.ts).
      const { cycle, queued } = ctx.relay?.owns(live)
        ? await ctx.relay.respond(live, p.message, p)
        : p.requestId !== undefined
          ? await respondOnce(sup, live, p.requestId, () => live.respond(p.message, p, p.requestId))
          : await live.respond(p.message, p);
      return { taskId: p.taskId, subagent_id: p.taskId, cycle, ...(queued ? { queued: true } : {}) };
    },

    "task.close": async (p, conn) => {
      const live = sup.tasks.get(p.taskId);
      if (!live) return viewOf(conn, await resultOf(p.taskId)); // already closed earlier: the stored record answers
      if (!mayAct(conn, live))
        throw new DshError(
          "NOT_OWNER",
          `task ${p.taskId} belongs to owner ${shownOwner(conn, live.rec.owner)}; only its owner (or the CLI) may close it`,
        );
      const closePane = p.closePane ?? cfg().closePaneOnDone;
      const result = ctx.relay?.owns(live) ? await ctx.relay.close(live, closePane) : await live.close(closePane);
      sup.tasks.delete(p.taskId);
      return viewOf(conn, result);
    },

    "task.abort": async (p, conn) => {
      const owner = conn.kind === "owner" ? conn.ownerId! : resolveOwner(p.owner ?? "cli", () => knownOwners(sup));
      const out = { aborted_ids: [] as string[], missing_ids: [] as string[], foreign_ids: [] as string[] };
      const ids = p.taskIds ?? [...sup.tasks.values()].filter((l) => l.rec.owner === owner).map((l) => l.rec.taskId);
      for (const id of ids) {
        const live = sup.tasks.get(id);
        if (!live || !sup.isOpen(live)) out.missing_ids.push(id);
        else if (conn.kind === "owner" && live.rec.owner !== conn.ownerId) out.foreign_ids.push(id);
        else if (await (ctx.relay?.owns(live) ? ctx.relay.abort(live) : live.abort())) out.aborted_ids.push(id);
        else out.missing_ids.push(id); // ended on its own meanwhile: nothing to abort
      }
      return out;
    },

    "task.subscribe": (p, conn) => {
      const ids = p.taskIds ? new Set(p.taskIds) : undefined;
      const owner = p.owner ? resolveOwner(p.owner, () => knownOwners(sup)) : undefined;
      const off = sup.onStatus((live, result) => {
        if (ids && !ids.has(live.rec.taskId)) return;
        if (owner && live.rec.owner !== owner) return;
        if (conn.kind === "owner" && live.rec.owner !== conn.ownerId) return;
        conn.push("task.status", { taskId: live.rec.taskId, status: result.status, result: viewOf(conn, result) });
      });
      conn.onClose(off);
      return { subscribed: true };
    },

    // The settled diff.patch's text, for a daemon that relays this task and keeps a copy (src/daemon/relay/relay.ts).
    "task.patch": async (p) => {
      await resultOf(p.taskId);
      const fh = await open(sup.deps.store.taskPaths(p.taskId).diffPatch, "r").catch(() => undefined);
      if (!fh) return { taskId: p.taskId, patch: null, truncated: false };
      try {
        const size = (await fh.stat()).size;
        const buf = Buffer.alloc(Math.min(size, PATCH_REPLY_CAP));
        await fh.read(buf, 0, buf.length, 0);
        return { taskId: p.taskId, patch: buf.toString("utf8"), truncated: size > PATCH_REPLY_CAP };
      } finally {
        await fh.close();
      }
    },

    // task.check, task.land (src/daemon/methods/land-methods.ts)
    ...createLandHandlers(ctx),
    // task.follow, task.fetch: what another machine's daemon relaying these tasks calls (src/daemon/methods/link-methods.ts)
    ...createLinkHandlers(ctx),

    "child.event": (p, conn) => sup.runnerOf(conn)?.childEvent(p) ?? { ok: true },
    "child.report": (p, conn) => sup.runnerOf(conn)?.childReport(p) ?? { ok: true },
  };
}

/** A steer of a local task; a task `relayed` to another machine is not steered from here (yet): refused by name. */
function steerOrRefuse(live: Pick<Runner, "rec" | "steer">, relayed: boolean, message: string): Promise<SteerReply> {
  if (relayed)
    throw new DshError(
      "BAD_STATE",
      `task ${live.rec.taskId} runs on machine ${live.rec.machine ?? "(remote)"}, whose running cycle cannot be steered from here; wait for its result (dsh-herdr wait ${live.rec.taskId}), then respond`,
    );
  return live.steer(message);
}
