// Socket method handlers: params are already schema-checked; here live the domain rules (ownership, states).
import { open, realpath, stat } from "node:fs/promises";
import { sep } from "node:path";
import { DshError } from "../core/errors.js";
import { isSettledStatus } from "../core/derive.js";
import { resolveSpawnModel } from "../core/model-choice.js";
import type { AgentResult, Role, RuntimeKind } from "../core/types.js";
import { assertOwnerId } from "../store/outbox.js";
import { requireRepo } from "../git/repo.js";
import { listTasks, type ListPage, type ListParams } from "./listing.js";
import type { CreatedWorktree } from "../git/worktree.js";
import { dropStartedWorktree, knownRepo, startWorktree } from "./pipeline.js";
import type { TaskPrompt } from "./prompt.js";
import type { Connection, Handler } from "./server.js";
import type { Live, Supervisor } from "./supervisor.js";
import type { RequestMethod } from "./protocol.js";
import type { Relay } from "../remote/relay.js";

export interface SpawnParams {
  kind?: "pi";
  model?: string;
  thinking?: string;
  role?: Role;
  cwd: string;
  prompt?: string;
  task?: TaskPrompt;
  brief?: string;
  isolated?: boolean;
  owner?: string;
  timeoutMs?: number;
  machine?: string;
  runtime?: RuntimeKind;
  ownerPaneId?: string;
}

export interface MethodContext {
  sup: Supervisor;
  defaultRuntime(): Promise<RuntimeKind>;
  status(): Record<string, unknown>;
  stop(): void;
  externalAgents?(): Promise<Record<string, unknown>[]>;
  /** Tasks on other machines (src/remote/relay.ts); absent in tests that build handlers without one. */
  relay?: Relay;
}

/** task.patch answers at most this much of a diff.patch, so the reply fits one frame. */
const PATCH_REPLY_CAP = 512 * 1024;

const ownerOf = (conn: Connection, explicit?: string): string => explicit ?? conn.ownerId ?? "cli";

/** An owner connection may act only on its own tasks; the CLI (a person) may act on any. */
function mayAct(conn: Connection, live: Live): boolean {
  return conn.kind === "cli" || live.rec.owner === conn.ownerId;
}

export function createHandlers(ctx: MethodContext): Partial<Record<RequestMethod, Handler>> {
  const { sup } = ctx;
  const cfg = () => sup.deps.config();

  const liveOf = (taskId: string): Live => {
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
    return stored;
  };
  const owned = (conn: Connection, taskId: string): Live => {
    const live = liveOf(taskId);
    if (!mayAct(conn, live))
      throw new DshError(
        "NOT_OWNER",
        `task ${taskId} belongs to owner ${live.rec.owner}; only its owner (or the CLI) may change it`,
      );
    return live;
  };

  return {
    "daemon.status": () => ctx.status(),
    "daemon.stop": () => {
      setImmediate(() => ctx.stop());
      return { stopping: true };
    },

    "task.spawn": async (p: SpawnParams, conn: Connection) => {
      const c = cfg();
      if (!c.enabled)
        throw new DshError(
          "SPAWN_REFUSED",
          "spawning is disabled (enabled:false in config.json); set it with `dsh-herdr config set enabled true`",
        );
      const owner = assertOwnerId(ownerOf(conn, p.owner));
      if (conn.kind === "owner" && owner !== conn.ownerId)
        throw new DshError(
          "NOT_OWNER",
          `an owner connection spawns only for itself (${conn.ownerId}); drop params.owner`,
        );
      // Relay: a label under config.json `machines` runs on that machine's daemon, through its link (cwd is a path there).
      if (p.machine !== undefined && ctx.relay?.knows(p.machine)) return ctx.relay.spawn(p, owner);
      const st = await stat(p.cwd).catch(() => undefined);
      if (!st?.isDirectory())
        throw new DshError(
          "BAD_PARAMS",
          `cwd ${p.cwd} is not an existing directory; pass the absolute path of the repository to work in`,
        );
      const cwd = await realpath(p.cwd);
      if (c.allowCwd.length > 0) {
        const allowed = await Promise.all(c.allowCwd.map((a) => realpath(a).catch(() => a)));
        if (!allowed.some((a) => cwd === a || cwd.startsWith(a.endsWith(sep) ? a : a + sep))) {
          throw new DshError(
            "CWD_NOT_ALLOWED",
            `cwd ${cwd} is outside allowCwd (${allowed.join(", ")}); add it with \`dsh-herdr config set allowCwd ...\` or work in an allowed directory`,
          );
        }
      }
      const repo = p.isolated ? await requireRepo(cwd) : undefined; // no git process: the worktree add is the one
      const model = resolveSpawnModel(p.model, c); // undefined: pi's own default model (no --model)
      const runtime: RuntimeKind = p.runtime ?? (c.runtime !== "auto" ? c.runtime : await ctx.defaultRuntime());
      // Only Herdr can place a child on another machine; anything else would run here under a false label.
      if (p.machine !== undefined && runtime !== "herdr") {
        throw new DshError(
          "MACHINE_UNKNOWN",
          `machine ${JSON.stringify(p.machine)} is not in config.json machines and runtime ${runtime} is local only; add it with \`dsh-herdr machine add ${p.machine} --ssh USER@HOST\`, drop --machine, or use the herdr runtime with a machine Herdr knows`,
        );
      }
      // Reserve-then-record: the slot (or queue place) is taken synchronously, so concurrent spawns cannot overshoot.
      const slotKey = `pending-${Math.random().toString(36).slice(2)}`;
      const slot = sup.admission.acquire(slotKey);
      const queued = !sup.admission.holds(slotKey);
      const createdAt = Date.now();
      let live: Live;
      let worktree: Promise<CreatedWorktree> | undefined;
      try {
        const rec = await sup.deps.store.createTask(
          (taskId) =>
            sup.newRecord(
              {
                taskId,
                owner,
                cwd,
                kind: "pi",
                role: p.role ?? "worker",
                model,
                thinking: p.thinking ?? c.defaultThinking,
                isolated: p.isolated ?? false,
                timeoutMs: p.timeoutMs ?? c.defaultTimeoutMs,
                runtime,
                createdAt,
                ...(p.brief !== undefined ? { brief: p.brief } : {}),
                ...(p.prompt !== undefined ? { prompt: p.prompt } : {}),
                ...(p.task !== undefined ? { task: p.task } : {}),
                ...(p.machine !== undefined ? { machine: p.machine } : {}),
                ...(p.ownerPaneId !== undefined ? { ownerPaneId: p.ownerPaneId } : {}),
              },
              taskId,
            ),
          createdAt,
          { sync: false }, // nothing runs yet; the launch is journaled durably
          (taskId) => {
            if (repo && !queued) worktree = startWorktree(sup, cwd, repo.root, taskId);
          },
        );
        live = sup.register(rec);
      } catch (e) {
        if (repo && worktree) dropStartedWorktree(sup, repo.root, worktree);
        sup.admission.cancel(slotKey, e as Error);
        sup.admission.release(slotKey);
        slot.catch(() => undefined);
        throw e;
      }
      // The reservation (slot or queue place) now belongs to the task id.
      sup.admission.rekey(slotKey, live.rec.taskId);
      await sup.refresh(live);
      if (repo) knownRepo.set(live, worktree ? { ...repo, worktree } : repo);
      void sup.run(live, slot);
      return {
        taskId: live.rec.taskId,
        subagent_id: live.rec.taskId,
        name: live.rec.name,
        status: live.rec.status,
        queued,
      };
    },

    "task.get": async (p: { taskId: string }) => resultOf(p.taskId),

    "task.list": async (p: ListParams & { external?: boolean }) => {
      const out: ListPage & { external?: Record<string, unknown>[] } = await listTasks(sup, p);
      if (p.external) out.external = ctx.externalAgents ? await ctx.externalAgents() : [];
      return out;
    },

    "task.wait": async (p: { taskIds: string[]; mode?: "any" | "all"; timeoutMs?: number }) => {
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
      const results = await Promise.all(p.taskIds.map((id) => resultOf(id)));
      return { results, timedOut };
    },

    "task.respond": async (p: { taskId: string; message: string }, conn: Connection) => {
      const live = owned(conn, p.taskId);
      await live.chain;
      // Relay: a remote task's follow-up goes to its machine's daemon.
      const { cycle, queued } = ctx.relay?.owns(live)
        ? await ctx.relay.respond(live, p.message)
        : await sup.respond(live, p.message);
      return { taskId: p.taskId, subagent_id: p.taskId, cycle, ...(queued ? { queued: true } : {}) };
    },

    "task.close": async (p: { taskId: string; closePane?: boolean }, conn: Connection) => {
      const live = sup.tasks.get(p.taskId);
      if (!live) return resultOf(p.taskId); // already closed earlier: the stored record answers
      if (!mayAct(conn, live))
        throw new DshError(
          "NOT_OWNER",
          `task ${p.taskId} belongs to owner ${live.rec.owner}; only its owner (or the CLI) may close it`,
        );
      const closePane = p.closePane ?? cfg().closePaneOnDone;
      const result = ctx.relay?.owns(live) ? await ctx.relay.close(live, closePane) : await sup.close(live, closePane);
      sup.tasks.delete(p.taskId);
      return result;
    },

    "task.abort": async (p: { taskIds?: string[]; owner?: string; all?: true }, conn: Connection) => {
      const owner = conn.kind === "owner" ? conn.ownerId! : (p.owner ?? "cli");
      const out = { aborted_ids: [] as string[], missing_ids: [] as string[], foreign_ids: [] as string[] };
      const ids = p.taskIds ?? [...sup.tasks.values()].filter((l) => l.rec.owner === owner).map((l) => l.rec.taskId);
      for (const id of ids) {
        const live = sup.tasks.get(id);
        if (!live || !sup.isOpen(live)) out.missing_ids.push(id);
        else if (conn.kind === "owner" && live.rec.owner !== conn.ownerId) out.foreign_ids.push(id);
        else if (await (ctx.relay?.owns(live) ? ctx.relay.abort(live) : sup.abort(live))) out.aborted_ids.push(id);
        else out.missing_ids.push(id); // ended on its own meanwhile: nothing to abort
      }
      return out;
    },

    "task.subscribe": (p: { taskIds?: string[]; owner?: string }, conn: Connection) => {
      const ids = p.taskIds ? new Set(p.taskIds) : undefined;
      const off = sup.onStatus((live, result) => {
        if (ids && !ids.has(live.rec.taskId)) return;
        if (p.owner && live.rec.owner !== p.owner) return;
        if (conn.kind === "owner" && live.rec.owner !== conn.ownerId) return;
        conn.push("task.status", { taskId: live.rec.taskId, status: result.status, result });
      });
      conn.onClose(off);
      return { subscribed: true };
    },

    // The settled diff.patch's text, for a daemon that relays this task and keeps a copy (src/remote/relay.ts).
    "task.patch": async (p: { taskId: string }) => {
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

    "child.event": (p: { type: string }, conn: Connection) => sup.childEvent(conn, p),
    "child.report": (p: Parameters<Supervisor["childReport"]>[1], conn: Connection) => sup.childReport(conn, p),
  };
}
