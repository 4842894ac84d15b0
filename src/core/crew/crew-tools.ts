// The owner's crew_* tools: argument schemas and validation (pi-crew Result Protocol). Pure, so every rule is
// unit-tested without pi; the extension only maps a returned problem string to a thrown {"error": ...}.
import { isValidMachineLabel } from "../machines.js";

/** A structured assignment: what the child must achieve, facts it cannot see, concrete steps. */
export interface CrewTask {
  goal: string;
  context: string[];
  instructions: string[];
}

export interface SpawnArgs {
  subagent: string;
  brief: string;
  task: CrewTask;
  /** A machine label from config.json `machines` (overrides the definition's `machine:`). */
  machine?: string;
  /** Where the child works on that machine (a path there); only with a machine. */
  cwd?: string;
}

export type AbortArgs = { mode: "ids"; ids: string[] } | { mode: "all" };

/** A problem message (the tool throws it as {"error": message}) or the checked value. */
export type Checked<T> = { ok: true; value: T } | { ok: false; error: string };

const ok = <T>(value: T): Checked<T> => ({ ok: true, value });
const bad = <T>(error: string): Checked<T> => ({ ok: false, error });

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const nonBlank = (v: unknown): v is string => typeof v === "string" && v.trim() !== "";

function unknownFields(tool: string, p: Record<string, unknown>, allowed: readonly string[]): string | undefined {
  const extra = Object.keys(p).filter((k) => !allowed.includes(k));
  if (extra.length === 0) return undefined;
  const known = allowed.length ? allowed.join(", ") : "no fields";
  return `${tool} has unknown field(s) ${extra.join(", ")}; it takes ${known}.`;
}

/**
 * Plain JSON Schemas (what TypeBox would build): the extension imports no runtime value from pi. They state types
 * and required fields but leave unknown fields and counts to the checks below, so such mistakes come back as the
 * protocol's {"error": ...} naming the fix rather than as pi's generic schema rejection.
 */
const str = (description: string) => ({ type: "string", description });
export const CREW_TOOL_PARAMETERS = {
  crew_list: { type: "object", properties: {} },
  crew_status: { type: "object", properties: {} },
  crew_spawn: {
    type: "object",
    properties: {
      subagent: str("A subagent name from crew_list."),
      brief: str("Concise task label for session lists, ideally under 80 characters. Not the full task."),
      task: {
        type: "object",
        properties: {
          goal: str("The required end result."),
          context: {
            type: "array",
            items: { type: "string" },
            description: "Facts from this session the subagent cannot see (may be empty).",
          },
          instructions: {
            type: "array",
            items: { type: "string" },
            description: "Concrete actions; approved plans go in verbatim.",
          },
        },
        required: ["goal", "context", "instructions"],
      },
      machine: str(
        "Optional: run the subagent on another machine, a label from dsh-herdr's config (`dsh-herdr machine list`).",
      ),
      cwd: str(
        "Required with machine (or a definition that names one): the absolute directory on that machine to work in.",
      ),
    },
    required: ["subagent", "brief", "task"],
  },
  crew_respond: {
    type: "object",
    properties: {
      subagent_id: str("The subagent_id crew_spawn returned (or its last 4 characters, or the agent name)."),
      message: str("Only new information or the requested answer; not a restated task."),
    },
    required: ["subagent_id", "message"],
  },
  crew_done: {
    type: "object",
    properties: {
      subagent_id: str(
        "The subagent_id of a completed or needs_input subagent to close (or its last 4 characters, or the agent name).",
      ),
    },
    required: ["subagent_id"],
  },
  crew_land: {
    type: "object",
    properties: {
      subagent_id: str(
        "A completed subagent that worked in an isolated worktree (its subagent_id, last 4 characters or agent name): its work is merged onto the branch it started from, in the person's checkout.",
      ),
      check: {
        type: "boolean",
        description: "true: run the subagent's checks on the merged tree first and land only if they pass.",
      },
    },
    required: ["subagent_id"],
  },
  crew_abort: {
    type: "object",
    properties: {
      subagent_id: str("One subagent to abort: its subagent_id, the id's last 4 characters or the agent name."),
      subagent_ids: { type: "array", items: { type: "string" }, description: "Several subagents to abort." },
      all: { type: "boolean", description: "true aborts every open subagent of this session." },
    },
  },
} as const;

export type CrewToolName = keyof typeof CREW_TOOL_PARAMETERS;

export function checkNoArgs(tool: "crew_list" | "crew_status", params: unknown): Checked<Record<string, never>> {
  if (params !== undefined && !isObject(params)) return bad(`${tool} takes no arguments; call it with {}.`);
  const extra = params ? unknownFields(tool, params, []) : undefined;
  return extra ? bad(extra) : ok({});
}

export function checkTask(task: unknown): Checked<CrewTask> {
  if (!isObject(task))
    return bad("task is required and must be a structured assignment {goal, context, instructions}.");
  const extra = unknownFields("task", task, ["goal", "context", "instructions"]);
  if (extra) return bad(extra);
  if (!nonBlank(task.goal)) return bad("task.goal is required and must not be empty.");
  const context = task.context ?? [];
  if (!Array.isArray(context) || !context.every(nonBlank))
    return bad("task.context must be an array of non-empty strings (use [] when there is nothing to add).");
  const ins = task.instructions;
  if (!Array.isArray(ins) || ins.length === 0 || !ins.every(nonBlank))
    return bad("task.instructions must contain at least one non-empty string.");
  return ok({ goal: task.goal, context: context as string[], instructions: ins as string[] });
}

/**
 * `remoteSubagents`: the definitions that name a machine themselves (`machine:` frontmatter), so a `cwd` without
 * `machine` is fine for them.
 */
export function checkSpawnArgs(
  params: unknown,
  knownSubagents: readonly string[],
  remoteSubagents: readonly string[] = [],
): Checked<SpawnArgs> {
  if (!isObject(params)) return bad("crew_spawn needs {subagent, brief, task}.");
  const extra = unknownFields("crew_spawn", params, ["subagent", "brief", "task", "machine", "cwd"]);
  if (extra) return bad(extra);
  if (!nonBlank(params.subagent)) return bad("subagent is required: a name from crew_list.");
  const name = params.subagent.trim();
  if (!knownSubagents.includes(name)) {
    return bad(
      `Unknown subagent: "${name}". Available: ${knownSubagents.length ? knownSubagents.join(", ") : "none (add definitions to .pi/agents/*.md)"}.`,
    );
  }
  if (!nonBlank(params.brief)) return bad("brief is required and must not be empty.");
  const task = checkTask(params.task);
  if (!task.ok) return bad(task.error);
  const out: SpawnArgs = { subagent: name, brief: params.brief.trim(), task: task.value };
  if (params.machine !== undefined) {
    if (typeof params.machine !== "string" || !isValidMachineLabel(params.machine.trim()))
      return bad(
        `machine must be a machine label from dsh-herdr's config (letters, digits, ".", "_", "-"), got ${JSON.stringify(params.machine)}; omit it to run here.`,
      );
    out.machine = params.machine.trim();
  }
  if (params.cwd !== undefined) {
    if (!nonBlank(params.cwd) || !params.cwd.trim().startsWith("/"))
      return bad(`cwd must be an absolute directory on the machine, got ${JSON.stringify(params.cwd)}.`);
    if (out.machine === undefined && !remoteSubagents.includes(name))
      return bad(
        `cwd is for a subagent on another machine; give machine too (a local subagent works in this session's directory).`,
      );
    out.cwd = params.cwd.trim();
  }
  // This session's directory is a path here, not there (the CLI refuses `spawn --machine` without --cwd alike).
  if (out.cwd === undefined && (out.machine !== undefined || remoteSubagents.includes(name)))
    return bad(
      `${out.machine !== undefined ? `machine "${out.machine}"` : `subagent "${name}" runs on another machine and`} needs cwd: the absolute directory on that machine to work in (this session's directory is a path on this machine, not there).`,
    );
  return ok(out);
}

function checkId(tool: string, v: unknown): Checked<string> {
  if (!nonBlank(v)) return bad(`${tool} needs subagent_id: the id crew_spawn returned.`);
  return ok(v.trim());
}

export function checkRespondArgs(params: unknown): Checked<{ subagent_id: string; message: string }> {
  if (!isObject(params)) return bad("crew_respond needs {subagent_id, message}.");
  const extra = unknownFields("crew_respond", params, ["subagent_id", "message"]);
  if (extra) return bad(extra);
  const id = checkId("crew_respond", params.subagent_id);
  if (!id.ok) return bad(id.error);
  if (!nonBlank(params.message))
    return bad("message is required and must not be empty: send the new information or the requested answer.");
  return ok({ subagent_id: id.value, message: params.message });
}

export function checkDoneArgs(params: unknown): Checked<{ subagent_id: string }> {
  if (!isObject(params)) return bad("crew_done needs {subagent_id}.");
  const extra = unknownFields("crew_done", params, ["subagent_id"]);
  if (extra) return bad(extra);
  const id = checkId("crew_done", params.subagent_id);
  return id.ok ? ok({ subagent_id: id.value }) : bad(id.error);
}

export function checkLandArgs(params: unknown): Checked<{ subagent_id: string; check: boolean }> {
  if (!isObject(params)) return bad("crew_land needs {subagent_id}.");
  const extra = unknownFields("crew_land", params, ["subagent_id", "check"]);
  if (extra) return bad(extra);
  const id = checkId("crew_land", params.subagent_id);
  if (!id.ok) return bad(id.error);
  if (params.check !== undefined && typeof params.check !== "boolean") return bad("check must be true or false.");
  return ok({ subagent_id: id.value, check: params.check === true });
}

export function checkAbortArgs(params: unknown): Checked<AbortArgs> {
  const one = "Provide exactly one of: subagent_id, subagent_ids, or all=true.";
  if (!isObject(params)) return bad(one);
  const extra = unknownFields("crew_abort", params, ["subagent_id", "subagent_ids", "all"]);
  if (extra) return bad(extra);
  const modes = [
    params.subagent_id !== undefined,
    params.subagent_ids !== undefined,
    params.all !== undefined && params.all !== false,
  ];
  if (modes.filter(Boolean).length !== 1) return bad(one);
  if (params.all !== undefined && params.all !== false)
    return params.all === true ? ok({ mode: "all" }) : bad("all must be true.");
  const raw = params.subagent_id !== undefined ? [params.subagent_id] : params.subagent_ids;
  if (!Array.isArray(raw) || raw.length === 0 || !raw.every(nonBlank))
    return bad("subagent_id/subagent_ids must be non-empty subagent ids from crew_spawn.");
  return ok({ mode: "ids", ids: [...new Set(raw.map((s) => s.trim()))] });
}

/** The child's first prompt for a structured task (pi-crew's formatCrewTask). */
export function formatCrewTask(task: CrewTask): string {
  const ctx = task.context.length ? task.context.map((c) => `- ${c}`).join("\n") : "None.";
  const steps = task.instructions.map((s, i) => `${i + 1}. ${s}`).join("\n");
  return `## Goal\n\n${task.goal}\n\n## Context\n\n${ctx}\n\n## Instructions\n\n${steps}`;
}

/** Every crew tool error in model context: {"error": "..."}. */
export function toolErrorText(message: string): string {
  return JSON.stringify({ error: message });
}
