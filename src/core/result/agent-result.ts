// Harvest assembly: evidence in, one AgentResult out. Pure; the daemon gathers the evidence (files, git, runtime).
import { deriveStatus, nextActionFor, resultStatusWarning, type RawState } from "./derive.js";
import type { ParsedResultMd } from "./result-md.js";
import type { SessionFacts } from "../session/session-reader.js";
import { collectWarnings, pickSummary, type SessionFreshness } from "./summary.js";
import { checkWarnings, verifiedOf } from "./check-receipts.js";
import { capNeeds } from "../budget.js";
import type {
  AgentInfo,
  AgentResult,
  CapReached,
  CheckReceipt,
  DiffEvidence,
  Landing,
  HerdrStatus,
  ResultError,
  Role,
  Timing,
  WorktreeInfo,
} from "../types.js";

export interface HarvestInput {
  /** From the task record. */
  taskId: string;
  role: Role;
  agent: AgentInfo;
  brief?: string;
  cwd?: string;
  owner?: string;
  worktree?: WorktreeInfo;
  timing: Timing;
  /** Fused raw state; resultStatus defaults to the parsed result.md's status. */
  raw: RawState;
  /** What Herdr itself said; "unknown" on other runtimes (the default). */
  herdrStatus?: HerdrStatus;
  sessionPath?: string;
  /** Facts from the SessionReader; absent when pi has written no session file yet. */
  session?: SessionFacts;
  /** The session file changed after promptedAt (mtime or last entry time): only then is its final message new. */
  sessionChangedAfterPrompt: boolean;
  /** Where result.md lives (or would): result.path even when the text came from the final message. */
  resultPath?: string;
  /** Parsed result.md; absent when the child wrote none. */
  resultMd?: ParsedResultMd;
  diff?: DiffEvidence;
  /** The harvest is final for this cycle (settled), not a live snapshot: enables the empty-harvest warning. */
  settled?: boolean;
  error?: ResultError;
  /** Caveats found while gathering evidence (git trouble, unreadable files, ...). */
  warnings?: string[];
  /** Receipts of the task's newest check run (src/checks): `checks`, `verified` and a warning per failing check. */
  checks?: CheckReceipt[];
  /** Landability (and landing) of an isolated task's work. */
  landing?: Landing;
  /** The spend cap this settled cycle was paused at (its settle reason): the summary says it. */
  cap?: CapReached;
}

function freshness(input: HarvestInput): SessionFreshness {
  if (input.session === undefined) return "absent";
  return input.sessionChangedAfterPrompt ? "fresh" : "stale";
}

export function buildAgentResult(input: HarvestInput): AgentResult {
  const md = input.resultMd;
  const raw: RawState =
    md?.meta.status !== undefined && input.raw.resultStatus === undefined
      ? { ...input.raw, resultStatus: md.meta.status }
      : input.raw;
  const status = deriveStatus(raw);
  // Only a session that moved after the prompt has a final message for this task; an older one is stale.
  const finalMessage = input.sessionChangedAfterPrompt ? input.session?.finalText : undefined;
  // A task that failed before any prompt went out (setup, launch, a child that never said hello) has no session.
  const unprompted = input.timing.promptedAt === undefined && input.session === undefined;

  const out: AgentResult = {
    schemaVersion: 1,
    taskId: input.taskId,
    status,
    role: input.role,
    agent: { ...input.agent },
    herdrStatus: input.herdrStatus ?? "unknown",
    // A cycle paused at a cap: what it waits for is the owner's word on the spend, not anything the child said.
    summary: input.cap
      ? capNeeds(input.cap)
      : pickSummary({ meta: md?.meta, finalMessage, body: md?.body, status, unprompted }),
    timing: withElapsed(input.timing),
    nextAction: nextActionFor(status),
  };
  if (input.sessionPath !== undefined) out.sessionPath = input.sessionPath;
  if (finalMessage !== undefined) out.finalMessage = finalMessage;
  if (md !== undefined) {
    out.result = { path: input.resultPath ?? "", text: md.body, meta: { ...md.meta } };
  } else if (finalMessage !== undefined) {
    out.result = { path: input.resultPath ?? "", text: finalMessage, meta: {} };
  }
  if (input.diff !== undefined) out.diff = input.diff;
  if (md?.meta.tests !== undefined) out.tests = md.meta.tests;
  if (md?.files !== undefined) out.files = [...md.files];
  if (input.worktree !== undefined) out.worktree = input.worktree;
  if (input.session !== undefined) out.usage = { ...input.session.usage };
  if (input.brief !== undefined) out.brief = input.brief;
  if (input.cwd !== undefined) out.cwd = input.cwd;
  if (input.owner !== undefined) out.owner = input.owner;
  if (input.error !== undefined) out.error = input.error;
  if (input.checks !== undefined && input.checks.length > 0) {
    out.checks = input.checks.map((c) => ({ ...c }));
    out.verified = verifiedOf(input.checks)!;
  }
  if (input.landing !== undefined) out.landing = { ...input.landing, conflicts: [...input.landing.conflicts] };
  if (input.cap !== undefined) out.cap = { ...input.cap };

  const extra = [...(md?.warnings ?? [])];
  const statusWarning = resultStatusWarning(md?.meta.status);
  if (statusWarning !== undefined) extra.push(statusWarning);
  const invalid = input.session?.invalidLines ?? 0;
  if (invalid > 0) extra.push(`session: ${invalid} invalid line(s) skipped`);
  const restarts = input.session?.restarts ?? 0;
  if (restarts > 0) {
    extra.push(
      `session file was truncated or replaced mid-task (${restarts} time(s)): it was read again from the start and usage recomputed from what it holds now`,
    );
  }
  extra.push(...(input.warnings ?? []));
  if (input.checks !== undefined) extra.push(...checkWarnings(input.checks));
  const warnings = collectWarnings({
    role: input.role,
    session: freshness(input),
    hasArtifact: md !== undefined,
    hasFinalMessage: finalMessage !== undefined,
    changedFiles: input.diff ? [...input.diff.files, ...input.diff.untracked] : [],
    dirtyAtStart: input.diff?.dirtyAtStart ?? [],
    ...(input.diff?.dirtyChanged ? { dirtyChanged: input.diff.dirtyChanged } : {}),
    settled: input.settled ?? (nextActionFor(status) !== "wait" && !input.raw.external),
    unprompted,
    extra,
  });
  if (warnings.length > 0) out.warnings = warnings;
  return out;
}

function withElapsed(t: Timing): Timing {
  const timing = { ...t };
  if (timing.elapsedMs === undefined && timing.settledAt !== undefined && timing.settledAt >= timing.createdAt) {
    timing.elapsedMs = timing.settledAt - timing.createdAt;
  }
  return timing;
}

/**
 * The result of a task closed after its cycle settled: the settled result as it stands (verdict, summary, report,
 * diff, warnings), with the lifecycle's `closed` on top. Late files are not read again: a settled cycle is final.
 */
export function closedResult(settled: AgentResult): AgentResult {
  return { ...settled, status: "closed", nextAction: nextActionFor("closed") };
}
