// dsh-herdr demo: placeholder until the daemon lands.
import type { Command } from "commander";
import type { CliContext } from "./context.js";

export function registerDemoCommand(program: Command, _ctx: CliContext): void {
  program.command("demo").description("hermetic demo: two workers and a reviewer, real pi against a scripted model");
}
