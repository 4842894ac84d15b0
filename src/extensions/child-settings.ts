// pi's retry settings as pi reads them (agent dir settings.json, then the project's .pi/settings.json), so the
// child can tell the daemon whether an error ending will be retried. Defaults: enabled, 3 retries.
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

function retryOf(path: string): { enabled?: unknown; maxRetries?: unknown } {
  try {
    const s = JSON.parse(readFileSync(path, "utf8")) as { retry?: { enabled?: unknown; maxRetries?: unknown } };
    return s.retry ?? {};
  } catch {
    return {};
  }
}

export function readRetrySettings(cwd: string, env: NodeJS.ProcessEnv = process.env): { enabled: boolean; maxRetries: number } {
  const agentDir = (env.PI_CODING_AGENT_DIR ?? join(homedir(), ".pi", "agent")).replace(/^~(?=\/|$)/, homedir());
  const merged = { ...retryOf(join(agentDir, "settings.json")), ...retryOf(join(cwd, ".pi", "settings.json")) };
  return {
    enabled: merged.enabled !== false,
    maxRetries: typeof merged.maxRetries === "number" ? merged.maxRetries : 3,
  };
}
