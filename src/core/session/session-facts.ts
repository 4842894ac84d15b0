// Running facts of a pi session (reference/pi.md §1), fed one parsed entry at a time: totals, the current cycle,
// the leaf's stop reason, pi's auto-retry outlook and terminal tools. The byte/line framing is SessionReader's.
import {
  errorEndingOutlook,
  isRetryableError073,
  isRetryOmission,
  piLineOfEntry,
  type PiLine,
} from "./retry-outlook.js";

/** One session line. Only `type` is guaranteed; everything else is read defensively. */
export interface SessionEntry {
  type: string;
  id?: unknown;
  parentId?: unknown;
  timestamp?: unknown;
  message?: unknown;
  [key: string]: unknown;
}

export interface ToolCallFact {
  id: string;
  name: string;
  arguments: unknown;
}

export interface ToolResultFact {
  toolCallId: string;
  toolName: string;
  isError: boolean;
  /** Text blocks of the result, joined with "\n". */
  text: string;
}

export interface UsageFacts {
  /** Assistant messages, less the stubs pi writes for a turn stopped before the model answered (nothing billed). */
  assistant: number;
  toolCalls: number;
  outputTokens: number;
  /** pi's `usage.input` per assistant message: prompt tokens not read from or written to the cache. */
  inputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** USD: pi's `usage.cost.total` per assistant message (pi applies the model's prices from models.json). */
  cost: number;
}

export interface CycleFacts {
  /** 1 for the first prompt; a user/custom message after a settled cycle starts the next. */
  index: number;
  usage: UsageFacts;
  /** Text of this cycle's last assistant message, when it has any. */
  finalText?: string;
  stopReason?: string;
}

export interface SessionFacts {
  sessionId?: string;
  entries: number;
  /** Lines that were not a JSON object with a string `type`, or were over the line bound. */
  invalidLines: number;
  lastEntryType?: string;
  /** Role of the last message-bearing entry (custom_message reads as "custom"). */
  lastMessageRole?: string;
  lastStopReason?: string;
  lastErrorMessage?: string;
  /** Text blocks of the last assistant message joined with "\n"; absent when it had none. */
  finalText?: string;
  /** Epoch ms of the last entry's `timestamp`, when parseable. */
  lastTimestampMs?: number;
  /**
   * The model pi ran, as `provider/modelId`: the latest of the `model_change` entries (written at start and on a
   * switch) and the assistant messages' own provider and model (what answered).
   */
  model?: string;
  /** The thinking level pi ran at: the last `thinking_level_change` entry (written at start and on a change). */
  thinkingLevel?: string;
  usage: UsageFacts;
  /** The last assistant ended in a retryable error and pi's auto-retry has attempts left: not final yet. */
  retryMayFollow: boolean;
  /** Consecutive retryable errors at the leaf (pi gives up after maxRetries + 1). */
  retryableErrors: number;
  /** The conversation's leaf is an assistant that ended the cycle: stop/length/aborted, or an error with no retry. */
  cycleSettled: boolean;
  lastToolCalls: ToolCallFact[];
  /** Tool results seen for lastToolCalls, in arrival order. */
  lastToolResults: ToolResultFact[];
  /** The cycle ended on a terminal tool's successful result (e.g. crew_report); its name. */
  terminatedBy?: string;
  cycle: CycleFacts;
}

// The retry outlook per pi line lives in retry-outlook.ts; these names stay for the reader's callers.
export {
  PI_073_RETRYABLE_ERROR as PI_RETRYABLE_ERROR,
  isRetryableError073 as isRetryableError,
} from "./retry-outlook.js";

const SETTLING_STOPS = new Set(["stop", "length", "aborted"]);

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}
function blocks(content: unknown): Record<string, unknown>[] {
  return Array.isArray(content) ? content.filter(isRecord) : [];
}
function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  return blocks(content)
    .filter((b) => b.type === "text" && typeof b.text === "string")
    .map((b) => b.text as string)
    .join("\n");
}
const zeroUsage = (): UsageFacts => ({
  assistant: 0,
  toolCalls: 0,
  outputTokens: 0,
  inputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  cost: 0,
});
/** A count pi wrote: a finite number ≥ 0, else nothing (a foreign writer or a broken line must not make NaN). */
const count = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v > 0 ? v : 0);
/** USD sums kept to 1e-9 (below any real price step), so 0.1 + 0.2 reads 0.3 in result.json and on the card. */
const addUsd = (a: number, b: number): number => Math.round((a + b) * 1e9) / 1e9;

/** One assistant message's usage as pi wrote it (`usage.{input,output,cacheRead,cacheWrite,cost.total}`). */
function messageUsage(u: unknown): Omit<UsageFacts, "assistant" | "toolCalls"> {
  if (!isRecord(u)) return { outputTokens: 0, inputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, cost: 0 };
  return {
    outputTokens: count(u.output),
    inputTokens: count(u.input),
    cacheReadTokens: count(u.cacheRead),
    cacheWriteTokens: count(u.cacheWrite),
    cost: isRecord(u.cost) ? count(u.cost.total) : 0,
  };
}

export interface SessionFactsOptions {
  /** pi's auto-retry maxRetries (settings retry.maxRetries, default 3). */
  maxRetries?: number;
  /** The pi line that writes the session; by default read from the session (1.x-only entries), else 0.73. */
  piLine?: PiLine;
  /**
   * Tools that end the cycle with `terminate: true` (pi then makes no further model call, so the file ends on the
   * toolResult). Default ["crew_report"].
   */
  terminalTools?: string[];
}

export class SessionFactsBuilder {
  private readonly maxRetries: number;
  private readonly terminalTools: Set<string>;
  private f: SessionFacts;
  private cycleHasAssistant = false;
  private line: PiLine | undefined;
  private lastAssistantId: string | undefined;

  constructor(opts: SessionFactsOptions = {}) {
    this.maxRetries = opts.maxRetries ?? 3;
    this.line = opts.piLine;
    this.terminalTools = new Set(opts.terminalTools ?? ["crew_report"]);
    this.f = {
      entries: 0,
      invalidLines: 0,
      usage: zeroUsage(),
      retryMayFollow: false,
      retryableErrors: 0,
      cycleSettled: false,
      lastToolCalls: [],
      lastToolResults: [],
      cycle: { index: 1, usage: zeroUsage() },
    };
  }

  /** A line that was not a session entry (bad JSON, no string `type`, or over the line bound). */
  invalidLine(): void {
    this.f.invalidLines++;
  }

  /** Start a new cycle now (e.g. the daemon sent a follow-up): per-cycle usage and text restart from zero. */
  resetCycle(): void {
    this.f.cycle = { index: this.f.cycle.index + 1, usage: zeroUsage() };
    this.cycleHasAssistant = false;
  }

  facts(): SessionFacts {
    const f = this.f;
    return {
      ...f,
      usage: { ...f.usage },
      lastToolCalls: [...f.lastToolCalls],
      lastToolResults: [...f.lastToolResults],
      cycle: { ...f.cycle, usage: { ...f.cycle.usage } },
    };
  }

  /** Fold one parsed session entry into the facts. */
  apply(e: SessionEntry): void {
    const f = this.f;
    f.entries++;
    f.lastEntryType = e.type;
    const ts = typeof e.timestamp === "string" ? Date.parse(e.timestamp) : NaN;
    if (!Number.isNaN(ts)) f.lastTimestampMs = ts;
    if (e.type === "session") {
      const id = str(e.id);
      if (id !== undefined) f.sessionId = id;
      return;
    }
    this.line ??= piLineOfEntry(e);
    if (e.type === "model_change") {
      const provider = str(e.provider);
      const modelId = str(e.modelId);
      if (provider && modelId) f.model = `${provider}/${modelId}`;
      return;
    }
    if (e.type === "thinking_level_change") {
      const level = str(e.thinkingLevel);
      if (level !== undefined) f.thinkingLevel = level;
      return;
    }
    if (isRetryOmission(e, this.lastAssistantId)) return this.onRetry();
    if (e.type === "custom_message") return this.onPrompt("custom");
    if (e.type !== "message" || !isRecord(e.message)) return; // metadata entries do not move the conversation
    const m = e.message;
    const role = str(m.role) ?? "unknown";
    if (role === "assistant") {
      this.lastAssistantId = str(e.id);
      return this.onAssistant(m);
    }
    if (role === "system") return; // pi 1.x records each run's system prompt: context, not a prompt
    if (role === "toolResult") {
      f.lastMessageRole = role;
      f.cycleSettled = false;
      const id = str(m.toolCallId);
      if (id !== undefined && f.lastToolCalls.some((c) => c.id === id)) {
        f.lastToolResults.push({
          toolCallId: id,
          toolName: str(m.toolName) ?? "",
          isError: m.isError === true,
          text: textOf(m.content),
        });
        this.checkTerminated();
      }
      return;
    }
    this.onPrompt(role); // user, bashExecution, custom, unknown roles: a request is (or may be) in flight
  }

  /** pi ends the loop when every call of the batch returned terminate; we know which tools do. */
  private checkTerminated(): void {
    const f = this.f;
    const done = f.lastToolCalls.every((c) => {
      const r = f.lastToolResults.find((x) => x.toolCallId === c.id);
      return r !== undefined && !r.isError && this.terminalTools.has(c.name);
    });
    if (done && f.lastToolCalls.length > 0) {
      f.cycleSettled = true;
      f.terminatedBy = f.lastToolCalls[0]!.name;
    }
  }

  private onPrompt(role: string): void {
    const f = this.f;
    if (f.cycleSettled) {
      f.retryableErrors = 0; // pi counts retry attempts per settled prompt
      if (this.cycleHasAssistant) this.resetCycle();
      // A new prompt after a settled cycle: nothing of the last one (its report, stop, error, text) may speak
      // for the next; the totals (usage) stay.
      f.lastToolCalls = [];
      f.lastToolResults = [];
      f.terminatedBy = undefined;
      f.lastStopReason = undefined;
      f.lastErrorMessage = undefined;
      f.finalText = undefined;
    }
    f.lastMessageRole = role;
    f.cycleSettled = false;
    f.retryMayFollow = false;
  }

  private onAssistant(m: Record<string, unknown>): void {
    const f = this.f;
    const stop = str(m.stopReason);
    const err = str(m.errorMessage);
    const calls: ToolCallFact[] = [];
    for (const b of blocks(m.content)) {
      if (b.type === "toolCall") calls.push({ id: str(b.id) ?? "", name: str(b.name) ?? "", arguments: b.arguments });
    }
    const provider = str(m.provider);
    const model = str(m.model);
    if (provider && model) {
      f.model = `${provider}/${model}`;
    }
    const usage = messageUsage(m.usage);
    // The stub pi writes when a turn is stopped before the model answered (aborted, no content, nothing billed) is no
    // turn spent: a turn cap counts `assistant`, and a stopped turn must not count against the next raise.
    const spentNothing =
      stop === "aborted" &&
      blocks(m.content).length === 0 &&
      textOf(m.content) === "" &&
      usage.outputTokens + usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens + usage.cost === 0;
    for (const u of [f.usage, f.cycle.usage]) {
      if (!spentNothing) u.assistant++;
      u.toolCalls += calls.length;
      u.outputTokens += usage.outputTokens;
      u.inputTokens += usage.inputTokens;
      u.cacheReadTokens += usage.cacheReadTokens;
      u.cacheWriteTokens += usage.cacheWriteTokens;
      u.cost = addUsd(u.cost, usage.cost);
    }
    this.cycleHasAssistant = true;
    const text = textOf(m.content);
    f.lastMessageRole = "assistant";
    f.lastStopReason = stop;
    f.lastErrorMessage = err;
    f.finalText = text === "" ? undefined : text;
    f.cycle.finalText = f.finalText;
    f.cycle.stopReason = stop;
    f.lastToolCalls = calls;
    f.lastToolResults = [];
    f.terminatedBy = undefined;
    const line = this.line ?? "0.73";
    // 0.73 writes no retry marker: its rule decides now. 1.x marks a retry with the omission that follows
    // (onRetry); until then its error ending stands as final.
    if (line === "0.73") f.retryableErrors = stop === "error" && isRetryableError073(err) ? f.retryableErrors + 1 : 0;
    else if (stop !== "error") f.retryableErrors = 0;
    const settings = { enabled: true, maxRetries: this.maxRetries };
    f.retryMayFollow =
      stop === "error" &&
      errorEndingOutlook(line, { errorMessage: err, settings, retryableInARow: f.retryableErrors }) === "retry";
    f.cycleSettled = (stop !== undefined && SETTLING_STOPS.has(stop)) || (stop === "error" && !f.retryMayFollow);
  }

  /** pi 1.x omitted the leaf's failed attempt from the context: it is retrying (or compacting and re-running). */
  private onRetry(): void {
    const f = this.f;
    f.retryableErrors++;
    f.retryMayFollow = true;
    f.cycleSettled = false;
  }
}

/** The flowchart's "session error": the cycle settled on a pi error that no retry will follow. */
export function sessionErrorOf(f: SessionFacts): boolean {
  return f.cycleSettled && f.lastStopReason === "error";
}
