// Every record a task's journal (events.jsonl) holds, one union keyed by `type`: what the daemon, the relay and the
// store write, and what recovery, verify and the relay read back. A kind added here must be handled by every reader
// (each switches exhaustively), and one a writer uses must be here. Read from disk through parseJournalRecord: a
// line it does not recognise (an older or newer daemon's kind, a field of the wrong type) is left out, as a torn one is.
import { parseSettleReason, type JournalEntry, type SettleReason } from "./cycle-phase.js";
import type { HarvestPin } from "./harvest-pin.js";
import type { CheckCutOff, LandedBy, RuntimeKind } from "../types.js";

/** What every record may carry: when it was written (the store adds it) and whether it is a relayed task's. */
interface Base {
  /** Epoch ms of the append (the store sets it). */
  ts?: number;
  /** A relayed task's record: the other machine's daemon ran what it records. */
  remote?: boolean;
}

/** A launched child's handle as the journal keeps it (src/runtime/types.ts RuntimeHandle; the runtime reads the rest). */
export interface JournaledHandle {
  runtime: RuntimeKind;
}

/** A check's receipt in the journal: what it ran and how it ended, not its output. */
export interface JournaledReceipt {
  command: string;
  exitCode: number | null;
  durationMs: number;
  logPath: string;
  cutOff?: CheckCutOff;
}

/** The status record's pin: a local harvest's (HarvestPin) or a relayed one's (the diff its machine sent). */
export type StatusPin = HarvestPin | { remote: true; diffSha256: string };

/**
 * The lifecycle's own records (src/core/lifecycle/cycle-phase.ts JournalEntry), as read back: a settle's adds the disk's state.
 * A field no reader needs is optional where older daemons may have left it out.
 */
type LifecycleRecord =
  | Exclude<JournalEntry, { type: "settle" | "stalled" }>
  | { type: "stalled"; cycle?: number; attempt?: number; error?: string }
  | {
      type: "settle";
      cycle: number;
      why?: SettleReason["kind"] | (string & {});
      /** Absent when an older daemon's reason is not one this daemon knows (the cycle still settled). */
      reason?: SettleReason;
      /** "ok", or the note naming a full disk at the settle (records of older daemons carry neither). */
      disk?: string;
    };

/** The daemon's and the relay's records beside the lifecycle's. */
type DaemonRecord =
  /** The task was created with this status (the store's first record). */
  | { type: "created"; status: string }
  | { type: "admitted"; queuedMs: number }
  | { type: "worktree"; path: string; branch?: string }
  /** The baseline; its dirty list when it was short enough to journal, else only the count (none: 0). */
  | { type: "baseline"; head: string | null; dirty?: number; dirtyAtStart?: string[] }
  /** The worktree setup's process group, journaled as it starts (its end is the `setup` record). */
  | { type: "setup_started"; pgid: number }
  /** The worktree setup ended; `from`/`commit`: what it changed that git sees, committed as the baseline. */
  | {
      type: "setup";
      ok: boolean;
      command?: string;
      include?: string[];
      /** The ignored files copied and linked into the worktree (the repo's `include`). */
      copied?: string[];
      linked?: string[];
      exitCode?: number | null;
      durationMs?: number;
      logPath?: string;
      cutOff?: CheckCutOff;
      signal?: string;
      from?: string;
      commit?: string;
    }
  /** A restarted daemon ended the setup its predecessor died during. */
  | { type: "setup_ended"; pgid: number; pids: number[]; why: string }
  | { type: "launched"; attempt?: number; runtime?: RuntimeKind; handle?: JournaledHandle; adopted?: boolean }
  /** A cycle's prompt went out (`via: "runtime"`: typed into the pane, no extension). */
  | { type: "prompt_sent"; cycle: number; bytes?: number; via?: "runtime" }
  /** The child sent itself the one finalization follow-up after a reportless ending. */
  | { type: "finalize_prompt"; cycle?: number; why?: string }
  /** The child's second reportless ending (the protocol's contract error). */
  | { type: "contract_error"; cycle?: number; why?: string }
  | { type: "report"; cycle?: number; outcome: "completed" | "needs_input" }
  | { type: "runtime_gone" }
  | { type: "runtime_exited"; exit: { code: number | null; signal?: string | null } }
  /** A follow-up made durable (a relaying daemon's `requestId` rides along for idempotency). */
  | { type: "respond"; cycle: number; bytes?: number; requestId?: string }
  | {
      type: "checks";
      cycle: number;
      verified: boolean;
      receipts: JournaledReceipt[];
      onDemand?: boolean;
      /** "merged": run on the merged tree of a landing. */
      on?: "merged";
    }
  | { type: "landability"; cycle: number; baseBranch: string; baseHead: string; clean: boolean; conflicts: string[] }
  /** Open siblings whose work conflicts; `from`: another task's settle set (or dropped) its warning on this one. */
  | {
      type: "siblings";
      cycle: number;
      conflicts: { taskId: string; paths: string[] }[];
      from?: string;
      warning?: string;
    }
  /** A status harvested and recorded (`settled`: the cycle's settled harvest; `pin`: what it was built from). */
  | { type: "status"; status: string; cycle: number; settled?: boolean; sessionOffset?: number; pin?: StatusPin }
  | {
      type: "landed";
      cycle: number;
      commit?: string;
      strategy?: LandedBy;
      baseBranch?: string;
      workHead?: string;
      committed?: string;
      recovered?: boolean;
    }
  /** A note for people reading the journal: what recovery did (recovery decides from the other records). */
  | {
      type: "recovered";
      plan: string;
      alive?: boolean;
      status?: string;
      cycle?: number;
      action?: string;
      error?: string;
      label?: string;
      phase?: string;
    }
  | { type: "owner_moved"; from: string; to: string }
  /** A relayed task's follow-up cycle started here (before its record is rewritten). */
  | { type: "remote_cycle"; cycle: number }
  | { type: "remote_spawned"; label: string; remoteTaskId: string; requestId: string }
  /** A request to the other machine made durable before it is sent (src/daemon/relay/relay-requests.ts). */
  | { type: "remote_request"; requestId: string; method: string; cycle: number }
  | { type: "remote_request_refused"; requestId: string; code: string; message: string };

export type JournalRecord = (LifecycleRecord | DaemonRecord) & Base;
export type JournalKind = JournalRecord["type"];
export type JournalRecordOf<K extends JournalKind> = Extract<JournalRecord, { type: K }>;

/** The lifecycle's entry as the journal keeps it (a settle's `disk` is added by the runner). */
export function journalRecord(entry: JournalEntry): JournalRecord {
  if (entry.type === "settle") return { type: "settle", why: entry.why, cycle: entry.cycle, reason: entry.reason };
  return { ...entry };
}

// ---- reading back ----

type FieldCheck = (v: unknown) => boolean;
const num: FieldCheck = (v) => typeof v === "number" && Number.isFinite(v);
const int: FieldCheck = (v) => Number.isSafeInteger(v);
const str: FieldCheck = (v) => typeof v === "string";
const bool: FieldCheck = (v) => typeof v === "boolean";
const obj: FieldCheck = (v) => typeof v === "object" && v !== null && !Array.isArray(v);
const strOrNull: FieldCheck = (v) => v === null || typeof v === "string";
const numOrNull: FieldCheck = (v) => v === null || num(v);
const strs: FieldCheck = (v) => Array.isArray(v) && v.every((x) => typeof x === "string");
const nums: FieldCheck = (v) => Array.isArray(v) && v.every(int);
const objs: FieldCheck = (v) => Array.isArray(v) && v.every(obj);
const oneOf =
  (...xs: unknown[]): FieldCheck =>
  (v) =>
    xs.includes(v);
const runtimeKind = oneOf("herdr", "tmux", "headless");
const handleOf: FieldCheck = (v) => obj(v) && runtimeKind((v as { runtime?: unknown }).runtime);
const exitOf: FieldCheck = (v) => obj(v) && numOrNull((v as { code?: unknown }).code);

/**
 * Each kind's fields: `req` must be there with the right type (else the record is left out: the readers act on
 * them); an `opt` field of the wrong type is dropped (a reader treats it as absent, as before the union).
 */
interface Spec {
  req?: Record<string, FieldCheck>;
  opt?: Record<string, FieldCheck>;
}

const SPECS: { [K in JournalKind]: Spec } = {
  prompt_accepted: { req: { cycle: int } },
  prompt_failed: { req: { cycle: int, error: str } },
  settle: { req: { cycle: int }, opt: { why: str, disk: str } },
  late_evidence: { req: { cycle: int, what: str } },
  parked: { req: { cycle: int } },
  stalled: { opt: { cycle: int, attempt: int, error: str } },
  interrupted: { opt: { code: str } },
  closed: { req: { closePane: bool }, opt: { via: oneOf("abort") } },
  steered: { req: { cycle: int, n: int, bytes: num } },
  steer_taken: { req: { cycle: int, n: int } },
  steer_missed: { req: { cycle: int, n: int } },
  created: { req: { status: str } },
  admitted: { req: { queuedMs: num } },
  worktree: { req: { path: str }, opt: { branch: str } },
  baseline: { req: { head: strOrNull }, opt: { dirty: num, dirtyAtStart: strs } },
  setup_started: { req: { pgid: int } },
  setup: {
    req: { ok: bool },
    opt: {
      command: str,
      include: strs,
      copied: strs,
      linked: strs,
      exitCode: numOrNull,
      durationMs: num,
      logPath: str,
      cutOff: oneOf("timeout", "output"),
      signal: str,
      from: str,
      commit: str,
    },
  },
  setup_ended: { req: { pgid: int, pids: nums, why: str } },
  launched: { opt: { attempt: int, runtime: runtimeKind, handle: handleOf, adopted: bool } },
  prompt_sent: { req: { cycle: int }, opt: { bytes: num, via: oneOf("runtime") } },
  finalize_prompt: { opt: { cycle: int, why: str } },
  contract_error: { opt: { cycle: int, why: str } },
  report: { req: { outcome: oneOf("completed", "needs_input") }, opt: { cycle: int } },
  runtime_gone: {},
  runtime_exited: { req: { exit: exitOf } },
  respond: { req: { cycle: int }, opt: { bytes: num, requestId: str } },
  checks: { req: { cycle: int, verified: bool, receipts: objs }, opt: { onDemand: bool, on: oneOf("merged") } },
  landability: { req: { cycle: int, baseBranch: str, baseHead: str, clean: bool, conflicts: strs } },
  siblings: { req: { cycle: int, conflicts: objs }, opt: { from: str, warning: str } },
  status: { req: { status: str, cycle: int }, opt: { settled: bool, sessionOffset: num, pin: obj } },
  landed: {
    req: { cycle: int },
    opt: {
      commit: str,
      strategy: oneOf("fast-forward", "merge", "squash", "rebase"),
      baseBranch: str,
      workHead: str,
      committed: str,
      recovered: bool,
    },
  },
  recovered: {
    req: { plan: str },
    opt: { alive: bool, status: str, cycle: int, action: str, error: str, label: str, phase: str },
  },
  owner_moved: { req: { from: str, to: str } },
  remote_cycle: { req: { cycle: int } },
  remote_spawned: { req: { label: str, remoteTaskId: str, requestId: str } },
  remote_request: { req: { requestId: str, method: str, cycle: int } },
  remote_request_refused: { req: { requestId: str, code: str, message: str } },
};

/** Every kind the journal holds (for tests and the reader's count). */
export const JOURNAL_KINDS = Object.keys(SPECS) as JournalKind[];

const isKind = (t: unknown): t is JournalKind => typeof t === "string" && Object.hasOwn(SPECS, t);

/**
 * One journal line, parsed, as a record of a known kind; undefined when it is none (an unknown kind, a required
 * field missing or of the wrong type). Optional fields of the wrong type are dropped, and a settle's reason that is
 * not one this daemon knows is dropped too (the cycle still settled; the reason is not re-judged).
 */
export function parseJournalRecord(v: unknown): JournalRecord | undefined {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return undefined;
  const raw = v as Record<string, unknown>;
  if (!isKind(raw.type)) return undefined;
  const spec = SPECS[raw.type];
  for (const [k, ok] of Object.entries(spec.req ?? {})) if (!ok(raw[k])) return undefined;
  const out: Record<string, unknown> = { ...raw };
  for (const [k, ok] of Object.entries(spec.opt ?? {})) if (k in out && !ok(out[k])) delete out[k];
  if (out.ts !== undefined && !num(out.ts)) delete out.ts;
  if (out.remote !== undefined && out.remote !== true) delete out.remote;
  if (raw.type === "settle") {
    const reason = parseSettleReason(raw.reason);
    if (reason) out.reason = reason;
    else delete out.reason;
  }
  return out as unknown as JournalRecord;
}

/** A journal read back: its known records in order, and how many lines were left out as unknown. */
export function parseJournal(lines: readonly unknown[]): { records: JournalRecord[]; unknown: number } {
  const records: JournalRecord[] = [];
  let unknown = 0;
  for (const line of lines) {
    const r = parseJournalRecord(line);
    if (r) records.push(r);
    else unknown++;
  }
  return { records, unknown };
}
