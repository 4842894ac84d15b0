// The published AgentResult schema (schema/agent-result.schema.json), compiled strict, for tests that check a built
// result validates; and a check receipt as the daemon writes one, for tests of what receipts make of a result.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import type { CheckReceipt } from "../../src/core/types.js";

const root = join(import.meta.dirname, "..", "..", "..");

export const validate = new Ajv2020({ strict: true }).compile(
  JSON.parse(readFileSync(join(root, "schema", "agent-result.schema.json"), "utf8")),
);

/** A receipt of `command` in task tmg3k2a1b2c3, `extra` over a 12 ms run that printed "ok". */
export const receipt = (command: string, exitCode: number | null, extra: Partial<CheckReceipt> = {}): CheckReceipt => ({
  command,
  exitCode,
  durationMs: 12,
  startedAt: 1000,
  logPath: `/h/tasks/tmg3k2a1b2c3/checks/${command.replace(/\W/g, "")}.log`,
  outputTail: "ok\n",
  ...extra,
});
