// What check receipts say: verified or not, and the warning a failing or cut-off check adds. Pure.
import type { AgentResult, CheckReceipt, Landing } from "../types.js";

/** true when every check exited 0 and none was cut off; undefined when none ran. */
export function verifiedOf(receipts: readonly CheckReceipt[] | undefined): boolean | undefined {
  if (receipts === undefined || receipts.length === 0) return undefined;
  return receipts.every((r) => r.exitCode === 0 && r.cutOff === undefined);
}

/** Warnings start with this, so a newer run's warnings replace an older run's. */
export const CHECK_WARNING_PREFIX = "check `";

/** The warning a receipt adds (naming the command and how it ended), or undefined for a pass. */
export function checkWarning(
  r: CheckReceipt,
  limits: { timeoutMs?: number; outputCapBytes?: number } = {},
): string | undefined {
  const where = r.on === "merged" ? " on the merged tree" : "";
  if (r.cutOff === "timeout")
    return `${CHECK_WARNING_PREFIX}${r.command}\` was cut off${where}: still running after ${Math.round((limits.timeoutMs ?? r.durationMs) / 1000)} s (its timeout); its output: ${r.logPath}`;
  if (r.cutOff === "output")
    return `${CHECK_WARNING_PREFIX}${r.command}\` was cut off${where}: it printed more than ${limits.outputCapBytes ?? "the cap of"} bytes; its output: ${r.logPath}`;
  if (r.exitCode === 0) return undefined;
  const how = r.exitCode === null ? `ended by ${r.signal ?? "a signal"}` : `exit ${r.exitCode}`;
  return `${CHECK_WARNING_PREFIX}${r.command}\` failed${where} (${how}); its output: ${r.logPath}`;
}

export function checkWarnings(receipts: readonly CheckReceipt[]): string[] {
  return receipts.flatMap((r) => {
    const w = checkWarning(r);
    return w === undefined ? [] : [w];
  });
}

/** Earlier check warnings dropped, the newest run's added. */
export function withCheckWarnings(
  warnings: readonly string[] | undefined,
  receipts: readonly CheckReceipt[],
): string[] {
  return [...(warnings ?? []).filter((w) => !w.startsWith(CHECK_WARNING_PREFIX)), ...checkWarnings(receipts)];
}

/**
 * The check receipts and landing an AgentResult carries, from a task's record: receipts of its current cycle only (a
 * follow-up's work has not been checked yet), the landing as measured or landed.
 */
export function landFieldsOf(rec: {
  cycle: number;
  checkRun?: { cycle: number; receipts: CheckReceipt[] };
  landing?: Landing;
}): { checks?: CheckReceipt[]; landing?: Landing } {
  return {
    ...(rec.checkRun && rec.checkRun.cycle === rec.cycle ? { checks: rec.checkRun.receipts } : {}),
    ...(rec.landing ? { landing: rec.landing } : {}),
  };
}

/** A task's check run as its record keeps it: the cycle checked, when (the clock port's ms), the receipts. */
export interface CheckRun {
  cycle: number;
  at: number;
  receipts: CheckReceipt[];
}

/** What task.check and task.land found or made, for the task's record: a landing measured or landed, a check run. */
export interface LandingOutcome {
  landing?: Landing;
  checkRun?: CheckRun;
}

/**
 * The record's check and landing fields after `outcome`, and the AgentResult that says them: `base` with the checks,
 * verified and check warnings of the current cycle's run, and the landing. A field the outcome leaves out keeps the
 * record's value.
 */
export function landingRecorded<R extends { cycle: number; checkRun?: CheckRun; landing?: Landing }>(
  rec: R,
  base: AgentResult,
  outcome: LandingOutcome,
): { rec: R; result: AgentResult } {
  const next: R = {
    ...rec,
    ...(outcome.landing ? { landing: outcome.landing } : {}),
    ...(outcome.checkRun ? { checkRun: outcome.checkRun } : {}),
  };
  const fields = landFieldsOf(next);
  const result: AgentResult = { ...base };
  if (fields.checks) {
    result.checks = fields.checks;
    result.verified = verifiedOf(fields.checks)!;
    const warnings = withCheckWarnings(base.warnings, fields.checks);
    if (warnings.length > 0) result.warnings = warnings;
    else delete result.warnings;
  }
  if (fields.landing) result.landing = fields.landing;
  return { rec: next, result };
}
