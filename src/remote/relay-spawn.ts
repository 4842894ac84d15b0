// Spawning on another machine: the remote `task.spawn` (as the CLI, so the remote owes no owner delivery), then a
// local record for it (task dir, task.json with `remote`), registered and followed (src/remote/relay-follow.ts).
import { randomBytes } from "node:crypto";
import { isSettledStatus } from "../core/derive.js";
import type { AgentResult } from "../core/types.js";
import type { RemoteFollow } from "./relay-follow.js";
import type { RelayContext, RemoteRecord, RemoteSpawnParams } from "./relay-types.js";
import { stepRemote } from "./relay-machine.js";

const FORWARDED = ["model", "thinking", "role", "prompt", "task", "brief", "isolated", "timeoutMs", "runtime"] as const;

export async function relaySpawn(
  ctx: RelayContext,
  follow: RemoteFollow,
  p: RemoteSpawnParams,
  owner: string,
): Promise<{ taskId: string; subagent_id: string; name: string; status: string; queued: boolean }> {
  const { sup } = ctx;
  const label = p.machine!;
  const link = await ctx.ready(label);
  const params: Record<string, unknown> = { cwd: p.cwd };
  for (const k of FORWARDED) {
    if (p[k] !== undefined) params[k] = p[k];
  }
  // As the CLI: the remote owes nobody a delivery; this daemon delivers to the local owner (docs/architecture.md).
  const spawned = await link.request<{ taskId: string; queued: boolean }>("task.spawn", params);
  const remote = await link.request<AgentResult>("task.get", { taskId: spawned.taskId });
  const { store } = sup.deps;
  const createdAt = Date.now();
  const rec = await store.createTask<RemoteRecord>(
    (taskId) => ({
      taskId,
      owner,
      status: remote.status,
      createdAt,
      cwd: p.cwd,
      kind: "pi",
      role: remote.role,
      model: remote.agent.model,
      thinking: remote.agent.thinking,
      isolated: p.isolated === true, // "auto" is settled on the remote machine
      timeoutMs: p.timeoutMs ?? sup.deps.config().defaultTimeoutMs,
      machine: label,
      remote: { label, taskId: spawned.taskId },
      runtime: remote.agent.runtime ?? "headless",
      name: remote.agent.name,
      token: randomBytes(24).toString("hex"),
      workdir: remote.worktree?.path ?? p.cwd,
      sessionPath: remote.sessionPath ?? "",
      resultPath: "",
      cycle: 1,
      timing: { createdAt },
      ...(p.brief !== undefined ? { brief: p.brief } : {}),
      ...(remote.worktree ? { worktree: remote.worktree } : {}),
    }),
    createdAt,
  );
  const live = sup.register(rec);
  await stepRemote(ctx, live, { type: "remote_started", cycle: 1 });
  await live.journal({ type: "remote_spawned", label, remoteTaskId: spawned.taskId });
  await follow.snapshot(live, remote, true);
  // Settled there already (it failed at once, e.g. git refused the repository): recorded here before the reply, so a
  // `task.wait` or `task.get` right after it finds the result (a snapshot keeps no settled status).
  if (isSettledStatus(remote.status)) await follow.follow(live);
  else void follow.follow(live);
  return {
    taskId: rec.taskId,
    subagent_id: rec.taskId,
    name: rec.name,
    status: sup.statusOf(live),
    queued: spawned.queued,
  };
}
