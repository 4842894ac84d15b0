// spawn, list, show, result, diff, verify, check, land, usage: delegating a task and reading what came back (one module per command group).
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { registerListCommand } from "./list.js";
import { registerReadCommands } from "./read.js";
import { registerSpawnCommand } from "./spawn.js";
import { registerVerifyCommand } from "./verify.js";
import { registerCheckCommand } from "./check.js";
import { registerLandCommand } from "./land.js";
import { registerUsageCommand } from "./usage.js";

export { spawnParams } from "./spawn.js";
export { waitAndPrint } from "./wait-print.js";

export function registerTaskCommands(program: Command, ctx: CliContext): void {
  registerSpawnCommand(program, ctx);
  registerListCommand(program, ctx);
  registerReadCommands(program, ctx);
  registerVerifyCommand(program, ctx);
  registerCheckCommand(program, ctx);
  registerLandCommand(program, ctx);
  registerUsageCommand(program, ctx);
}
