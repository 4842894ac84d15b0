// Helpers shared by the command modules.
import { type Command, Option } from "commander";
import { DshError } from "../../core/errors.js";
import type { AgentStatus } from "../../core/types.js";

/**
 * The list, checked against the core's AgentStatus: a status the core gains and this list lacks fails to compile, so
 * the filters built from it (list's choices, watch's statuses but closed) cannot miss it.
 */
function everyStatus<const T extends readonly AgentStatus[]>(
  list: T &
    ([Exclude<AgentStatus, T[number]>] extends [never] ? unknown : { missing: Exclude<AgentStatus, T[number]> }),
): T {
  return list;
}

/** Every status a task can read, in the order the CLI lists them. */
export const STATUSES = everyStatus([
  "starting",
  "working",
  "blocked",
  "idle",
  "running",
  "completed",
  "failed",
  "gone",
  "closed",
  "interrupted",
]);

export function jsonOption(cmd: Command): Command {
  return cmd.option("--json", "machine output: one JSON value on stdout");
}

export function choice(flags: string, description: string, choices: readonly string[]): Option {
  return new Option(flags, description).choices(choices);
}

/** A usage error: exit code 2. */
export function usage(message: string): DshError {
  return new DshError("BAD_PARAMS", message, { usage: true });
}

export async function readStdin(): Promise<string> {
  if (process.stdin.isTTY)
    throw usage("`-` reads from stdin, but stdin is a terminal; pipe the text in (echo ... | dsh-herdr ...)");
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

export function examples(cmd: Command, lines: string[]): Command {
  return cmd.addHelpText("after", "\nExamples:\n" + lines.map((l) => `  $ ${l}`).join("\n"));
}

/** --max-cost, --max-output-tokens, --max-turns as task.spawn / task.respond params (`5`, `5.00`, `$5`, `5$`). */
export function capParams(o: {
  maxCost?: string;
  maxOutputTokens?: string;
  maxTurns?: string;
}): Record<string, number> {
  const p: Record<string, number> = {};
  if (o.maxCost !== undefined) {
    const n = Number(o.maxCost.trim().replace(/^\$\s*|\s*\$$/g, ""));
    if (!Number.isFinite(n) || n <= 0 || n > 1_000_000)
      throw usage(`--max-cost ${o.maxCost}: give a positive amount of USD, e.g. --max-cost 5 or --max-cost 0.50`);
    p["maxCost"] = n;
  }
  for (const [flag, key, v] of [
    ["--max-output-tokens", "maxOutputTokens", o.maxOutputTokens],
    ["--max-turns", "maxTurns", o.maxTurns],
  ] as const) {
    if (v === undefined) continue;
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < 1) throw usage(`${flag} ${v}: give a whole number, 1 or more`);
    p[key] = n;
  }
  return p;
}

/** The three cap flags, on spawn and respond. */
export function capOptions(cmd: Command, what: string): Command {
  return cmd
    .option(
      "--max-cost <usd>",
      `stop the child's turn and ask once the task has cost this much (USD, as pi prices it)${what}`,
    )
    .option("--max-output-tokens <n>", `the same at this many output tokens${what}`)
    .option("--max-turns <n>", `the same after this many turns (assistant messages)${what}`);
}
