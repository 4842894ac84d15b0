// Spawning on another machine. The link must be up (else MACHINE_UNREACHABLE with ssh's line, and no task here);
// then the local record comes first (task dir, task.json with `remote: {label, taskId: ""}`, a `starting` result)
// and the spawn request is made durable with its request id (relay-requests.ts) before it is sent. The remote
// `task.spawn` goes as the CLI (the remote owes nobody a delivery; this daemon delivers to the local owner). Its
// answer adopts the remote task: its id is recorded, the cycle starts through the lifecycle machine, the task is
// followed (relay-follow.ts). A lost reply is reconciled (sent again with the same id): the task there is adopted,
// never spawned twice. A refusal there removes the local record again (nothing ran), the owner gets the error.
import { randomBytes } from "node:crypto";
import { agentName } from "../../core/ids.js";
import { PI_DEFAULT_MODEL } from "../../core/session/model-choice.js";
import type { DshError } from "../../core/errors.js";
import type { AgentResult } from "../../core/types.js";
import type { RemoteFollow } from "./relay-follow.js";
import { verdictHere } from "./relay-follow.js";
import { stepRemote } from "./relay-machine.js";
import { newRequestId, type RelayRequests, type RemoteRequest, type SpawnAnswer } from "./relay-requests.js";
import type { Result } from "../../protocol/methods.js";
import type { RelayContext, RelayLive, RemoteRecord, RemoteSpawnParams } from "./relay-types.js";

// Everything the machine's own task.spawn acts on: the worktree's setup and checks run there, and so do the spend caps
// (a cap left behind here would let the task spend with none).
const FORWARDED = [
  "model",
  "thinking",
  "role",
  "prompt",
  "task",
  "brief",
  "isolated",
  "timeoutMs",
  "runtime",
  "include",
  "setup",
  "setupTimeoutMs",
  "checks",
  "checkTimeoutMs",
  "maxCost",
  "maxOutputTokens",
  "maxTurns",
] as const;

export async function relaySpawn(
  ctx: RelayContext,
  requests: RelayRequests,
  p: RemoteSpawnParams,
  owner: string,
): Promise<Result<"task.spawn">> {
  const { sup } = ctx;
  const label = p.machine!;
  await ctx.ready(label); // unreachable now: the error, and no task here
  const params: Record<string, unknown> = { cwd: p.cwd };
  for (const k of FORWARDED) {
    if (p[k] !== undefined) params[k] = p[k];
  }
  const { store } = sup.deps;
  const createdAt = sup.deps.clock.now();
  const requestId = newRequestId();
  const role = p.role ?? "worker";
  const rec = await store.createTask<RemoteRecord & { requestId: string }>(
    (taskId) => ({
      taskId,
      owner,
      status: "starting",
      createdAt,
      cwd: p.cwd,
      kind: "pi",
      role,
      ...(p.model !== undefined ? { model: p.model } : {}),
      thinking: p.thinking ?? sup.deps.config().defaultThinking,
      isolated: p.isolated === true, // "auto" is settled on the remote machine
      timeoutMs: p.timeoutMs ?? sup.deps.config().defaultTimeoutMs,
      machine: label,
      remote: { label, taskId: "" }, // the id there comes with the answer
      requestId,
      runtime: p.runtime ?? "headless",
      name: agentName(role, p.model ?? PI_DEFAULT_MODEL, taskId), // the remote's name replaces it
      token: randomBytes(24).toString("hex"),
      workdir: p.cwd,
      sessionPath: "",
      resultPath: "",
      cycle: 1,
      timing: { createdAt },
      ...(p.brief !== undefined ? { brief: p.brief } : {}),
    }),
    createdAt,
    { sync: true },
  );
  const live = sup.register(rec);
  live.result = pendingResult(live);
  await store.saveTask(live.rec, live.result, { sync: false });
  const req: RemoteRequest = { requestId, method: "task.spawn", params, cycle: 1 };
  await requests.begin(live, req);
  const answer = (await requests.call(live)) as SpawnAnswer;
  return {
    taskId: rec.taskId,
    subagent_id: rec.taskId,
    name: live.rec.name,
    status: sup.statusOf(live),
    queued: answer.queued,
  };
}

/** The machine answered the spawn (now, or at a reconcile): the task there is this one. */
export async function adoptSpawned(
  ctx: RelayContext,
  follow: RemoteFollow,
  live: RelayLive,
  req: RemoteRequest,
  a: SpawnAnswer,
): Promise<void> {
  const { sup } = ctx;
  const label = live.rec.remote!.label;
  if (live.state.phase.name === "closed") {
    // Closed here before the answer came (a reconcile after the close): close it there too, nobody follows it.
    await ctx
      .linkOf(label)
      ?.request("task.close", { taskId: a.taskId, closePane: true })
      .catch(() => undefined);
    return;
  }
  live.rec.remote = { label, taskId: a.taskId };
  live.rec.name = a.name;
  await sup.deps.store.writeTask(live.rec, { sync: true });
  await live.journal({ type: "remote_spawned", label, remoteTaskId: a.taskId, requestId: req.requestId });
  await stepRemote(ctx, live, { type: "remote_started", cycle: 1 });
  await follow.refresh(live);
  if (live.result) adoptFacts(live, live.result);
  await sup.deps.store.writeTask(live.rec, { sync: false });
}

/** What the remote's first result settles about the task (its model, runtime, worktree, session). */
function adoptFacts(live: RelayLive, r: AgentResult): void {
  const rec = live.rec;
  rec.model = r.agent.model;
  rec.thinking = r.agent.thinking;
  rec.role = r.role;
  if (r.agent.runtime) rec.runtime = r.agent.runtime;
  if (r.worktree) {
    rec.worktree = r.worktree;
    rec.workdir = r.worktree.path;
  }
  if (r.sessionPath) rec.sessionPath = r.sessionPath;
}

/**
 * The machine refused the spawn. The owner's call waiting for it: the local record goes (nothing ran), the owner
 * gets the error. Nobody waiting (refused at a reconcile, after the owner was told it would be reconciled): the task
 * settles `failed` with the machine's error, so its owner hears it.
 */
export async function spawnRefused(
  ctx: RelayContext,
  follow: RemoteFollow,
  live: RelayLive,
  err: DshError,
  waited: boolean,
): Promise<void> {
  const { sup } = ctx;
  if (waited) {
    sup.tasks.delete(live.rec.taskId);
    await sup.deps.store.discardTask(live.rec.taskId).catch(() => undefined);
    return;
  }
  // The machine decides: the queued cycle's launch failed there (a start_failed settle with the machine's error).
  await follow.settleHere(live, { type: "launch_failed", code: err.code, message: err.message });
}

function pendingResult(live: RelayLive): AgentResult {
  const r = verdictHere(live, "starting", undefined, live.rec.createdAt);
  delete r.timing.settledAt;
  delete r.timing.elapsedMs;
  r.summary = `spawning on machine ${live.rec.remote!.label}`;
  return r;
}
