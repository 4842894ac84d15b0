// `dsh-herdr verify`: a task's result.json rebuilt from its task dir and compared field by field. The journal is
// replayed through the pure machine (step) for the verdict (each cycle's settle record, its settled status record,
// the close); the AgentResult is rebuilt by the pure derivation (resultFromPin) from what the harvest pinned in its
// status record (the report, pi's stop reason, the diff and its digest, the warnings, the timing), the session read
// up to the pinned offset and result.md's pinned copy. Pure: the caller reads the task dir and hashes the files
// (src/cli/commands/verify.ts). A task dir written before harvests were pinned is checked as far as it can be, and
// says what it could not check.
import { closedResult } from "../result/agent-result.js";
import { landFieldsOf } from "../result/check-receipts.js";
import {
  DEFAULT_LIMITS,
  isInFlight,
  type CycleEvent,
  type Phase,
  type SettleReason,
  type TaskState,
} from "./cycle-phase.js";
import { nextActionFor } from "../result/derive.js";
import { resultFromPin, resultMdOf, type HarvestPin, type TaskFields } from "./harvest-pin.js";
import type { ParseYaml } from "../result/result-md-read.js";
import type { SessionFacts } from "../session/session-reader.js";
import { settleVerdict } from "./settle-verdict.js";
import { withSiblingWarning } from "../result/sibling-warning.js";
import { step } from "./task-cycle.js";
import type { AgentResult, CheckReceipt, Landing } from "../types.js";

import type { JournalRecord, JournalRecordOf } from "./journal-record.js";
export type { JournalRecord };

/** The task's record (task.json) as verify reads it: its own fields, its cycle, its checks and landing. */
export type VerifyRecord = TaskFields & {
  cycle: number;
  checkRun?: { cycle: number; receipts: CheckReceipt[] };
  landing?: Landing;
};

export interface VerifyInput {
  /** events.jsonl, parsed (lines that are not JSON objects left out). */
  events: JournalRecord[];
  /** result.json as stored. */
  result: AgentResult;
  /** task.json (absent: unreadable or gone). */
  record?: VerifyRecord;
  /** The session's facts from its first `offset` bytes (undefined: no session file here). */
  sessionUpTo?(offset: number): SessionFacts | undefined;
  /** A file of the task dir by name (result.md's pinned copy): its text and sha256, undefined when missing. */
  readPinned?(name: string): { text: string; sha256: string } | undefined;
  /** diff.patch as on disk: its size and sha256 (absent: none here). */
  patch?: { bytes: number; sha256: string };
  /**
   * Only the session, as before the rebuild (tests of the old checks): the session's facts up to the offset the
   * last status record pinned.
   */
  session?: SessionFacts;
  /** diff.patch's size only (the old checks). */
  patchBytes?: number;
  /** yaml's parse (result-md.ts parseYaml), for a pinned result.md whose frontmatter is more than plain lines. */
  parseYaml: ParseYaml;
}

export interface Difference {
  field: string;
  /** What result.json says. */
  stored: unknown;
  /** What the evidence says. */
  expected: unknown;
  /** Which evidence: "the journal", "the session", "diff.patch", "the task dir". */
  source: string;
  /** Why the evidence says so, e.g. the settle reason's code. */
  why?: string;
}

/** What the journal, replayed through the machine, says a task's final state is. */
export interface JournalVerdict {
  cycle: number;
  closed: boolean;
  /** The final phase the machine reached. */
  phase: Phase;
  /** The status the last settled status record of `cycle` gives. */
  settledStatus?: string;
  /** The session offset the last status record pinned (result.json was written with it). */
  sessionOffset?: number;
  /** The last status record's status: a task still running has no verdict to check yet. */
  lastStatus?: string;
  reason?: SettleReason;
  /** A late result.md after the settle: the settled result stands (its text is not re-read). */
  lateEvidence: boolean;
  /** The status record whose pin result.json was built from (a settled harvest, or the close of a running cycle). */
  pinned?: JournalRecordOf<"status"> & { pin: HarvestPin };
  /** The final result is that pinned settled result, closed afterwards (closedResult). */
  closedAfterSettle: boolean;
  /** A relayed task: the other machine's daemon built its results. */
  remote: boolean;
  /** sha256 of diff.patch as the harvest the result was built from left it. */
  patchSha256?: string;
  /**
   * Sibling warnings another task's settle set on this result after the harvest it was built from
   * (`siblings{from, warning?}` records after that pin), in order.
   */
  siblingNotes: { from: string; warning?: string }[];
}

/** No timer matters to a replay: the journal already says what each timer did. */
const REPLAY_LIMITS = { ...DEFAULT_LIMITS, idleMs: 0 };

/** The journal replayed through the pure machine: the verdict it records, and the pin the result was built from. */
export function journalVerdict(events: readonly JournalRecord[]): JournalVerdict {
  let state: TaskState = { phase: { name: "queued", cycle: 1 }, childConnected: false };
  const feed = (ev: CycleEvent) => (state = step(state, ev, REPLAY_LIMITS).state);
  const v: JournalVerdict = {
    cycle: 1,
    closed: false,
    phase: state.phase,
    lateEvidence: false,
    closedAfterSettle: false,
    remote: false,
    siblingNotes: [],
  };
  let settledPin: JournalVerdict["pinned"];
  let settledSha: string | undefined;
  for (const e of events) {
    if ((e.type === "respond" || e.type === "settle") && e.cycle > v.cycle) {
      v.cycle = e.cycle;
      delete v.settledStatus;
      delete v.sessionOffset;
      delete v.reason;
      settledPin = undefined;
      settledSha = undefined;
      v.lateEvidence = false;
    }
    if (e.remote === true) v.remote = true;
    switch (e.type) {
      case "settle": {
        const { reason: r, cycle } = e;
        if (!r) break;
        if (cycle === v.cycle) v.reason = r;
        // The settle record is the verdict: the machine settles the cycle it names with that reason.
        const p = state.phase;
        if (!(isInFlight(p) && p.name !== "closed" && p.cycle === cycle))
          feed({ type: "restored", found: { found: "prompt_out", cycle }, childAlive: false });
        feed({ type: "settle_recovered", reason: r, journaled: true });
        break;
      }
      case "status": {
        const { cycle } = e;
        v.lastStatus = e.status;
        if (e.sessionOffset !== undefined) v.sessionOffset = e.sessionOffset;
        const pin = isPin(e.pin) ? { ...e, pin: e.pin } : undefined;
        const sha = isObject(e.pin) && typeof e.pin.diffSha256 === "string" ? e.pin.diffSha256 : undefined;
        if (e.settled === true && cycle === v.cycle) {
          v.settledStatus = e.status;
          if (state.phase.name !== "settled")
            feed({ type: "restored", found: { found: "settled", cycle, reason: v.reason }, childAlive: false });
          feed({ type: "harvested", cycle, status: e.status });
          settledPin = pin;
          settledSha = sha;
          v.pinned = pin;
          v.patchSha256 = sha;
          if (pin) v.siblingNotes = [];
          v.lateEvidence = false;
          v.closedAfterSettle = false;
        } else if (e.status === "closed") {
          v.pinned = pin ?? settledPin;
          v.patchSha256 = pin ? sha : settledSha;
          v.closedAfterSettle = pin === undefined && settledPin !== undefined;
          if (pin) v.siblingNotes = [];
        }
        break;
      }
      case "siblings":
        // Another task's settle set (or dropped) its warning about that task on this one's result.
        if (e.from !== undefined)
          v.siblingNotes.push({ from: e.from, ...(e.warning !== undefined ? { warning: e.warning } : {}) });
        break;
      case "respond":
        feed({ type: "restored", found: { found: "follow_up", cycle: e.cycle }, childAlive: false });
        break;
      case "late_evidence":
        if (e.cycle === v.cycle && v.settledStatus !== undefined) v.lateEvidence = true;
        break;
      case "closed":
        v.closed = true;
        feed(
          e.via === "abort" ? { type: "abort" } : { type: "close", closePane: e.closePane === true, headless: true },
        );
        break;
      // What the verdict does not rest on: the result is rebuilt from the status records' pins and the evidence.
      case "prompt_accepted":
      case "prompt_failed":
      case "parked":
      case "stalled":
      case "interrupted":
      case "steered":
      case "steer_taken":
      case "steer_missed":
      case "created":
      case "admitted":
      case "worktree":
      case "baseline":
      case "setup_started":
      case "setup":
      case "setup_ended":
      case "launched":
      case "prompt_sent":
      case "finalize_prompt":
      case "contract_error":
      case "report":
      case "runtime_gone":
      case "runtime_exited":
      case "checks":
      case "landability":
      case "landed":
      case "recovered":
      case "owner_moved":
      case "remote_cycle":
      case "remote_spawned":
      case "remote_request":
      case "remote_request_refused":
        break;
      default:
        e satisfies never;
    }
  }
  v.phase = state.phase;
  return v;
}

function isPin(v: unknown): v is HarvestPin {
  return typeof v === "object" && v !== null && typeof (v as { settled?: unknown }).settled === "boolean";
}

/** What verify could and could not check of one task. */
export interface Verification {
  differences: Difference[];
  /** What the task dir does not let verify check (a dir written before harvests were pinned, a relayed task). */
  unchecked: string[];
}

/** result.json against its task dir; no differences when they agree. */
export function verifyTask(i: VerifyInput): Difference[] {
  return checkTask(i).differences;
}

export function checkTask(i: VerifyInput): Verification {
  const out: Difference[] = [];
  const unchecked: string[] = [];
  const r = i.result;
  const j = journalVerdict(i.events);
  const differ = (field: string, stored: unknown, expected: unknown, source: string, why?: string) => {
    if (!same(stored, expected)) out.push({ field, stored, expected, source, ...(why !== undefined ? { why } : {}) });
  };
  const verdict = j.reason ? settleVerdict(j.reason) : undefined;
  const code = verdict?.error?.code;
  // The journal's own agreement: its settled status record with what its settle record fixes.
  if (!j.closed && verdict?.status && j.settledStatus && j.settledStatus !== verdict.status)
    out.push({
      field: "journal",
      stored: j.settledStatus,
      expected: verdict.status,
      source: "the journal",
      why: `its settled status record disagrees with its settle record (${j.reason!.kind})`,
    });
  differ("nextAction", r.nextAction, nextActionFor(r.status), "the status", `status ${r.status}`);
  const expectedStatus = j.closed ? "closed" : (verdict?.status ?? j.settledStatus);
  const statusWhy = code ?? j.reason?.kind;

  if (j.remote) {
    // The other machine's daemon built the result from its own files; here: the verdict and the copied patch.
    if (expectedStatus !== undefined) differ("status", r.status, expectedStatus, "the journal", statusWhy);
    // A verdict of this daemon's own (the machine's word refused: REMOTE_INVALID; the task gone there: REMOTE_LOST;
    // a request it refused: its error) fixes the error too, closed or not.
    if (code !== undefined) differ("error.code", r.error?.code, code, "the journal", j.reason?.kind);
    checkPatch(i, j, out);
    unchecked.push("the result's other fields: the other machine's daemon built them (run verify there)");
    return { differences: out, unchecked };
  }
  const pinned = j.pinned;
  if (!pinned || !i.record) {
    legacyChecks(i, j, differ, out, expectedStatus, statusWhy);
    unchecked.push(
      !pinned
        ? "summary, result text and meta, warnings, the diff's digest and timing: this task dir was written before harvests were pinned in the journal"
        : "the rebuild: task.json is missing or unreadable",
    );
    return { differences: out, unchecked };
  }

  // The rebuild: the pinned harvest through the pure derivation.
  const pin = pinned.pin;
  const offset = typeof pinned.sessionOffset === "number" ? pinned.sessionOffset : 0;
  const session = pin.session ? i.sessionUpTo?.(offset) : undefined;
  if (pin.session && !session)
    unchecked.push(`the session: ${i.record.sessionPath} is missing (usage, model and final message not re-read)`);
  let resultMd;
  if (pin.resultMd && "file" in pin.resultMd) {
    const copy = i.readPinned?.(pin.resultMd.file);
    if (!copy)
      out.push({
        field: "result.md",
        stored: "missing",
        expected: pin.resultMd.file,
        source: "the journal",
        why: "the copy the settle pinned is gone",
      });
    else {
      if (copy.sha256 !== pin.resultMd.sha256)
        out.push({
          field: "result.md",
          stored: `${pin.resultMd.file} with sha256 ${copy.sha256.slice(0, 12)}`,
          expected: `sha256 ${pin.resultMd.sha256.slice(0, 12)}`,
          source: "the journal",
          why: "the pinned copy was changed",
        });
      resultMd = resultMdOf({ text: copy.text }, i.parseYaml);
    }
  } else if (pin.resultMd && "refused" in pin.resultMd) resultMd = resultMdOf(pin.resultMd, i.parseYaml);
  let rebuilt = resultFromPin(i.record, pin, {
    ...(session ? { session } : {}),
    ...(resultMd ? { resultMd } : {}),
    ...(pin.settled && j.reason ? { reason: j.reason } : {}),
    ...landFieldsOf(i.record),
    late: j.lateEvidence,
  });
  if (j.closedAfterSettle) rebuilt = closedResult(rebuilt);
  rebuilt = withSiblingNotes(rebuilt, j.siblingNotes);
  // The status the journal gives wins the message: `status: result.json says completed, the journal says failed`.
  differ("status", r.status, expectedStatus ?? rebuilt.status, "the journal", statusWhy);
  if (expectedStatus !== undefined && rebuilt.status !== expectedStatus)
    out.push({
      field: "journal",
      stored: rebuilt.status,
      expected: expectedStatus,
      source: "the journal",
      why: "its pinned harvest rebuilds another status than its verdict",
    });
  compareResults(r, rebuilt, out, session !== undefined || !pin.session);
  checkPatch(i, j, out);
  return { differences: out, unchecked };
}

/** The result with the sibling warnings set after its harvest (`siblings{from}` records), as the daemon set them. */
function withSiblingNotes(r: AgentResult, notes: JournalVerdict["siblingNotes"]): AgentResult {
  if (notes.length === 0) return r;
  let warnings = r.warnings;
  for (const n of notes) warnings = withSiblingWarning(warnings, n.from, n.warning);
  const { warnings: _old, ...rest } = r;
  return warnings?.length ? { ...rest, warnings } : rest;
}

/** diff.patch against the digest the harvest pinned. */
function checkPatch(i: VerifyInput, j: JournalVerdict, out: Difference[]): void {
  const pinned = j.patchSha256;
  if (pinned === undefined) {
    if (i.result.diff && i.patch && i.patch.bytes !== i.result.diff.patchBytes)
      out.push({
        field: "diff.patchBytes",
        stored: i.result.diff.patchBytes,
        expected: i.patch.bytes,
        source: "diff.patch",
      });
    return;
  }
  if (!i.patch) {
    out.push({
      field: "diff.patch",
      stored: "missing",
      expected: `sha256 ${pinned.slice(0, 12)}`,
      source: "the journal",
    });
    return;
  }
  if (i.patch.sha256 !== pinned)
    out.push({
      field: "diff.patch",
      stored: `sha256 ${i.patch.sha256.slice(0, 12)} (${i.patch.bytes} bytes)`,
      expected: `sha256 ${pinned.slice(0, 12)}`,
      source: "the journal",
      why: "diff.patch changed after its harvest",
    });
  if (i.result.diff && i.patch.bytes !== i.result.diff.patchBytes)
    out.push({
      field: "diff.patchBytes",
      stored: i.result.diff.patchBytes,
      expected: i.patch.bytes,
      source: "diff.patch",
    });
}

/** Where each field of a rebuilt result comes from, for the message. */
function sourceOf(field: string): string {
  if (/^(usage|finalMessage|agent\.model|agent\.thinking)/.test(field)) return "the session";
  if (/^(error)/.test(field)) return "the journal";
  return "the task dir";
}

/** result.json against the rebuild, field by field (warnings as a set: each names one caveat, in no given order). */
function compareResults(stored: AgentResult, rebuilt: AgentResult, out: Difference[], withSession: boolean): void {
  const skip = new Set(["status", "nextAction", "warnings"]);
  if (!withSession) for (const k of ["usage", "finalMessage"]) skip.add(k);
  const keys = new Set([...Object.keys(stored), ...Object.keys(rebuilt)]);
  const s = stored as unknown as Record<string, unknown>;
  const b = rebuilt as unknown as Record<string, unknown>;
  for (const k of [...keys].sort()) {
    if (skip.has(k)) continue;
    const sv = s[k];
    const bv = b[k];
    const record = (v: unknown) => isObject(v) && !Array.isArray(v);
    if ((record(sv) || record(bv)) && (record(sv) || sv === undefined) && (record(bv) || bv === undefined)) {
      // One object field per line (`error.code: result.json says nothing, the journal says CONTRACT_ERROR`).
      const so = (sv ?? {}) as Record<string, unknown>;
      const bo = (bv ?? {}) as Record<string, unknown>;
      for (const sub of [...new Set([...Object.keys(so), ...Object.keys(bo)])].sort()) {
        const field = `${k}.${sub}`;
        if (!withSession && (field === "agent.model" || field === "agent.thinking")) continue;
        if (!same(so[sub], bo[sub])) out.push({ field, stored: so[sub], expected: bo[sub], source: sourceOf(field) });
      }
    } else if (!same(sv, bv)) out.push({ field: k, stored: sv, expected: bv, source: sourceOf(k) });
  }
  const sw = new Set(stored.warnings ?? []);
  const bw = new Set(rebuilt.warnings ?? []);
  const extra = [...sw].filter((w) => !bw.has(w));
  const missing = [...bw].filter((w) => !sw.has(w));
  if (extra.length || missing.length)
    out.push({
      field: "warnings",
      stored: extra.length ? extra : undefined,
      expected: missing.length ? missing : undefined,
      source: "the task dir",
      why: `${extra.length} not in the rebuild, ${missing.length} missing`,
    });
}

/** The checks of a task dir written before harvests were pinned: the verdict, the session's usage and model. */
function legacyChecks(
  i: VerifyInput,
  j: JournalVerdict,
  differ: (field: string, stored: unknown, expected: unknown, source: string, why?: string) => void,
  out: Difference[],
  expectedStatus: string | undefined,
  statusWhy: string | undefined,
): void {
  const r = i.result;
  const verdict = j.reason ? settleVerdict(j.reason) : undefined;
  const code = verdict?.error?.code;
  if (expectedStatus !== undefined) differ("status", r.status, expectedStatus, "the journal", statusWhy);
  // The error a settle reason fixes (pi's refusal, a timeout, a contract error, a lost record) is the one carried.
  if (code !== undefined && (verdict?.replacesError || r.error === undefined))
    differ("error.code", r.error?.code, code, "the journal", j.reason?.kind);
  if ((r.status === "failed" || r.status === "gone") && r.error === undefined && expectedStatus === r.status)
    out.push({ field: "error", stored: undefined, expected: "an error", source: "the status", why: r.status });
  const s = i.session ?? (j.sessionOffset !== undefined ? i.sessionUpTo?.(j.sessionOffset) : undefined);
  if (s) {
    if (r.usage) {
      differ("usage.outputTokens", r.usage.outputTokens, s.usage.outputTokens, "the session");
      differ("usage.assistant", r.usage.assistant, s.usage.assistant, "the session");
      differ("usage.toolCalls", r.usage.toolCalls, s.usage.toolCalls, "the session");
      // Results written before these fields existed do not carry them: only a field that is there is checked.
      for (const k of ["inputTokens", "cacheReadTokens", "cacheWriteTokens", "cost"] as const)
        if (r.usage[k] !== undefined) differ(`usage.${k}`, r.usage[k], s.usage[k], "the session");
    }
    if (s.model !== undefined) differ("agent.model", r.agent.model, s.model, "the session");
    if (s.thinkingLevel !== undefined) differ("agent.thinking", r.agent.thinking, s.thinkingLevel, "the session");
  }
  const bytes = i.patch?.bytes ?? i.patchBytes;
  if (r.diff && bytes !== undefined) differ("diff.patchBytes", r.diff.patchBytes, bytes, "diff.patch");
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null;

/** Equal as JSON values, whatever the order of object keys. */
export function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((x, k) => same(x, bb[k]));
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const ak = Object.keys(ao).filter((k) => ao[k] !== undefined);
  const bk = Object.keys(bo).filter((k) => bo[k] !== undefined);
  return ak.length === bk.length && ak.every((k) => same(ao[k], bo[k]));
}

/** One line per difference: `status: result.json says completed, the journal says failed (CONTRACT_ERROR)`. */
export function describeDifference(d: Difference): string {
  const show = (v: unknown) => (v === undefined ? "nothing" : typeof v === "string" ? v : JSON.stringify(v));
  if (d.field === "journal")
    return `journal: its record says ${show(d.stored)}, its verdict says ${show(d.expected)}${d.why ? ` (${d.why})` : ""}`;
  if (d.field === "diff.patch" || d.field === "result.md")
    return `${d.field}: the file has ${show(d.stored)}, the journal pinned ${show(d.expected)}${d.why ? ` (${d.why})` : ""}`;
  return `${d.field}: result.json says ${show(d.stored)}, ${d.source} says ${show(d.expected)}${d.why ? ` (${d.why})` : ""}`;
}
