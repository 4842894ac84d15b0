// Harvest: evidence (runtime state, session facts, result.md, git) → one AgentResult, validated against
// schema/agent-result.schema.json before it is written or returned.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import { buildAgentResult } from "../core/agent-result.js";
import type { RawState } from "../core/derive.js";
import { DshError } from "../core/errors.js";
import { PI_DEFAULT_MODEL } from "../core/model-choice.js";
import { sessionErrorOf, type SessionFacts } from "../core/session-reader.js";
import type { AgentResult, CapReached, DiffEvidence, HerdrStatus } from "../core/types.js";
import type { ParsedResultMd } from "../core/result-md.js";
import { harvestDiff } from "../git/diff.js";
import { packageRoot } from "./protocol.js";
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
  /** A failure with no child evidence (launch, stall, queue timeout): reads as a failed cycle. */
  failed?: boolean;
  /** The first cycle's prompt is not taken yet (queued, launching, or pushed and unconfirmed): `starting`. */
  awaitingFirstPrompt?: boolean;
  /** The spend cap the cycle settled on (blocked; the summary says it). */
  cap?: CapReached;
}

export function assemble(ev: Evidence): AgentResult {
  const { rec } = ev;
  // A settled cycle's last stop reason is final (the extension already ruled out a coming retry).
  const lastStop = ev.facts?.lastStopReason ?? ev.eventStopReason;
  const sessionError =
    ev.failed === true || (ev.settled ? lastStop === "error" : ev.facts ? sessionErrorOf(ev.facts) : false);
  const raw: RawState = { external: false, runtime: ev.failed ? "done" : ev.runtime, sessionError };
  if (rec.lifecycle) raw.lifecycle = rec.lifecycle;
  // Starting until pi takes the first prompt; a settled task without one reads from its evidence (gone, failed).
  else if ((ev.awaitingFirstPrompt ?? rec.timing.promptedAt === undefined) && !ev.failed && !ev.settled)
    raw.lifecycle = "starting";
  const result = buildAgentResult({
    taskId: rec.taskId,
    role: rec.role,
    agent: agentInfo(rec, ev.facts),
    ...(rec.brief !== undefined ? { brief: rec.brief } : {}),
    cwd: rec.cwd,
    owner: rec.owner,
    ...(rec.worktree ? { worktree: rec.worktree } : {}),
    timing: { ...rec.timing },
    raw,
    herdrStatus: ev.herdrStatus ?? "unknown",
    sessionPath: rec.sessionPath,
    ...(ev.facts ? { session: ev.facts } : {}),
    sessionChangedAfterPrompt: ev.sessionChangedAfterPrompt,
    resultPath: rec.resultPath,
    ...(ev.resultMd ? { resultMd: ev.resultMd } : {}),
    ...(ev.diff ? { diff: ev.diff } : {}),
    settled: ev.settled,
    ...(rec.error ? { error: rec.error } : {}),
    ...(rec.warnings?.length ? { warnings: rec.warnings } : {}),
    // The daemon-run checks' receipts and the work's landability (src/daemon/land-methods.ts, settleChecks).
    ...landFieldsOf(rec),
    ...(ev.cap ? { cap: ev.cap } : {}),
  });
  validateAgentResult(result);
  return result;
}

/**
 * The model and thinking level are what pi ran, read from its session (model_change, thinking_level_change, the
 * assistant's own provider/model); until the session says, what was asked for (pi may clamp a level the model cannot
 * do, or pick its own default model).
 */
function agentInfo(rec: TaskRecord, facts: SessionFacts | undefined): AgentResult["agent"] {
  const h = rec.handle;
  const a: AgentResult["agent"] = {
    name: rec.name,
    kind: rec.kind,
    model: facts?.model ?? rec.model ?? PI_DEFAULT_MODEL,
    thinking: facts?.thinkingLevel ?? rec.thinking,
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
  rec: TaskRecord,
  patchPath: string,
  capBytes: number,
): Promise<{ diff?: DiffEvidence; warning?: string }> {
  if (!rec.baseline?.isRepo) return {};
  try {
    return {
      diff: await harvestDiff({
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
