// Herdr: its socket, and whether it answers a ping (the only check that reaches a runtime itself).
import { existsSync } from "node:fs";
import { herdrPing } from "../../runtime/herdr/client.js";
import { resolveHerdrSocketPath } from "../../runtime/herdr/socket-path.js";
import type { CheckResult } from "./types.js";

export async function checkHerdr(env: NodeJS.ProcessEnv): Promise<CheckResult> {
  let sock: string;
  try {
    sock = resolveHerdrSocketPath({ env });
  } catch (e) {
    return { name: "herdr", level: "fail", detail: (e as Error).message, fix: "fix or unset HERDR_SESSION" };
  }
  if (!existsSync(sock)) {
    return {
      name: "herdr",
      level: "warn",
      detail: `Herdr not running (no socket at ${sock}); tmux or headless will be used`,
      fix: "start Herdr (`herdr`) to run children in Herdr panes",
    };
  }
  const pong = await herdrPing({ env, timeoutMs: 3000 });
  if (pong.ok)
    return {
      name: "herdr",
      level: "ok",
      detail: `Herdr ${pong.version ?? "?"}, protocol ${pong.protocol ?? "?"} at ${sock}`,
    };
  if (pong.code === "HERDR_TOO_OLD")
    return {
      name: "herdr",
      level: "fail",
      detail: pong.reason ?? "Herdr is too old",
      fix: "update Herdr (herdr update) or use --runtime tmux",
    };
  return {
    name: "herdr",
    level: "fail",
    detail: `Herdr socket ${sock} does not answer ping: ${pong.reason ?? "no reply"}`,
    fix: "restart Herdr, or unset HERDR_SOCKET_PATH / HERDR_SESSION so the default session is used",
  };
}
