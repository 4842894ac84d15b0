// The non-builtin modules a `dsh-herdr` call loads (ES modules by a load hook, CommonJS by NODE_DEBUG=module): what a
// start-up test asserts (a command loads nothing heavy it does not use) on any machine, unlike its wall time.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dshBin } from "./cli.js";

const HOOK = `
import { appendFileSync } from "node:fs";
export async function load(url, context, next) {
  if (!url.startsWith("node:")) appendFileSync(process.env.DSH_TEST_MODULE_LOG, url + "\\n");
  return next(url, context);
}`;

/** Runs `dsh-herdr <args>` with `env` and returns the file URLs it loaded, its exit code and output. */
export function modulesLoadedBy(
  args: string[],
  env: NodeJS.ProcessEnv,
): { loaded: string[]; status: number | null; stdout: string; stderr: string } {
  const dir = mkdtempSync(join(tmpdir(), "dsh-module-log-"));
  try {
    const log = join(dir, "modules.log");
    const register = join(dir, "register.mjs");
    writeFileSync(log, "");
    writeFileSync(
      register,
      `import { register } from "node:module";\nregister(${JSON.stringify(`data:text/javascript,${encodeURIComponent(HOOK)}`)});\n`,
    );
    // The hook sees ES modules; NODE_DEBUG=module names every CommonJS file require() loads (yaml is one).
    const r = spawnSync(process.execPath, ["--import", register, dshBin, ...args], {
      env: { ...env, DSH_TEST_MODULE_LOG: log, NODE_DEBUG: "module" },
      encoding: "utf8",
      timeout: 60_000,
    });
    if (r.error) throw r.error;
    const debug = r.stderr.split("\n").filter((l) => l.startsWith("MODULE "));
    const required = debug.flatMap((l) => /: load "([^"]+)" for module/.exec(l)?.[1] ?? []).map((p) => `file://${p}`);
    const loaded = [...new Set([...readFileSync(log, "utf8").split("\n").filter(Boolean), ...required])];
    const stderr = r.stderr
      .split("\n")
      .filter((l) => !l.startsWith("MODULE "))
      .join("\n");
    return { loaded, status: r.status, stdout: r.stdout, stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
