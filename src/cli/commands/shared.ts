// Helpers shared by the command modules.
import { type Command, Option } from "commander";
import { DshError } from "../../core/errors.js";

export const STATUSES = [
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
] as const;

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
