// The tmux runtime: one window per task in session `dsh-herdr` on a private tmux server. The pane keeps the
// child's exit status (remain-on-exit) so a dead child can be inspected and told apart from a closed pane.
import { readFileSync } from "node:fs";
import { constants as osConstants } from "node:os";
import { DshError } from "../../core/errors.js";
import type { ChildExit, LaunchSpec, Runtime, RuntimeEvent, RuntimeHandle } from "../types.js";
import { procAvailable, readProcStat } from "../headless/proc.js";
import { checkLaunchSpec } from "../launch-check.js";
import { literalArg, literalFormat, mustTmux, runTmux, isGoneError, type TmuxServer } from "./tmux-cli.js";

export interface TmuxRuntimeOptions {
  /** tmux -L name (config default "dsh-herdr"; tests use a private random name). */
  socketName: string;
  sessionName?: string;
  /** tmux -f for a server this runtime starts; undefined reads the user's usual tmux config. */
  configFile?: string;
  bin?: string;
  width?: number;
  height?: number;
  /** Poll interval of watch(), ms. */
  watchIntervalMs?: number;
}

interface PaneState {
  paneId: string;
  windowId: string;
  pid: number;
  /** tmux's pane_dead: the pty closed. */
  ptyClosed: boolean;
  /** The child ended (exit status known, or the process is gone). */
  dead: boolean;
  deadStatus: number | null;
  deadSignal: number | null;
}

const PANE_FORMAT = "#{pane_id}\t#{window_id}\t#{pane_pid}\t#{pane_dead}\t#{pane_dead_status}\t#{pane_dead_signal}";
const FIND_FORMAT = `${PANE_FORMAT}\t#{session_name}\t#{pane_start_command}`;

/**
 * Set in every child's environment at launch (tmux -e, no shell): the task a pane was opened for. tmux cannot set a
 * user option on a `new-window -d` pane in the same command sequence, and a second command could be lost to a
 * crash, so the child's own environment is the marker find() reads back (/proc/<pid>/environ).
 */
export const TASK_MARKER_ENV = "DSH_HERDR_TMUX_TASK";

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

function signalName(n: number): string {
  const hit = Object.entries(osConstants.signals).find(([, v]) => v === n);
  return hit ? hit[0] : `SIG${n}`;
}

/** The pane's process has exited (zombie or gone); without /proc, trust tmux. */
function childEnded(pid: number): boolean {
  const st = readProcStat(pid);
  if (st !== null) return st.state === "Z" || st.state === "X";
  return procAvailable();
}

function intOrNull(s: string | undefined): number | null {
  return s === undefined || s === "" ? null : Number.parseInt(s, 10);
}

export function createTmuxRuntime(opts: TmuxRuntimeOptions): Runtime {
  const sessionName = opts.sessionName ?? "dsh-herdr";
  const serverOf = (h?: RuntimeHandle): TmuxServer => ({
    socketName: h?.tmuxSocket ?? opts.socketName,
    ...(opts.configFile !== undefined ? { configFile: opts.configFile } : {}),
    ...(opts.bin !== undefined ? { bin: opts.bin } : {}),
  });

  function paneOf(h: RuntimeHandle): string {
    if (h.runtime !== "tmux" || !h.tmuxPaneId) {
      throw new DshError(
        "BAD_PARAMS",
        `not a tmux handle (runtime ${h.runtime}, pane ${h.tmuxPaneId ?? "none"}): pass the handle tmux launch returned`,
      );
    }
    return h.tmuxPaneId;
  }

  async function listPane(h: RuntimeHandle, paneId: string): Promise<PaneState | null> {
    // display-message falls back to another pane for a missing target, so filter list-panes instead.
    const r = await runTmux(serverOf(h), ["list-panes", "-a", "-f", `#{==:#{pane_id},${paneId}}`, "-F", PANE_FORMAT]);
    if (!r.ok) {
      if (isGoneError(r.stderr)) return null;
      throw new DshError(
        "RUNTIME_UNAVAILABLE",
        `tmux list-panes failed on server ${serverOf(h).socketName}: ${r.stderr}`,
      );
    }
    const line = r.stdout.split("\n").find((l) => l.startsWith(`${paneId}\t`));
    if (!line) return null;
    const [, windowId = "", pid = "", dead, status, signal] = line.split("\t");
    const state: PaneState = {
      paneId,
      windowId,
      pid: Number.parseInt(pid, 10),
      ptyClosed: dead === "1",
      deadStatus: intOrNull(status),
      deadSignal: intOrNull(signal),
      dead: false,
    };
    // tmux marks the pane dead when the pty closes, which can precede reaping the child: only a known exit
    // status or signal means the child really ended.
    state.dead = state.ptyClosed && (state.deadStatus !== null || state.deadSignal !== null);
    return state;
  }

  /** The pane as tmux sees it now, or null when it is gone (closed, server gone, or a reused id). */
  async function query(h: RuntimeHandle): Promise<PaneState | null> {
    const paneId = paneOf(h);
    let state = await listPane(h, paneId);
    // Pane ids restart at %0 with a new server: a different pid means a different pane.
    if (state === null || (h.pid !== undefined && state.pid !== h.pid)) return null;
    if (state.ptyClosed && !state.dead && childEnded(state.pid)) {
      // tmux 3.3 sometimes misses the SIGCHLD of a child killed right after start and leaves it a zombie
      // with no exit status; any other child exit makes it reap all, so run a trivial one and look again.
      // The reap can land a moment after run-shell returns: a few nudges before the status counts as unknown.
      for (let i = 0; i < 5 && !state.dead; i++) {
        await runTmux(serverOf(h), ["run-shell", "true"]);
        state = (await listPane(h, paneId)) ?? state;
        if (!state.dead) await new Promise((r) => setTimeout(r, 20 * (i + 1)));
      }
      if (!state.dead && childEnded(state.pid)) state.dead = true; // ended, status unknown
    }
    return state;
  }

  async function mustLive(h: RuntimeHandle, what: string): Promise<PaneState> {
    const q = await query(h);
    if (q === null)
      throw new DshError("PANE_GONE", `cannot ${what}: tmux pane ${h.tmuxPaneId} is gone; start the task again`);
    if (q.dead)
      throw new DshError(
        "PANE_GONE",
        `cannot ${what}: the child in tmux pane ${h.tmuxPaneId} has exited; read its output or start the task again`,
      );
    return q;
  }

  function exitOf(q: PaneState): ChildExit {
    return q.deadSignal !== null
      ? { code: null, signal: signalName(q.deadSignal) }
      : { code: q.deadStatus, signal: null };
  }

  const runtime: Runtime = {
    kind: "tmux",

    async launch(spec: LaunchSpec): Promise<RuntimeHandle> {
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
      const server = serverOf();
      const inWindow = ["new-window", "-d", "-t", `=${sessionName}:`, ...common];
      const inSession = [
        "new-session",
        "-d",
        "-s",
        sessionName,
        "-x",
        String(opts.width ?? 200),
        "-y",
        String(opts.height ?? 50),
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
          `tmux could not open a window for ${spec.name} on server ${opts.socketName}: ${r.stderr || "no message"}`,
        );
      }
      const [paneId = "", windowId = "", pid = ""] = r.stdout.trim().split("\t");
      return {
        runtime: "tmux",
        agentName: spec.name,
        tmuxSocket: opts.socketName,
        tmuxSession: sessionName,
        tmuxWindow: windowId,
        tmuxPaneId: paneId,
        pid: Number.parseInt(pid, 10),
      };
    },

    async find(where) {
      const server = serverOf();
      const r = await runTmux(server, ["list-panes", "-a", "-F", FIND_FORMAT]);
      if (!r.ok) {
        if (isGoneError(r.stderr)) return undefined; // no server: no pane of ours
        throw new DshError("RUNTIME_UNAVAILABLE", `tmux list-panes failed on server ${server.socketName}: ${r.stderr}`);
      }
      for (const line of r.stdout.split("\n")) {
        const [paneId = "", windowId = "", pidText = "", dead, , , session = sessionName, ...command] =
          line.split("\t");
        const pid = Number.parseInt(pidText, 10);
        if (!paneId.startsWith("%") || dead === "1" || !Number.isFinite(pid)) continue;
        const marker = markerOf(pid);
        // Without /proc, the start command is the evidence: the daemon's argv names the task dir (pi --session).
        const ours = marker === null ? command.join("\t").includes(where.taskDir) : marker === where.taskId;
        if (!ours) continue;
        const handle: RuntimeHandle = {
          runtime: "tmux",
          agentName: where.name,
          tmuxSocket: opts.socketName,
          tmuxSession: session,
          tmuxWindow: windowId,
          tmuxPaneId: paneId,
          pid,
        };
        if (await runtime.isAlive(handle)) return handle;
      }
      return undefined;
    },

    async isAlive(h) {
      const q = await query(h);
      return q !== null && !q.dead;
    },

    async exitStatus(h) {
      const q = await query(h);
      return q !== null && q.dead ? exitOf(q) : null;
    },

    async readOutput(h, o = {}) {
      const lines = Math.max(1, o.lines ?? 50);
      const q = await query(h);
      if (q === null) return "";
      const out = await mustTmux(
        serverOf(h),
        ["capture-pane", "-p", "-J", "-t", q.paneId, "-S", `-${lines}`],
        "capture-pane",
      );
      const all = out.replace(/\s+$/, "").split("\n");
      return all.slice(-lines).join("\n");
    },

    async sendText(h, text) {
      const q = await mustLive(h, "send text");
      const server = serverOf(h);
      if (text.includes("\n")) {
        // Multi-line text goes in as one bracketed paste, so newlines do not submit early.
        const buffer = `dsh-${q.paneId.slice(1)}`;
        await mustTmux(server, ["load-buffer", "-b", buffer, "-"], "load-buffer", { input: text });
        await mustTmux(server, ["paste-buffer", "-d", "-p", "-b", buffer, "-t", q.paneId], "paste-buffer");
      } else if (text !== "") {
        await mustTmux(server, ["send-keys", "-t", q.paneId, "-l", "--", literalArg(text)], "send-keys");
      }
      await mustTmux(server, ["send-keys", "-t", q.paneId, "Enter"], "send-keys Enter");
    },

    async sendKeys(h, keys) {
      if (keys.length === 0 || keys.some((k) => typeof k !== "string" || k === "")) {
        throw new DshError("BAD_PARAMS", "keys must be non-empty tmux key names such as Escape, C-c or Enter");
      }
      const q = await mustLive(h, "send keys");
      await mustTmux(serverOf(h), ["send-keys", "-t", q.paneId, "--", ...keys.map(literalArg)], "send-keys");
    },

    async close(h) {
      const q = await query(h);
      if (q === null) return;
      const r = await runTmux(serverOf(h), ["kill-window", "-t", q.windowId]);
      if (!r.ok && !isGoneError(r.stderr)) {
        throw new DshError("RUNTIME_UNAVAILABLE", `tmux kill-window ${q.windowId} failed: ${r.stderr}`);
      }
    },

    async agentState(h) {
      const q = await query(h);
      return q === null || q.dead ? "missing" : "unknown";
    },

    watch(h, onEvent: (e: RuntimeEvent) => void) {
      let stopped = false;
      let busy = false;
      const timer = setInterval(() => {
        if (busy || stopped) return;
        busy = true;
        query(h)
          .then((q) => {
            if (stopped) return;
            if (q === null) {
              stop();
              onEvent({ type: "gone" });
            } else if (q.dead) {
              stop();
              onEvent({ type: "exited", exit: exitOf(q) });
            }
          })
          .catch(() => undefined) // a transient tmux failure: try again next tick
          .finally(() => {
            busy = false;
          });
      }, opts.watchIntervalMs ?? 500);
      timer.unref();
      const stop = (): void => {
        stopped = true;
        clearInterval(timer);
      };
      return stop;
    },
  };
  return runtime;
}
