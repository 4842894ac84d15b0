// prompt.md: the role envelope, the artifact contract and the task, exactly what the child is asked.
import type { Role } from "../../core/types.js";

export interface TaskPrompt {
  goal: string;
  context?: string[];
  instructions?: string[];
}

export interface PromptInput {
  taskId: string;
  role: Role;
  brief?: string;
  prompt?: string;
  task?: TaskPrompt;
  resultPath: string;
  cwd: string;
}

const list = (items: string[] | undefined) =>
  (items ?? [])
    .filter((s) => s.trim() !== "")
    .map((s) => `- ${s}`)
    .join("\n");

export function buildPrompt(p: PromptInput): string {
  const role =
    p.role === "reviewer"
      ? "You are a REVIEWER. This is read-only work: inspect, run read-only commands and report findings. Do not modify, create or delete files in the repository."
      : "You are a WORKER. Make the changes the task asks for in your working directory, and check them before you report.";
  const parts = [
    `# Task ${p.taskId}${p.brief ? `: ${p.brief}` : ""}`,
    "",
    role,
    `Working directory: ${p.cwd}`,
    "",
    "## How to finish",
    "When you are done, call the `crew_report` tool exactly once, alone in your last tool-call batch:",
    '- `{"outcome":"completed","report":"<your complete final answer>"}` when the task is done;',
    '- `{"outcome":"needs_input","report":"<what you did so far>","needs":"<the exact question>"}` when you need an answer to continue.',
    `If the crew_report tool is not available, write ${p.resultPath} instead: YAML frontmatter with \`status\` (completed | blocked | failed), \`summary\` (one line), \`tests\` and \`files\`, then your report as the body.`,
    "",
    "## The task",
    "",
  ];
  if (p.task) {
    parts.push(p.task.goal.trim());
    const ctx = list(p.task.context);
    if (ctx) parts.push("", "### Context", "", ctx);
    const ins = list(p.task.instructions);
    if (ins) parts.push("", "### Instructions", "", ins);
  } else {
    parts.push((p.prompt ?? "").trim());
  }
  return parts.join("\n") + "\n";
}
