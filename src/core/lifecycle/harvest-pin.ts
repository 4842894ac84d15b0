// What a harvest judged, pinned in the journal, and the AgentResult as a pure function of it. The daemon builds every
// result through resultFromPin (live snapshots and settled harvests alike); a settled harvest and the close of a
// running cycle journal their pin in their status record, with result.md's text copied beside it (result.c<N>.md) and
// diff.patch's digest, so `dsh-herdr verify` rebuilds the same result from the task dir alone (src/core/lifecycle/verify.ts).
import { buildAgentResult } from "../result/agent-result.js";
import type { CheckReceipt, Landing } from "../types.js";
import { withReportAsFinalText, type CrewReport } from "../crew/crew-cycle.js";
import type { SettleReason } from "./cycle-phase.js";
import type { Lifecycle, RawState } from "../result/derive.js";
import { type ParsedResultMd, type ParseYaml, RESULT_MD_MAX_BYTES, readResultMd } from "../result/result-md-read.js";
import { sessionErrorOf, type SessionFacts } from "../session/session-reader.js";
import { LATE_RESULT_WARNING, settleError, settleVerdict } from "./settle-verdict.js";
import type {
  AgentInfo,
  AgentResult,
  CapReached,
  DiffEvidence,
  HerdrStatus,
  ResultError,
  Role,
  Timing,
  WorktreeInfo,
} from "../types.js";

/** The task's own fields a result carries, from task.json: they do not change with a cycle's evidence. */
export interface TaskFields {
  taskId: string;
  role: Role;
  brief?: string;
  cwd: string;
  owner: string;
  worktree?: WorktreeInfo;
  sessionPath: string;
  resultPath: string;
}

/** result.md as a harvest read it: its text (copied to `file` in the task dir, with its sha256), or why it was refused. */
export type PinnedResultMd = { file: string; sha256: string } | { refused: string };

/**
 * Everything a harvest read besides the task's own fields, the session (read up to the status record's
 * sessionOffset) and result.md's text: what the runtime said, the child's report and pi's stop reason as the
 * extension told them, the diff (and diff.patch's sha256), the record's warnings and timing.
 */
export interface HarvestPin {
  /** As the record asked (requested model and thinking level): the session's own model and level override them. */
  agent: AgentInfo;
  timing: Timing;
  /** The runtime's state: "working" while a cycle runs, "idle" once settled, "missing" when the child is gone. */
  runtime: HerdrStatus | "missing";
  herdrStatus?: HerdrStatus;
  /** The lifecycle override used (closed, interrupted, starting). */
  lifecycle?: Lifecycle;
  settled: boolean;
  /** The session moved after the prompt: its final message is this cycle's. */
  fresh: boolean;
  /** The extension's agent_end stop reason and error text (for a session that does not show them). */
  stopReason?: string;
  errorText?: string;
  /** The crew_report the cycle ended with (the extension's, else the session's). */
  report?: CrewReport;
  resultMd?: PinnedResultMd;
  diff?: DiffEvidence;
  /** sha256 of diff.patch as the harvest left it. */
  diffSha256?: string;
  /** The disk was full at the settle (named in a PANE_GONE/AGENT_ERROR message). */
  diskNote?: string;
  /** The error carried when no settle reason judges it (a close of a running cycle, a live snapshot). */
  error?: ResultError;
  /** The record's warnings (git, baseline, disk, landability): the result adds its own to them. */
  warnings?: string[];
  /** Times the session was found truncated or replaced and read again from the start. */
  sessionRestarts?: number;
  /** The harvest read a session file (up to the status record's sessionOffset). */
  session?: true;
}

/** What the rebuild reads besides the pin. */
export interface PinnedEvidence {
  /** The session's facts up to the pinned offset. */
  session?: SessionFacts;
  /** result.md's pinned text, parsed (resultMdOf). */
  resultMd?: ParsedResultMd;
  /** The settle record's reason, for a settled harvest: it fixes the status where it can and judges the error. */
  reason?: SettleReason;
  /** The record's check receipts and landing (task.json: check and land rewrite them after a settle). */
  checks?: CheckReceipt[];
  landing?: Landing;
  /** result.md changed after the settle (a late_evidence record): the settled result stands, with one warning. */
  late?: boolean;
}

/** result.md's text (or its refusal) parsed as every harvest parses it (yaml's parse: result-md.ts parseYaml). */
export function resultMdOf(raw: { text: string } | { refused: string }, parseYaml: ParseYaml): ParsedResultMd {
  return "text" in raw
    ? readResultMd(raw.text, parseYaml, { maxBytes: RESULT_MD_MAX_BYTES })
    : { meta: {}, body: "", warnings: [raw.refused] };
}

/** The error a pinned settled harvest carries, judged from its reason and evidence (settleError). */
export function pinnedError(task: TaskFields, pin: HarvestPin, ev: PinnedEvidence): ResultError | undefined {
  if (!ev.reason || !pin.settled) return pin.error;
  return settleError(ev.reason, {
    hasReport: pin.report !== undefined,
    ...optional("stopReason", ev.session?.lastStopReason ?? pin.stopReason),
    ...optional("errorMessage", ev.session?.lastErrorMessage ?? pin.errorText),
    ...optional("diskNote", pin.diskNote),
    sessionPath: task.sessionPath,
  });
}

/** The AgentResult of a harvest: a pure function of the task's fields, the pin and what it pinned. */
export function resultFromPin(task: TaskFields, pin: HarvestPin, ev: PinnedEvidence = {}): AgentResult {
  const facts = ev.session && {
    ...withReportAsFinalText(ev.session),
    ...(pin.sessionRestarts ? { restarts: pin.sessionRestarts } : { restarts: 0 }),
  };
  // A verdict that fails the cycle reads failed whatever the runtime says (a launch, a stall, a refused prompt).
  const failed = ev.reason !== undefined && pin.settled && settleVerdict(ev.reason).status === "failed";
  // A settled cycle's last stop reason is final (the extension already ruled out a coming retry).
  const lastStop = facts?.lastStopReason ?? pin.stopReason;
  const sessionError = failed || (pin.settled ? lastStop === "error" : facts ? sessionErrorOf(facts) : false);
  // A cycle the machine paused at a spend cap reads blocked, with the cap (its summary says what it waits for).
  const cap = pin.settled ? capOf(ev.reason) : undefined;
  const raw: RawState = {
    external: false,
    runtime: failed ? "done" : cap ? "blocked" : pin.runtime,
    sessionError,
  };
  if (pin.lifecycle) raw.lifecycle = pin.lifecycle;
  const error = pinnedError(task, pin, ev);
  const result = buildAgentResult({
    taskId: task.taskId,
    role: task.role,
    agent: {
      ...pin.agent,
      model: facts?.model ?? pin.agent.model,
      thinking: facts?.thinkingLevel ?? pin.agent.thinking,
    },
    ...(task.brief !== undefined ? { brief: task.brief } : {}),
    cwd: task.cwd,
    owner: task.owner,
    ...(task.worktree ? { worktree: task.worktree } : {}),
    timing: { ...pin.timing },
    raw,
    herdrStatus: pin.herdrStatus ?? "unknown",
    sessionPath: task.sessionPath,
    ...(facts ? { session: facts } : {}),
    sessionChangedAfterPrompt: pin.fresh,
    resultPath: task.resultPath,
    ...(ev.resultMd ? { resultMd: ev.resultMd } : {}),
    ...(pin.diff ? { diff: pin.diff } : {}),
    settled: pin.settled,
    ...(error ? { error } : {}),
    ...(pin.warnings?.length ? { warnings: pin.warnings } : {}),
    ...(ev.checks ? { checks: ev.checks } : {}),
    ...(ev.landing ? { landing: ev.landing } : {}),
    ...(cap ? { cap } : {}),
  });
  if (ev.late && !result.warnings?.includes(LATE_RESULT_WARNING))
    result.warnings = [...(result.warnings ?? []), LATE_RESULT_WARNING];
  return result;
}

/** The spend cap a settle reason paused the cycle at (its `cap` settle reason). */
function capOf(reason: SettleReason | undefined): CapReached | undefined {
  if (reason?.kind !== "cap") return undefined;
  return { cap: reason.cap, limit: reason.limit, spent: reason.spent, step: reason.step };
}

function optional<K extends string, V>(k: K, v: V | undefined): { [P in K]?: V } {
  return (v === undefined ? {} : { [k]: v }) as { [P in K]?: V };
}

/** The task dir's copy of result.md as the harvest of `cycle` read it. */
export const pinnedResultFile = (cycle: number): string => `result.c${cycle}.md`;
