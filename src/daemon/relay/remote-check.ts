// A remote is untrusted input: whatever another machine's daemon says about a relayed task is checked before this
// daemon takes it. An AgentResult must pass schema/agent-result.schema.json (fields this version does not know are
// dropped, so a newer remote's additive fields do no harm) and the shape its method promises: the remote task's own
// id, a settled status when the remote says the cycle settled, paths that are absolute and bounded, a
// `diff.patchPath` that is that task's own diff.patch there (the patch itself is copied over the link, never read
// from a path), and a size under the bound. A violation is a RemoteViolation naming the field; the relay settles
// the task `failed` with REMOTE_INVALID (relay-follow.ts).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import { isSettledStatus } from "../../core/result/derive.js";
import type { AgentResult } from "../../core/types.js";

/** The largest remote AgentResult taken (its JSON): an 8 MB report travels twice in it (finalMessage and result). */
export const REMOTE_RESULT_MAX_BYTES = 32 * 1024 * 1024;
/** The largest remote diff.patch copied here (the harvest caps its own at 8 MiB). */
export const REMOTE_PATCH_MAX_BYTES = 16 * 1024 * 1024;
const PATH_MAX_BYTES = 4096;
const WARNINGS_MAX = 256;
const WARNING_MAX_BYTES = 16 * 1024;

/** What the remote sent breaks the contract at `field` (a dotted path, e.g. `usage.assistant`). */
export class RemoteViolation extends Error {
  constructor(
    readonly field: string,
    readonly why: string,
  ) {
    super(`${field}: ${why}`);
    this.name = "RemoteViolation";
  }
}

export function isRemoteViolation(e: unknown): e is RemoteViolation {
  return e instanceof RemoteViolation;
}

const packageRoot = join(import.meta.dirname, "..", "..", "..", "..");
let validator: ValidateFunction | undefined;

function validate(): ValidateFunction {
  if (!validator) {
    const schema = JSON.parse(readFileSync(join(packageRoot, "schema", "agent-result.schema.json"), "utf8")) as object;
    // removeAdditional: a field the schema closes (additionalProperties: false) and does not name is dropped.
    validator = new Ajv2020({ strict: false, allErrors: false, removeAdditional: true }).compile(schema);
  }
  return validator;
}

function fieldOf(e: ErrorObject): string {
  const at = e.instancePath
    .split("/")
    .filter(Boolean)
    .join(".")
    .replace(/\.(\d+)(?=\.|$)/g, "[$1]");
  if (e.keyword === "required") {
    const missing = String((e.params as { missingProperty: string }).missingProperty);
    return at ? `${at}.${missing}` : missing;
  }
  return at || "result";
}

function whyOf(e: ErrorObject): string {
  if (e.keyword === "required") return "is missing";
  if (e.keyword === "enum")
    return `must be one of ${JSON.stringify((e.params as { allowedValues: unknown[] }).allowedValues)}`;
  return e.message ?? "is invalid";
}

const CONTROL = /[\u0000-\u001f\u007f]/;

function checkPath(field: string, v: unknown, allowEmpty = false): void {
  if (v === undefined) return;
  if (typeof v !== "string") throw new RemoteViolation(field, "must be a string");
  if (v === "" && allowEmpty) return;
  if (!v.startsWith("/"))
    throw new RemoteViolation(field, `must be an absolute path there, got ${JSON.stringify(v.slice(0, 80))}`);
  if (Buffer.byteLength(v) > PATH_MAX_BYTES) throw new RemoteViolation(field, `is over ${PATH_MAX_BYTES} bytes`);
  if (CONTROL.test(v)) throw new RemoteViolation(field, "holds control characters");
  if (v.split("/").some((s) => s === ".." || s === ".")) throw new RemoteViolation(field, "holds . or .. segments");
}

export interface RemoteCheck {
  /** The task's id on that machine: the result must be that task's. */
  remoteTaskId: string;
  /** The remote said this is the cycle's settled result. */
  settled: boolean;
}

/**
 * `raw` (parsed JSON from the link) as an AgentResult, or a RemoteViolation naming the first field that breaks the
 * contract. Mutates `raw` (unknown fields dropped); the caller owns it.
 */
export function checkRemoteResult(raw: unknown, o: RemoteCheck): AgentResult {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw))
    throw new RemoteViolation("result", "is not an object");
  const v = validate();
  if (!v(raw)) {
    const e = v.errors?.[0];
    throw e ? new RemoteViolation(fieldOf(e), whyOf(e)) : new RemoteViolation("result", "is not an AgentResult");
  }
  const r = raw as AgentResult;
  if (r.taskId !== o.remoteTaskId)
    throw new RemoteViolation("taskId", `is ${r.taskId}, not the task ${o.remoteTaskId} it was asked about`);
  if (o.settled && !isSettledStatus(r.status))
    throw new RemoteViolation(
      "status",
      `is ${JSON.stringify(r.status)}, which is no settled status, in a settled result`,
    );
  checkPath("sessionPath", r.sessionPath);
  checkPath("cwd", r.cwd);
  checkPath("worktree.path", r.worktree?.path);
  checkPath("worktree.repo", r.worktree?.repo);
  checkPath("result.path", r.result?.path, true);
  r.checks?.forEach((c, i) => checkPath(`checks[${i}].logPath`, c.logPath));
  if (r.diff) {
    checkPath("diff.patchPath", r.diff.patchPath);
    const own = `/tasks/${o.remoteTaskId}/diff.patch`;
    if (!r.diff.patchPath.endsWith(own))
      throw new RemoteViolation(
        "diff.patchPath",
        `names ${JSON.stringify(r.diff.patchPath.slice(0, 200))}, not that task's own diff.patch (…${own})`,
      );
  }
  if (r.warnings) {
    if (r.warnings.length > WARNINGS_MAX) throw new RemoteViolation("warnings", `has over ${WARNINGS_MAX} entries`);
    const i = r.warnings.findIndex((w) => Buffer.byteLength(w) > WARNING_MAX_BYTES);
    if (i >= 0) throw new RemoteViolation(`warnings[${i}]`, `is over ${WARNING_MAX_BYTES} bytes`);
  }
  return r;
}

/** Check a byte size the remote announced or sent against a bound. */
export function checkSize(field: string, bytes: number, max: number): void {
  if (!Number.isSafeInteger(bytes) || bytes < 0) throw new RemoteViolation(field, `size ${bytes} is not a byte count`);
  if (bytes > max)
    throw new RemoteViolation(field, `is ${bytes} bytes, over the bound of ${max} bytes (${max / 1024 / 1024} MiB)`);
}
