// Herdr: its socket, whether it answers a ping (the only check that reaches a runtime itself), and whether the
// `herdr` CLI (the transport for --machine) speaks the server's protocol: the CLI refuses any other.
import { existsSync } from "node:fs";
import { execa } from "execa";
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
  if (pong.ok) {
    const detail = `Herdr ${pong.version ?? "?"}, protocol ${pong.protocol ?? "?"} at ${sock}`;
    const cli = await herdrCliProtocol(env);
    if (cli !== undefined && cli.protocol !== pong.protocol)
      return {
        name: "herdr",
        level: "warn",
        detail: `${detail}; but the herdr CLI (${cli.bin}) speaks protocol ${cli.protocol}, so --machine (which runs the CLI) fails with HERDR_PROTOCOL_MISMATCH`,
        fix: `install the herdr CLI that matches the server (protocol ${pong.protocol ?? "?"}): herdr update, then restart the server; or set HERDR_BIN to one`,
      };
    return {
      name: "herdr",
      level: "ok",
      detail: cli !== undefined ? `${detail}; herdr CLI protocol ${cli.protocol}` : detail,
    };
  }
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

/** The protocol of the `herdr` CLI ($HERDR_BIN, else herdr on PATH) from `herdr status client --json`; undefined
 *  when there is no such CLI or it does not say. */
async function herdrCliProtocol(env: NodeJS.ProcessEnv): Promise<{ bin: string; protocol: number } | undefined> {
  const bin = env.HERDR_BIN ?? "herdr";
  const run = await execa(bin, ["status", "client", "--json"], {
    reject: false,
    timeout: 3000,
    stdin: "ignore",
    env,
    extendEnv: false,
  });
  if (run.exitCode !== 0) return undefined;
  try {
    const protocol = (JSON.parse(String(run.stdout)) as { protocol?: unknown }).protocol;
    return typeof protocol === "number" ? { bin, protocol } : undefined;
  } catch {
    return undefined;
  }
}
