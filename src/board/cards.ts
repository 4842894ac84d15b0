// A task as the board shows it: one card in one column. Built from a full AgentResult (a status push, an open task)
// or from a listing row (closed tasks: no warnings kept there, so no sibling line).
import { SIBLING_PREFIX } from "../core/result/sibling-warning.js";
import type { AgentResult } from "../core/types.js";

export type Column = "running" | "blocked" | "completed" | "failed" | "landed";

export interface Card {
  taskId: string;
  column: Column;
  status: string;
  agent: string;
  brief: string;
  model: string;
  machine?: string;
  owner?: string;
  createdAt: number;
  settledAt?: number;
  cost?: number;
  outputTokens?: number;
  /** true: every check passed; false: one failed; absent: none ran. */
  verified?: boolean;
  landable?: boolean;
  conflicts?: string[];
  landedAs?: string;
  siblings?: string[];
  /** What a blocked task asks. */
  question?: string;
  errorCode?: string;
  readOnly: boolean;
}

type Shown = Pick<AgentResult, "taskId" | "status" | "agent" | "summary" | "timing"> &
  Partial<Pick<AgentResult, "brief" | "owner" | "usage" | "verified" | "landing" | "warnings" | "error">>;

export function columnOf(r: Pick<Shown, "status" | "landing">): Column {
  if (r.landing?.landedAs) return "landed";
  switch (r.status) {
    case "blocked":
      return "blocked";
    case "completed":
      return "completed";
    case "failed":
    case "gone":
    case "closed":
    case "interrupted":
      return "failed";
    default:
      return "running";
  }
}

export function cardOf(r: Shown, mayAct: (owner: string | undefined) => boolean): Card {
  const siblings = (r.warnings ?? []).filter((w) => w.startsWith(SIBLING_PREFIX));
  return {
    taskId: r.taskId,
    column: columnOf(r),
    status: r.status,
    agent: r.agent.name,
    brief: (r.brief || r.summary || "").slice(0, 500),
    model: r.agent.model,
    ...(r.agent.machine ? { machine: r.agent.machine } : {}),
    ...(r.owner ? { owner: r.owner } : {}),
    createdAt: r.timing.createdAt,
    ...(r.timing.settledAt ? { settledAt: r.timing.settledAt } : {}),
    ...(r.usage?.cost !== undefined ? { cost: r.usage.cost } : {}),
    ...(r.usage ? { outputTokens: r.usage.outputTokens } : {}),
    ...(r.verified !== undefined ? { verified: r.verified } : {}),
    ...(r.landing ? { landable: r.landing.clean, conflicts: r.landing.conflicts.slice(0, 20) } : {}),
    ...(r.landing?.landedAs ? { landedAs: r.landing.landedAs } : {}),
    ...(siblings.length ? { siblings } : {}),
    ...(r.status === "blocked" ? { question: r.summary.slice(0, 1000) } : {}),
    ...(r.error ? { errorCode: r.error.code } : {}),
    readOnly: !mayAct(r.owner),
  };
}
