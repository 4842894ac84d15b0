// Harvest helpers: the AgentResult schema check every result passes before it is written or returned, the agent as
// the record asked for it, and the baseline diff of a settled cycle. The result itself is core's resultFromPin
// (src/core/lifecycle/harvest-pin.ts), fed by settle.ts.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import type { Lifecycle } from "../../core/result/derive.js";
import { DshError } from "../../core/errors.js";
import { resultFromPin, type TaskFields } from "../../core/lifecycle/harvest-pin.js";
import { PI_DEFAULT_MODEL } from "../../core/session/model-choice.js";
import type { SessionFacts } from "../../core/session/session-reader.js";
import type { AgentResult, DiffEvidence, HerdrStatus } from "../../core/types.js";
import type { ParsedResultMd } from "../../core/result/result-md.js";
import type { GitPort } from "../ports/git-port.js";
import { packageRoot } from "../../protocol/schemas.js";
import { landFieldsOf, type TaskRecord } from "./record.js";

let validator: ValidateFunction | undefined;

export function validateAgentResult(result: unknown): asserts result is AgentResult {
  if (!validator) {
    const schema = JSON.parse(readFileSync(join(packageRoot, "schema", "agent-result.schema.json"), "utf8")) as object;
    validator = new Ajv2020({ strict: false, allErrors: false }).compile(schema);
  }
  if (!validator(result)) {
    const e = validator.errors?.[0];
    throw new DshError(
      "RESULT_INVALID",
      `AgentResult${e?.instancePath ?? ""} ${e?.message ?? "is invalid"} (schema/agent-result.schema.json); please report this bug`,
    );
  }
}

export interface Evidence {
  rec: TaskRecord;
  /** "working" while a cycle runs, "idle" once settled, "missing" when the child is gone; Herdr's own state wins for blocked/missing. */
  runtime: HerdrStatus | "missing";
  herdrStatus?: HerdrStatus;
  facts?: SessionFacts;
  /** Stop reason from the child extension's agent_end, for a session file that does not exist yet. */
  eventStopReason?: string;
  resultMd?: ParsedResultMd;
  /** When the current cycle's prompt was sent: only a session that moved after it has a new final message. */
  sessionChangedAfterPrompt: boolean;
  diff?: DiffEvidence;
  settled: boolean;
  /** The lifecycle override (closed, interrupted, starting). */
  lifecycle?: Lifecycle;
}

/** One AgentResult from evidence gathered by hand (tests, tools): the harvest's own path is settle.ts → resultFromPin. */
export function assemble(ev: Evidence): AgentResult {
  const { rec } = ev;
  const result = resultFromPin(
    taskFields(rec),
    {
      agent: agentAsked(rec),
      timing: { ...rec.timing },
      runtime: ev.runtime,
      ...(ev.herdrStatus ? { herdrStatus: ev.herdrStatus } : {}),
      // A record written before the lifecycle was read from the phase carries it as `lifecycle`.
      ...((ev.lifecycle ?? rec.lifecycle) ? { lifecycle: ev.lifecycle ?? rec.lifecycle } : {}),
      settled: ev.settled,
      fresh: ev.sessionChangedAfterPrompt,
      ...(ev.eventStopReason !== undefined ? { stopReason: ev.eventStopReason } : {}),
      ...(ev.diff ? { diff: ev.diff } : {}),
      ...(rec.error ? { error: rec.error } : {}),
      ...(rec.warnings?.length ? { warnings: rec.warnings } : {}),
    },
    {
      ...(ev.facts ? { session: ev.facts } : {}),
      ...(ev.resultMd ? { resultMd: ev.resultMd } : {}),
      ...landFieldsOf(rec),
    },
  );
  validateAgentResult(result);
  return result;
}

/** The task's own fields a result carries (task.json). */
export function taskFields(rec: TaskRecord): TaskFields {
  return {
    taskId: rec.taskId,
    role: rec.role,
    ...(rec.brief !== undefined ? { brief: rec.brief } : {}),
    cwd: rec.cwd,
    owner: rec.owner,
    ...(rec.worktree ? { worktree: rec.worktree } : {}),
    sessionPath: rec.sessionPath,
    resultPath: rec.resultPath,
  };
}

/**
 * The agent as the record asked for it: the model and thinking level requested (pi's default model when none), the
 * runtime and the child's ids there. What pi ran (the session's model_change, thinking_level_change, the assistant's
 * own provider/model) overrides model and thinking in resultFromPin.
 */
export function agentAsked(rec: TaskRecord): AgentResult["agent"] {
  const h = rec.handle;
  const a: AgentResult["agent"] = {
    name: rec.name,
    kind: rec.kind,
    model: rec.model ?? PI_DEFAULT_MODEL,
    thinking: rec.thinking,
    runtime: rec.runtime,
  };
  if (rec.machine) a.machine = rec.machine;
  if (h?.paneId) a.paneId = h.paneId;
  if (h?.tabId) a.tabId = h.tabId;
  if (h?.workspaceId) a.workspaceId = h.workspaceId;
  const rid = h?.tmuxPaneId ?? h?.paneId ?? (h?.pid !== undefined ? String(h.pid) : undefined);
  if (rid) a.runtimeId = rid;
  return a;
}

/** The baseline diff of a settled cycle; a git problem becomes a warning, never a lost harvest. */
export async function diffFor(
  git: Pick<GitPort, "harvestDiff">,
  rec: TaskRecord,
  patchPath: string,
  capBytes: number,
): Promise<{ diff?: DiffEvidence; warning?: string }> {
  if (!rec.baseline?.isRepo) return {};
  try {
    return {
      diff: await git.harvestDiff({
        cwd: rec.workdir,
        baselineHead: rec.baseline.head,
        dirtyAtStart: rec.baseline.dirtyAtStart,
        patchPath,
        capBytes,
        ...(rec.baseline.dirtyHashes ? { dirtyHashes: rec.baseline.dirtyHashes } : {}),
      }),
    };
  } catch (e) {
    return { warning: `diff not harvested: ${(e as Error).message}` };
  }
}
