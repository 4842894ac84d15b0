// Finding a task's pane again (after a daemon restart): the task marker each child carries in its environment,
// read back from /proc; without /proc, the pane's start command naming the task dir.
import { readFileSync } from "node:fs";
import { DshError } from "../../core/errors.js";
import type { RuntimeHandle } from "../types.js";
import { procAvailable } from "../proc.js";
import { PANE_FORMAT } from "./pane-state.js";
import { runTmux, isGoneError, type TmuxServer } from "./tmux-cli.js";

/**
 * Set in every child's environment at launch (tmux -e, no shell): the task a pane was opened for. tmux cannot set a
 * user option on a `new-window -d` pane in the same command sequence, and a second command could be lost to a
 * crash, so the child's own environment is the marker find() reads back (/proc/<pid>/environ).
 */
export const TASK_MARKER_ENV = "DSH_HERDR_TMUX_TASK";

const FIND_FORMAT = `${PANE_FORMAT}\t#{session_name}\t#{pane_start_command}`;

/** The marker in the pane process's environment: its value, "" when absent, null when /proc cannot say. */
function markerOf(pid: number): string | null {
  let env: string;
  try {
    env = readFileSync(`/proc/${pid}/environ`, "utf8");
  } catch {
    return procAvailable() ? "" : null;
  }
  const hit = env.split("\0").find((kv) => kv.startsWith(`${TASK_MARKER_ENV}=`));
  return hit === undefined ? "" : hit.slice(TASK_MARKER_ENV.length + 1);
}

/** The first live pane on the server that was opened for this task, or undefined. */
export async function findPane(
  server: TmuxServer,
  o: { socketName: string; sessionName: string },
  where: { taskId: string; taskDir: string; name: string },
  isAlive: (h: RuntimeHandle) => Promise<boolean>,
): Promise<RuntimeHandle | undefined> {
  const r = await runTmux(server, ["list-panes", "-a", "-F", FIND_FORMAT]);
  if (!r.ok) {
    if (isGoneError(r.stderr)) return undefined; // no server: no pane of ours
    throw new DshError("RUNTIME_UNAVAILABLE", `tmux list-panes failed on server ${server.socketName}: ${r.stderr}`);
  }
  for (const line of r.stdout.split("\n")) {
    const [paneId = "", windowId = "", pidText = "", dead, , , session = o.sessionName, ...command] = line.split("\t");
    const pid = Number.parseInt(pidText, 10);
    if (!paneId.startsWith("%") || dead === "1" || !Number.isFinite(pid)) continue;
    const marker = markerOf(pid);
    // Without /proc, the start command is the evidence: the daemon's argv names the task dir (pi --session).
    const ours = marker === null ? command.join("\t").includes(where.taskDir) : marker === where.taskId;
    if (!ours) continue;
    const handle: RuntimeHandle = {
      runtime: "tmux",
      agentName: where.name,
      tmuxSocket: o.socketName,
      tmuxSession: session,
      tmuxWindow: windowId,
      tmuxPaneId: paneId,
      pid,
    };
    if (await isAlive(handle)) return handle;
  }
  return undefined;
}
