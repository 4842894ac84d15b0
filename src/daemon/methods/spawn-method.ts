// task.spawn: the checks a spawn must pass (config, owner, cwd, allowCwd, runtime, machine), then the record and
// its slot, reserved before the task id exists so concurrent spawns cannot overshoot. Split from methods.ts.
import { realpath, stat } from "node:fs/promises";
import { sep } from "node:path";
import { DshError } from "../../core/errors.js";
import { resolveSpawnModel } from "../../core/session/model-choice.js";
import { capsFor } from "../../core/budget.js";
import type { RuntimeKind } from "../../core/types.js";
import { repoFacts, requireRepo, type CreatedWorktree } from "../ports/git-port.js";
import { assertOwnerId } from "../../store/outbox.js";
import type { MethodContext } from "./method-context.js";
import { knownOwners, resolveOwner } from "../delivery/owner-view.js";
import { briefFrom } from "../../core/result/summary.js";
import { dropStartedWorktree, startWorktree } from "../task/pipeline.js";
import { checkSetupParams } from "../task/workdir-setup.js";
import { assertDayBudget, holdDayBudget } from "../task/budget.js";
import type { Connection } from "../server/server.js";
import type { Runner } from "../task/runner-types.js";
import { spawnOnce } from "./request-memo.js";
import type { Params, Result } from "../../protocol/methods.js";

/** task.spawn's params, as schema/protocol/task.spawn.json declares them (src/protocol/). */
export type SpawnParams = Params<"task.spawn">;

/** The owner named (an id, or the label a listing shows: src/daemon/delivery/owner-view.ts), else the connection's. */
const ownerOf = (ctx: MethodContext, conn: Connection, explicit?: string): string =>
  explicit !== undefined ? resolveOwner(explicit, () => knownOwners(ctx.sup)) : (conn.ownerId ?? "cli");

/** The task's caps: the spawn's, else config.json budget's defaults. */
function capsOf(p: SpawnParams, defaults: Parameters<typeof capsFor>[1]): { caps?: ReturnType<typeof capsFor> } {
  const caps = capsFor(p, defaults);
  return caps ? { caps } : {};
}

/** The repository around cwd when it has a commit to branch a worktree from (isolated "auto"), else undefined. */
async function committedRepo(cwd: string): Promise<{ root: string } | undefined> {
  const facts = await repoFacts(cwd);
  return facts?.head ? { root: facts.root } : undefined; // the root only: prepare() then takes the worktree's fast path
}

export function spawnTask(ctx: MethodContext, p: SpawnParams, conn: Connection): Promise<Result<"task.spawn">> {
  if (p.requestId !== undefined) return spawnOnce(ctx.sup, p.requestId, () => spawnFresh(ctx, p, conn));
  return spawnFresh(ctx, p, conn);
}

async function spawnFresh(ctx: MethodContext, p: SpawnParams, conn: Connection): Promise<Result<"task.spawn">> {
  const { sup } = ctx;
  const c = sup.deps.config();
  if (!c.enabled)
    throw new DshError(
      "SPAWN_REFUSED",
      "spawning is disabled (enabled:false in config.json); set it with `dsh-herdr config set enabled true`",
    );
  const owner = assertOwnerId(ownerOf(ctx, conn, p.owner));
  if (conn.kind === "owner" && owner !== conn.ownerId)
    throw new DshError("NOT_OWNER", `an owner connection spawns only for itself (${conn.ownerId}); drop params.owner`);
  assertDayBudget(sup, owner); // budget.perDay: refused once the owner's day is spent
  // Relay: a label under config.json `machines` runs on that machine's daemon, through its link (cwd is a path there).
  if (p.machine !== undefined && ctx.relay?.knows(p.machine)) return ctx.relay.spawn(p, owner);
  const runtime: RuntimeKind = p.runtime ?? (c.runtime !== "auto" ? c.runtime : await ctx.defaultRuntime());
  // Only Herdr can place a child on another machine; anything else would run here under a false label.
  if (p.machine !== undefined && runtime !== "herdr") {
    throw new DshError(
      "MACHINE_UNKNOWN",
      `machine ${JSON.stringify(p.machine)} is not in config.json machines and runtime ${runtime} is local only; add it with \`dsh-herdr machine add ${p.machine} --ssh USER@HOST\`, drop --machine, or use the herdr runtime with a machine Herdr knows`,
    );
  }
  checkSetupParams(p);
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
  // true: no git process, the worktree add is the one; "auto": one rev-parse, so a repo without a commit runs shared.
  const repo =
    p.isolated === true ? await requireRepo(cwd) : p.isolated === "auto" ? await committedRepo(cwd) : undefined;
  const model = resolveSpawnModel(p.model, c); // undefined: pi's own default model (no --model)
  // A delivery names its task by the brief (pi-crew's deliveries carry one): a task for an owner spawned without one
  // gets its task's first line; a CLI task keeps what was asked.
  const brief = p.brief ?? (owner !== "cli" ? briefFrom(p.task?.goal ?? p.prompt) : undefined);
  // Reserve-then-record: the day's budget (checked again, with this spawn's reservation held until its task counts as
  // open) and the slot (or queue place) are taken synchronously, so concurrent spawns cannot overshoot either.
  const releaseDay = holdDayBudget(sup, owner, capsFor(p, c.budget)?.cost?.limit);
  const slotKey = `pending-${Math.random().toString(36).slice(2)}`;
  let slot: ReturnType<typeof sup.admission.acquire>;
  try {
    slot = sup.admission.acquire(slotKey);
  } catch (e) {
    releaseDay(); // CONCURRENCY_LIMIT: nothing was admitted
    throw e;
  }
  const queued = !sup.admission.holds(slotKey);
  const createdAt = sup.deps.clock.now();
  let live: Runner;
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
            isolated: repo !== undefined,
            timeoutMs: p.timeoutMs ?? c.defaultTimeoutMs,
            runtime,
            createdAt,
            ...(brief !== undefined ? { brief } : {}),
            ...(p.prompt !== undefined ? { prompt: p.prompt } : {}),
            ...(p.task !== undefined ? { task: p.task } : {}),
            ...(p.machine !== undefined ? { machine: p.machine } : {}),
            ...(p.ownerPaneId !== undefined ? { ownerPaneId: p.ownerPaneId } : {}),
            ...(p.checks !== undefined && p.checks.length > 0 ? { checks: p.checks.map((c) => c.trim()) } : {}),
            ...(p.checkTimeoutMs !== undefined ? { checkTimeoutMs: p.checkTimeoutMs } : {}),
            ...(p.include?.length ? { include: p.include } : {}),
            ...(p.setup !== undefined ? { setup: p.setup } : {}),
            ...(p.setupTimeoutMs !== undefined ? { setupTimeoutMs: p.setupTimeoutMs } : {}),
            ...capsOf(p, c.budget),
            ...(p.requestId !== undefined ? { requestId: p.requestId } : {}),
          },
          taskId,
        ),
      createdAt,
      { sync: false }, // nothing runs yet; the launch is journaled durably
      (taskId) => {
        if (repo && !queued) worktree = startWorktree(sup.deps.git, sup.deps.home, cwd, repo.root, taskId);
      },
    );
    live = sup.register(rec);
  } catch (e) {
    releaseDay();
    if (repo && worktree) dropStartedWorktree(sup.deps.git, sup.deps.log, repo.root, worktree);
    sup.admission.cancel(slotKey, e as Error);
    sup.admission.release(slotKey);
    slot.catch(() => undefined);
    throw e;
  }
  // The reservation (slot or queue place) now belongs to the task id; the open task counts against the day itself.
  releaseDay();
  sup.admission.rekey(slotKey, live.rec.taskId);
  await live.refresh();
  // The repository looked up here (and the worktree begun) go to the launch, so it does not ask git again.
  void live.run(slot, repo && (worktree ? { ...repo, worktree } : repo));
  return {
    taskId: live.rec.taskId,
    subagent_id: live.rec.taskId,
    name: live.rec.name,
    status: live.rec.status,
    queued,
  };
}
