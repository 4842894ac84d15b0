import { Command } from "commander";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const packageRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(join(packageRoot, "package.json"), "utf8")) as { version: string };
  return pkg.version;
}

export async function run(argv: string[]): Promise<number> {
  const program = new Command("dsh-herdr")
    .description("Supervisor daemon for pi coding agents")
    .version(packageVersion(), "-V, --version")
    .exitOverride();
  try {
    await program.parseAsync(argv);
    return 0;
  } catch (e) {
    const err = e as { exitCode?: number; code?: string };
    if (err.code === "commander.helpDisplayed" || err.code === "commander.version") return 0;
    return err.exitCode === undefined ? 1 : 2;
  }
}
