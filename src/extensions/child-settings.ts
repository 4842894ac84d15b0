// pi's retry settings as pi reads them (agent dir settings.json, then the project's .pi/settings.json), so the
// child can tell the daemon whether an error ending will be retried. Defaults: enabled, 3 retries.
import { existsSync, readFileSync, realpathSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";

function retryOf(path: string): { enabled?: unknown; maxRetries?: unknown } {
  try {
    const s = JSON.parse(readFileSync(path, "utf8")) as { retry?: { enabled?: unknown; maxRetries?: unknown } };
    return s.retry ?? {};
  } catch {
    return {};
  }
}

export function readRetrySettings(
  cwd: string,
  env: NodeJS.ProcessEnv = process.env,
): { enabled: boolean; maxRetries: number } {
  const agentDir = (env.PI_CODING_AGENT_DIR ?? join(homedir(), ".pi", "agent")).replace(/^~(?=\/|$)/, homedir());
  const merged = { ...retryOf(join(agentDir, "settings.json")), ...retryOf(join(cwd, ".pi", "settings.json")) };
  return {
    enabled: merged.enabled !== false,
    maxRetries: typeof merged.maxRetries === "number" ? merged.maxRetries : 3,
  };
}

/**
 * The version of the pi this extension runs in, from its package.json (found from pi's entry script upwards);
 * undefined when it cannot be read (then the session's entries tell the line).
 */
export function readPiVersion(entry: string | undefined = process.argv[1]): string | undefined {
  if (!entry) return undefined;
  try {
    let dir = dirname(realpathSync(entry));
    for (let i = 0; i < 6; i++) {
      const p = join(dir, "package.json");
      if (existsSync(p)) {
        const pkg = JSON.parse(readFileSync(p, "utf8")) as { name?: unknown; version?: unknown };
        if (typeof pkg.name === "string" && pkg.name.endsWith("/pi-coding-agent") && typeof pkg.version === "string")
          return pkg.version;
      }
      const up = dirname(dir);
      if (up === dir) break;
      dir = up;
    }
  } catch {
    // unreadable: fall back to the session's entries
  }
  return undefined;
}
