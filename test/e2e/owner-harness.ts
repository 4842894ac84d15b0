// For the owner e2e files: the owner extension as pi loads it, and a real owner pi in RPC mode against a harness's
// daemon, with the harness's pi agent dir and the scripted model.
import { join } from "node:path";
import { startRpcPi, type RpcPi } from "../../fixtures/scripted-model/rpc-child.js";
import { repoRoot } from "../helpers/pi.js";
import type { Harness } from "./daemon-harness.js";

export const ownerExt = join(repoRoot, "dist", "src", "extensions", "owner.js");

/**
 * An owner pi with the owner extension (`extensionPaths`, default just it), talking to `h`'s daemon; `lifetimeMs` is
 * the fixture's safety net.
 */
export function startOwnerPi(
  h: Harness,
  opts: { sessionPath: string; lifetimeMs: number; extensionPaths?: string[] },
): RpcPi {
  return startRpcPi({
    env: {
      HOME: join(h.dir, "home"),
      PI_CODING_AGENT_DIR: join(h.dir, "agent"),
      PI_OFFLINE: "1",
      PI_SKIP_VERSION_CHECK: "1",
      DSH_HERDR_HOME: h.home,
    },
    cwd: h.repo,
    sessionPath: opts.sessionPath,
    model: h.modelName,
    extensionPaths: opts.extensionPaths ?? [ownerExt],
    lifetimeMs: opts.lifetimeMs,
  });
}
