// The dsh-herdr home (DSH_HERDR_HOME or ~/.dsh/herdr, shared/design.md §6) and the package root.
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { resolveHome } from "../../store/home.js";

export function cliHome(env: NodeJS.ProcessEnv): string {
  return resolve(resolveHome(env));
}

/** The package root (where package.json, schema/ and node_modules/ live), from dist/src/cli. */
export const packageRoot = join(fileURLToPath(import.meta.url), "..", "..", "..", "..", "..");
