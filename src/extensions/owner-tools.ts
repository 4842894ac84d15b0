// The owner's crew_* tools over the daemon socket. Results are JSON in model context; every problem is thrown
// as {"error": "..."} so pi marks the result as an error. Ownership is the daemon's rule; here it gets words.
import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import { agentSummary, type AgentDefinition } from "../core/crew/crew-agents.js";
import { crewStatusOf, isOpenCrewStatus, type CrewStatus } from "../core/crew/crew-delivery.js";
import {
  CREW_TOOL_PARAMETERS,
  checkAbortArgs,
  checkDoneArgs,
  checkLandArgs,
  checkNoArgs,
  checkRespondArgs,
  checkSpawnArgs,
  toolErrorText,
  type Checked,
} from "../core/crew/crew-tools.js";
import { isValidTaskId } from "../core/ids.js";
import type { AgentResult } from "../core/types.js";
import type { Result } from "../protocol/methods.js";
import { type KnownTask, resolveTaskId } from "../core/id-match.js";
import { discoverAgents } from "./crew-agents.js";
import { OPEN_STATUSES } from "./owner-runtime.js";
import type { DshError } from "../core/errors.js";
import { crewToolRenderers } from "./tool-render.js";
import type { OwnerLink } from "./owner-link.js";

export interface OpenSessionView {
  subagent_id: string;
  subagent: string;
  brief: string;
  status: CrewStatus;
}

export interface OwnerToolsDeps {
  link: OwnerLink;
  /** Called after any tool changed the owner's sessions (the status context re-reads them). */
  changed(): void;
  /** config.json owner.mayLand: crew_land exists (the daemon checks it again on every landing). */
  mayLand?: boolean;
}

class ToolError extends Error {
  constructor(message: string) {
    super(toolErrorText(message));
  }
}

const json = (value: unknown, details: Record<string, unknown> = {}) => ({
  content: [{ type: "text" as const, text: JSON.stringify(value) }],
  details,
});

function unwrap<T>(c: Checked<T>): T {
  if (!c.ok) throw new ToolError(c.error);
  return c.value;
}

/** Daemon error → the owner-facing words of pi-crew, naming what to do. */
export function daemonError(e: unknown, id?: string): Error {
  const code = (e as { code?: string }).code;
  const msg = e instanceof Error ? e.message : String(e);
  if (code === "TASK_NOT_FOUND")
    return new ToolError(`No subagent with id "${id}"; crew_status lists this session's open subagents.`);
  if (code === "NOT_OWNER")
    return new ToolError(
      `Subagent "${id}" belongs to a different session; only its owner may respond, close or abort it.`,
    );
  // Named, so the model can tell a wrong label from a machine that is down (the message carries ssh's own line).
  if (code === "MACHINE_UNKNOWN" || code === "MACHINE_UNREACHABLE") return new ToolError(`${code}: ${msg}`);
  // Refused by name: a spend cap is the person's to raise, and the message tells the model what to ask them.
  if (code === "CAP_NEEDS_PERSON") return new ToolError(`${code}: ${msg}`);
  // The client's own message already names the fix; said once.
  if (code === "DAEMON_UNAVAILABLE")
    return new ToolError(
      msg.includes("dsh-herdr daemon start")
        ? `the dsh-herdr daemon is not reachable: ${msg}`
        : `the dsh-herdr daemon is not reachable (${msg}); start it with \`dsh-herdr daemon start\`.`,
    );
  return new ToolError(msg);
}

/** The owner session's current model as provider/id (pi's ctx.model), when it has one. */
function ownerModel(ctx: ExtensionContext): string | undefined {
  const m = ctx.model as { provider?: unknown; id?: unknown } | undefined;
  return typeof m?.provider === "string" && typeof m.id === "string" && m.provider && m.id
    ? `${m.provider}/${m.id}`
    : undefined;
}

/** The owner's open sessions (running, completed, needs_input), oldest first. */
export async function listOpenSessions(link: OwnerLink): Promise<OpenSessionView[]> {
  const owner = link.ownerId;
  if (!owner) return [];
  // Ask for open statuses only: the daemon pages newest first, and closed history must not push open work off the page.
  const { tasks } = await link.request("task.list", {
    owner,
    status: OPEN_STATUSES,
    limit: 1000,
  });
  return tasks
    .map((t) => ({
      subagent_id: t.taskId,
      subagent: t.agent.name,
      brief: t.brief ?? "",
      status: crewStatusOf(t.status),
      createdAt: t.timing.createdAt,
    }))
    .filter((t) => isOpenCrewStatus(t.status))
    .sort((a, b) => a.createdAt - b.createdAt)
    .map(({ createdAt: _c, ...rest }) => rest);
}

/** Every task of this owner (any status) with its agent name and brief: what a short id is resolved against. */
async function ownTasks(link: OwnerLink): Promise<KnownTask[]> {
  const owner = link.ownerId;
  if (!owner) return [];
  const out: KnownTask[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 50; page++) {
    const r = await link.request("task.list", {
      owner,
      limit: 1000,
      ...(cursor ? { cursor } : {}),
    });
    for (const t of r.tasks)
      out.push({
        taskId: t.taskId,
        ...(t.agent?.name ? { name: t.agent.name } : {}),
        ...(t.brief ? { brief: t.brief } : {}),
      });
    if (!r.nextCursor) break;
    cursor = r.nextCursor;
  }
  return out;
}

/**
 * What the model typed for a subagent, as the CLI takes it: a full id (passed on: the daemon tells a foreign task
 * from a missing one), else a unique prefix or suffix (the 4 characters on the cards) or the agent name, among this
 * session's subagents. Undefined when nothing matches; an ambiguous one is an error naming the candidates.
 */
async function resolveSubagent(link: OwnerLink, input: string): Promise<string | undefined> {
  const q = input.trim().toLowerCase();
  if (isValidTaskId(q)) return q;
  let known: KnownTask[];
  try {
    known = await ownTasks(link);
  } catch (e) {
    throw daemonError(e);
  }
  try {
    return resolveTaskId(q, known);
  } catch (e) {
    const candidates = (e as DshError).details?.["candidates"];
    if ((e as DshError).code !== "BAD_TASK_ID" || !Array.isArray(candidates)) return undefined;
    const byId = new Map(known.map((k) => [k.taskId, k]));
    const lines = (candidates as string[]).map((id) => {
      const k = byId.get(id);
      return `${id}${k?.name ? ` (${k.name}${k.brief ? `, ${k.brief}` : ""})` : ""}`;
    });
    throw new ToolError(
      `"${input.trim()}" matches ${candidates.length} subagents of this session: ${lines.join("; ")}. Pass more characters of the id.`,
    );
  }
}

/** resolveSubagent, where no match is an error naming what to pass. */
async function resolveOne(link: OwnerLink, input: string): Promise<string> {
  const id = await resolveSubagent(link, input);
  if (id === undefined)
    throw new ToolError(
      `No subagent of this session matches "${input.trim()}"; pass its subagent_id, the id's last 4 characters or its agent name (crew_status lists the open ones).`,
    );
  return id;
}

async function getTask(link: OwnerLink, id: string): Promise<AgentResult> {
  try {
    return await link.request("task.get", { taskId: id });
  } catch (e) {
    throw daemonError(e, id);
  }
}

function spawnTask(agent: AgentDefinition, task: { goal: string; context: string[]; instructions: string[] }) {
  // The definition's body is the child's role brief: it travels as the first context item.
  const context = agent.prompt ? [`Your role (${agent.name}): ${agent.prompt}`, ...task.context] : task.context;
  return { goal: task.goal, context, instructions: task.instructions };
}

export function registerOwnerTools(pi: ExtensionAPI, deps: OwnerToolsDeps): void {
  const { link } = deps;
  // Every crew tool gets a one-line call and a confirmation in the TUI; the model still gets the JSON.
  const reg = (tool: Record<string, unknown>) =>
    pi.registerTool({ ...crewToolRenderers(String(tool["name"])), ...tool } as never);

  reg({
    name: "crew_list",
    label: "Crew list",
    description: "List the subagent definitions you can spawn (JSON), with warnings for unusable definition files.",
    promptSnippet: "crew_list: discover subagents to delegate to",
    promptGuidelines: ["crew_list: use for discovery; never poll it for completion, results arrive by themselves."],
    parameters: CREW_TOOL_PARAMETERS.crew_list,
    async execute(_id: string, params: unknown, _s: unknown, _u: unknown, ctx: ExtensionContext) {
      unwrap(checkNoArgs("crew_list", params));
      const { agents, warnings } = discoverAgents(ctx.cwd);
      return json({
        subagents: agents.map(agentSummary),
        warnings: warnings.map((w) => ({ file: w.file, message: w.message })),
      });
    },
  });

  reg({
    name: "crew_spawn",
    label: "Crew spawn",
    description:
      "Delegate a task to a new subagent. Returns {subagent_id} at once; the result arrives later as a message. Do not wait, sleep or poll.",
    promptSnippet: "crew_spawn: delegate an independent slice of work to a subagent",
    promptGuidelines: [
      "Never duplicate delegated work; continue only with independent scope, otherwise end the turn. Results arrive asynchronously.",
      "When several results feed one next step, wait for the whole batch before synthesis.",
    ],
    parameters: CREW_TOOL_PARAMETERS.crew_spawn,
    async execute(_id: string, params: unknown, _s: unknown, _u: unknown, ctx: ExtensionContext) {
      const { agents } = discoverAgents(ctx.cwd);
      const args = unwrap(
        checkSpawnArgs(
          params,
          agents.map((a) => a.name),
          agents.filter((a) => a.machine !== undefined).map((a) => a.name),
        ),
      );
      const agent = agents.find((a) => a.name === args.subagent)!;
      // Another machine (the call's `machine`, else the definition's): the daemon relays the spawn over its link, as
      // for `dsh-herdr spawn --machine`; cwd is a path there (checkSpawnArgs requires it).
      const machine = args.machine ?? agent.machine;
      let r: { subagent_id: string; name?: string };
      try {
        r = await link.request("task.spawn", {
          cwd: args.cwd ?? ctx.cwd,
          ...(machine !== undefined ? { machine } : {}),
          brief: args.brief,
          task: spawnTask(agent, args.task),
          role: agent.role,
          isolated: agent.isolated,
          // Like pi-crew: a definition without a model runs on the owner session's current model.
          ...((agent.model ?? ownerModel(ctx)) ? { model: agent.model ?? ownerModel(ctx) } : {}),
          ...(agent.thinking ? { thinking: agent.thinking } : {}),
          // The definition's checks and worktree setup (the repository's own .dsh-herdr.json is joined by the daemon).
          ...(agent.checks?.length ? { checks: agent.checks } : {}),
          ...(agent.worktree?.include?.length ? { include: agent.worktree.include } : {}),
          ...(agent.worktree?.setup !== undefined ? { setup: agent.worktree.setup } : {}),
          // The definition's spend caps (else the daemon's config defaults).
          ...(agent.maxCost !== undefined ? { maxCost: agent.maxCost } : {}),
          ...(agent.maxOutputTokens !== undefined ? { maxOutputTokens: agent.maxOutputTokens } : {}),
          ...(agent.maxTurns !== undefined ? { maxTurns: agent.maxTurns } : {}),
        });
      } catch (e) {
        throw daemonError(e);
      }
      deps.changed();
      return json(
        { subagent_id: r.subagent_id },
        {
          subagent: agent.name,
          brief: args.brief,
          task: args.task,
          ...(r.name ? { name: r.name } : {}),
          ...(machine !== undefined ? { machine } : {}),
        },
      );
    },
  });

  reg({
    name: "crew_respond",
    label: "Crew respond",
    description:
      "Send a follow-up to a completed or needs_input subagent: only new information or the answer it asked for. Returns at once. A subagent paused at a spend cap (delivered as status blocked) is the user's to raise: ask them.",
    parameters: CREW_TOOL_PARAMETERS.crew_respond,
    async execute(_id: string, params: unknown) {
      const checked = unwrap(checkRespondArgs(params));
      const args = { ...checked, subagent_id: await resolveOne(link, checked.subagent_id) };
      try {
        await link.request("task.respond", { taskId: args.subagent_id, message: args.message });
      } catch (e) {
        if ((e as { code?: string }).code === "BAD_STATE" || (e as { code?: string }).code === "BAD_PARAMS") {
          const t = await getTask(link, args.subagent_id);
          if (t.owner !== link.ownerId) throw daemonError({ code: "NOT_OWNER" }, args.subagent_id);
          throw new ToolError(
            `Subagent "${args.subagent_id}" is not waiting for a response (status: ${crewStatusOf(t.status)}); respond after its result arrives.`,
          );
        }
        throw daemonError(e, args.subagent_id);
      }
      deps.changed();
      return json({ subagent_id: args.subagent_id });
    },
  });

  reg({
    name: "crew_done",
    label: "Crew done",
    description: "Close a completed or needs_input subagent once no follow-up remains.",
    parameters: CREW_TOOL_PARAMETERS.crew_done,
    async execute(_id: string, params: unknown) {
      const subagent_id = await resolveOne(link, unwrap(checkDoneArgs(params)).subagent_id);
      const t = await getTask(link, subagent_id);
      if (t.owner !== link.ownerId) throw daemonError({ code: "NOT_OWNER" }, subagent_id);
      const st = crewStatusOf(t.status);
      if (st === "running")
        throw new ToolError(`Subagent "${subagent_id}" is still running; wait for its result, or crew_abort it.`);
      if (st === "closed" || st === "aborted")
        throw new ToolError(`No open subagent with id "${subagent_id}" (it is ${st}).`);
      try {
        await link.request("task.close", { taskId: subagent_id });
      } catch (e) {
        throw daemonError(e, subagent_id);
      }
      deps.changed();
      return json({ subagent_id });
    },
  });

  reg({
    name: "crew_abort",
    label: "Crew abort",
    description:
      "Abort running or waiting subagents of this session: exactly one of subagent_id, subagent_ids, all=true.",
    parameters: CREW_TOOL_PARAMETERS.crew_abort,
    async execute(_id: string, params: unknown) {
      const args = unwrap(checkAbortArgs(params));
      let r: { aborted_ids: string[]; missing_ids: string[]; foreign_ids: string[] };
      try {
        if (args.mode === "all") {
          // Only open sessions: a failed or finished task is not "aborted" by this.
          const ids = (await listOpenSessions(link)).map((s) => s.subagent_id);
          if (ids.length === 0) throw new ToolError("No active subagents in the current session.");
          r = await link.request("task.abort", { taskIds: ids });
        } else {
          // Short ids resolve among this session's subagents; one that matches none is reported missing.
          const ids: string[] = [];
          const unmatched: string[] = [];
          for (const raw of args.ids) {
            const id = await resolveSubagent(link, raw);
            if (id === undefined) unmatched.push(raw);
            else if (!ids.includes(id)) ids.push(id);
          }
          r = ids.length
            ? await link.request("task.abort", { taskIds: ids })
            : { aborted_ids: [], missing_ids: [], foreign_ids: [] };
          r = { ...r, missing_ids: [...r.missing_ids, ...unmatched] };
        }
      } catch (e) {
        throw e instanceof ToolError ? e : daemonError(e);
      }
      const out = { aborted_ids: r.aborted_ids, missing_ids: r.missing_ids, foreign_ids: r.foreign_ids };
      if (out.aborted_ids.length === 0) {
        const parts = [
          out.missing_ids.length ? `not found or already finished: ${out.missing_ids.join(", ")}` : "",
          out.foreign_ids.length ? `belong to a different session: ${out.foreign_ids.join(", ")}` : "",
        ].filter(Boolean);
        throw new ToolError(`Nothing aborted (${parts.join("; ")}).`);
      }
      deps.changed();
      return { ...json(out), terminate: true };
    },
  });

  if (deps.mayLand) registerLand(reg, link, deps);

  reg({
    name: "crew_status",
    label: "Crew status",
    description:
      "This session's open subagents (running, completed, needs_input) as JSON. Results arrive by themselves: do not poll.",
    parameters: CREW_TOOL_PARAMETERS.crew_status,
    async execute(_id: string, params: unknown) {
      unwrap(checkNoArgs("crew_status", params));
      try {
        return json({ sessions: await listOpenSessions(link) });
      } catch (e) {
        throw daemonError(e);
      }
    },
  });
}

/** One task's landing as task.land answers it (src/protocol/); the model gets the fields picked below. */
type LandOutcome = Result<"task.land">["results"][number];

/** crew_land: only when the person allowed it (config owner.mayLand); the daemon refuses it otherwise too. */
function registerLand(reg: (tool: Record<string, unknown>) => void, link: OwnerLink, deps: OwnerToolsDeps): void {
  reg({
    name: "crew_land",
    label: "Crew land",
    description:
      "Land a completed subagent's work (an isolated worktree) on the branch it started from, in the person's checkout: a fast-forward, or a merge commit when the branch moved. Returns the landing outcome as JSON; a refusal (CHECKOUT_DIRTY, CHECKOUT_ELSEWHERE, LAND_CONFLICT, CHECK_FAILED) changes nothing and names why.",
    promptSnippet: "crew_land: bring a completed subagent's worktree work onto the person's branch",
    promptGuidelines: [
      "crew_land only work you have read and accept (its result, its checks); never land a subagent whose checks failed without saying so.",
    ],
    parameters: CREW_TOOL_PARAMETERS.crew_land,
    async execute(_id: string, params: unknown) {
      const args = unwrap(checkLandArgs(params));
      const subagent_id = await resolveOne(link, args.subagent_id);
      let r: { results: LandOutcome[] };
      try {
        r = await link.request(
          "task.land",
          { taskIds: [subagent_id], ...(args.check ? { check: true } : {}) },
          // Checks on the merged tree may run for minutes.
          30 * 60_000,
        );
      } catch (e) {
        const code = (e as { code?: string }).code;
        if (code && code !== "TASK_NOT_FOUND" && code !== "NOT_OWNER" && code !== "DAEMON_UNAVAILABLE")
          throw new ToolError(`${code}: ${e instanceof Error ? e.message : String(e)}`);
        throw daemonError(e, subagent_id);
      }
      const o = r.results[0]!;
      deps.changed();
      return json(
        {
          subagent_id,
          landed: !o.already,
          ...(o.landing.landedAs ? { landedAs: o.landing.landedAs } : {}),
          baseBranch: o.landing.baseBranch,
          ...(o.landing.strategy ? { strategy: o.landing.strategy } : {}),
          said: o.said,
          ...(o.committed ? { committed: o.committed } : {}),
          ...(o.checks ? { checks: o.checks.map((c) => ({ command: c.command, exitCode: c.exitCode })) } : {}),
        },
        { subagent_id },
      );
    },
  });
}
