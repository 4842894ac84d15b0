// The AgentResult card: the layout of the original plugin's result card (shared/reference/dsh.md §5.3).
import { formatUsd } from "../../core/budget.js";
import { cardCheckOf, checkLine, failedChecksLine } from "../../core/result/check-lines.js";
import type { AgentResult, Usage } from "../../core/types.js";
import { formatDuration } from "../common/duration.js";
import { painter, statusStyle } from "./color.js";
import { neutraliseResult } from "./safe.js";
import { shortenHome } from "./text.js";

/** Where the child runs, as one short phrase: `pane wV:p12 · tab wV:t6`, `tmux %3`, `pid 4242`. */
export function placeOf(r: AgentResult): string {
  const a = r.agent;
  const parts: string[] = [];
  if (a.paneId) parts.push(`pane ${a.paneId}`);
  if (a.tabId) parts.push(`tab ${a.tabId}`);
  if (parts.length === 0 && a.runtimeId)
    parts.push(a.runtime === "headless" ? `pid ${a.runtimeId}` : `${a.runtime ?? "pane"} ${a.runtimeId}`);
  if (a.machine) parts.push(`machine ${a.machine}`);
  return parts.join(" · ");
}

/** The last line of a `git diff --stat` (the "N files changed, …" summary). */
export function statSummary(stat: string): string {
  const lines = stat
    .trim()
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
  return lines.at(-1) ?? "";
}

export function diffLine(r: AgentResult): string | undefined {
  const d = r.diff;
  if (!d) return undefined;
  const n = d.files.length + d.untracked.filter((f) => !d.files.includes(f)).length;
  if (n === 0) return "diff: none";
  const summary = statSummary(d.stat);
  return `diff: ${n} file(s)${summary ? ` · ${summary}` : ""}${d.truncated ? " (patch truncated)" : ""}`;
}

/** `2 turn(s), 2 tool call(s), 24 output tokens, 1500 input + 1600 cache-read tokens · cost 0.1873 $`. */
export function usageText(u: Usage): string {
  const input = [
    u.inputTokens !== undefined ? `${u.inputTokens} input` : "",
    u.cacheReadTokens ? `${u.cacheReadTokens} cache-read` : "",
    u.cacheWriteTokens ? `${u.cacheWriteTokens} cache-write` : "",
  ].filter(Boolean);
  return [
    `${u.assistant} turn(s), ${u.toolCalls} tool call(s), ${u.outputTokens} output tokens${input.length ? `, ${input.join(" + ")} tokens` : ""}`,
    u.cost !== undefined ? `cost ${formatUsd(u.cost)}` : "",
  ]
    .filter(Boolean)
    .join(" · ");
}

/** The full human card for one AgentResult. */
export function renderCard(
  result: AgentResult,
  home?: string,
  opts: { worktreeExists?: boolean; color?: boolean } = {},
): string {
  // Every string of the result came from a child, a remote or the daemon: escaped before it is laid out.
  const r = neutraliseResult(result);
  const color = opts.color === true;
  const a = r.agent;
  const paint = painter(color);
  const st = statusStyle(r.status);
  const sh = (p: string) => shortenHome(p, home);
  const runtime = a.runtime ?? "herdr";
  const checks = (r.checks ?? []).map(cardCheckOf);
  // A failed check is the first thing the card says: the status alone would read `completed`.
  const failed = failedChecksLine(checks);
  const lines = failed ? [paint("red", `✗ ${failed}`)] : [];
  // The thinking level only once a model ran (an assistant turn, or a final message from one): before that it is
  // only the level asked for, perhaps the default, and no model thought at it.
  const ran = (r.usage?.assistant ?? 0) > 0 || (r.finalMessage ?? "") !== "";
  const model = ran && a.thinking ? `${a.model} · ${a.thinking}` : a.model;
  lines.push(`[${runtime}] ${r.role} ${a.kind} (${model}) → ${st ? paint(st, r.status) : r.status}`);
  const place = placeOf(r);
  lines.push(`agent: ${a.name} · task ${r.taskId}${place ? ` · ${place}` : ""}`);
  if (r.brief) lines.push(`brief: ${r.brief}`);
  lines.push(`summary: ${r.summary}`);
  if (r.error) lines.push(`${paint("red", "error:")} ${r.error.code}: ${r.error.message}`);
  const diff = diffLine(r);
  if (diff) lines.push(diff);
  if (r.diff && r.diff.patchBytes > 0) lines.push(`patch: ${sh(r.diff.patchPath)}`);
  if (r.worktree) {
    // gc removes worktrees after the result was written: say so rather than print a path that is not there.
    if (opts.worktreeExists === false)
      lines.push(`worktree: removed (was ${sh(r.worktree.path)}, branch ${r.worktree.branch}; see \`dsh-herdr gc\`)`);
    else lines.push(`worktree: ${sh(r.worktree.path)} (branch ${r.worktree.branch})`);
  }
  if (r.tests) lines.push(`tests: ${r.tests}`);
  if (checks.length > 0) {
    lines.push("checks:");
    for (const c of checks) lines.push(`  ${c.ok ? checkLine(c) : paint("red", checkLine(c))}`);
  }
  if (r.sessionPath) lines.push(`session: ${sh(r.sessionPath)}`);
  const t = r.timing;
  const elapsed = t.elapsedMs ?? (t.settledAt !== undefined ? t.settledAt - t.createdAt : undefined);
  const timing = [
    elapsed !== undefined ? `elapsed ${formatDuration(elapsed)}` : "",
    t.queuedMs ? `queued ${formatDuration(t.queuedMs)}` : "",
  ].filter(Boolean);
  const usage = r.usage ? usageText(r.usage) : "";
  if (timing.length > 0 || usage) lines.push(`usage: ${[...timing, usage].filter(Boolean).join(" · ")}`);
  if (r.nextAction !== "none") lines.push(`next: ${r.nextAction}`);
  for (const w of r.warnings ?? []) lines.push(`warning: ${w}`);
  // The report (result.md body, e.g. from crew_report) is the answer; the final message is shown as well when it
  // says something else (pi may add a closing line after the report).
  const body = r.result?.text.trim() ?? "";
  const final = r.finalMessage?.trim() ?? "";
  // result.md is read up to 256 KiB: a longer report's body stops there, and the final message (the crew_report)
  // holds it whole; shown once, whole.
  const report = body !== "" && final.length > body.length && final.startsWith(body) ? final : body;
  // result.text falls back to the final message when the child wrote no result.md; a frontmatter marks a real one.
  const hasArtifact = r.result !== undefined && Object.keys(r.result.meta).length > 0;
  if (report !== "" && (hasArtifact || report !== final)) {
    lines.push("--- report ---", report);
    if (final !== "" && !report.includes(final)) lines.push("--- final message ---", final);
  } else if (final !== "" || report !== "") lines.push("--- final message ---", final || report);
  return lines.join("\n") + "\n";
}
