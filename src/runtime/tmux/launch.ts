// Opening a task's window: `new-window` in the session (or `new-session` when there is none yet), remain-on-exit
// set first, the task marker in the child's environment, and a retry when the server was exiting.
import { DshError } from "../../core/errors.js";
import type { LaunchSpec, RuntimeHandle } from "../types.js";
import { checkLaunchSpec } from "../launch-check.js";
import { TASK_MARKER_ENV } from "./find.js";
import { PANE_FORMAT } from "./pane-state.js";
import { literalArg, literalFormat, runTmux, type TmuxServer } from "./tmux-cli.js";

export interface WindowPlace {
  socketName: string;
  sessionName: string;
  width?: number;
  height?: number;
}

export async function launchWindow(server: TmuxServer, at: WindowPlace, spec: LaunchSpec): Promise<RuntimeHandle> {
  await checkLaunchSpec(spec);
  // One argument would be run by tmux through `sh -c`: `env --` keeps it an exec of the program itself.
  const argv = spec.argv.length === 1 ? ["env", "--", ...spec.argv] : spec.argv;
  const common = [
    "-n",
    literalArg(literalFormat(spec.name)),
    "-c",
    literalArg(literalFormat(spec.cwd)),
    ...Object.entries({ ...spec.env, [TASK_MARKER_ENV]: spec.taskId }).flatMap(([k, v]) => [
      "-e",
      literalArg(`${k}=${v}`),
    ]),
    "-P",
    "-F",
    PANE_FORMAT,
    "--",
    ...argv.map(literalArg),
  ];
  // Set remain-on-exit before the window exists, so even an instant exit leaves a dead pane to inspect.
  const prelude = ["start-server", ";", "set-option", "-wg", "remain-on-exit", "on", ";"];
  const inWindow = ["new-window", "-d", "-t", `=${at.sessionName}:`, ...common];
  const inSession = [
    "new-session",
    "-d",
    "-s",
    at.sessionName,
    "-x",
    String(at.width ?? 200),
    "-y",
    String(at.height ?? 50),
    ...common,
  ];
  const attempt = async () => {
    let r = await runTmux(server, [...prelude, ...inWindow]);
    if (!r.ok && /can't find session|no current target|no server running|error connecting/i.test(r.stderr)) {
      r = await runTmux(server, [...prelude, ...inSession]);
      if (!r.ok && /duplicate session/i.test(r.stderr)) r = await runTmux(server, [...prelude, ...inWindow]);
    }
    return r;
  };
  let r = await attempt();
  // Closing the last window makes the server exit; a launch that meets it on the way out tries again.
  for (let i = 0; i < 3 && !r.ok && /server exited|lost server/i.test(r.stderr); i++) {
    await new Promise((res) => setTimeout(res, 50 * (i + 1)));
    r = await attempt();
  }
  if (!r.ok) {
    throw new DshError(
      "LAUNCH_FAILED",
      `tmux could not open a window for ${spec.name} on server ${at.socketName}: ${r.stderr || "no message"}`,
    );
  }
  const [paneId = "", windowId = "", pid = ""] = r.stdout.trim().split("\t");
  return {
    runtime: "tmux",
    agentName: spec.name,
    tmuxSocket: at.socketName,
    tmuxSession: at.sessionName,
    tmuxWindow: windowId,
    tmuxPaneId: paneId,
    pid: Number.parseInt(pid, 10),
  };
}
