// The tmux runtime: one window per task in session `dsh-herdr` on a private tmux server. The pane keeps the
// child's exit status (remain-on-exit) so a dead child can be inspected and told apart from a closed pane.
import { DshError } from "../../core/errors.js";
import type { LaunchSpec, Runtime, RuntimeEvent, RuntimeHandle } from "../types.js";
import { endProcess } from "../end-process.js";
import { findPane } from "./find.js";
import { launchWindow } from "./launch.js";
import { exitOf, mustLive, queryPane, type PaneState } from "./pane-state.js";
import { literalArg, mustTmux, runTmux, isGoneError, type TmuxServer } from "./tmux-cli.js";

export { TASK_MARKER_ENV } from "./find.js";

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

export function createTmuxRuntime(opts: TmuxRuntimeOptions): Runtime {
  const sessionName = opts.sessionName ?? "dsh-herdr";
  const serverOf = (h?: RuntimeHandle): TmuxServer => ({
    socketName: h?.tmuxSocket ?? opts.socketName,
    ...(opts.configFile !== undefined ? { configFile: opts.configFile } : {}),
    ...(opts.bin !== undefined ? { bin: opts.bin } : {}),
  });
  const query = (h: RuntimeHandle): Promise<PaneState | null> => queryPane(serverOf(h), h);

  const runtime: Runtime = {
    kind: "tmux",

    async launch(spec: LaunchSpec): Promise<RuntimeHandle> {
      return launchWindow(
        serverOf(),
        {
          socketName: opts.socketName,
          sessionName,
          ...(opts.width !== undefined ? { width: opts.width } : {}),
          ...(opts.height !== undefined ? { height: opts.height } : {}),
        },
        spec,
      );
    },

    async find(where) {
      return findPane(serverOf(), { socketName: opts.socketName, sessionName }, where, (h) => runtime.isAlive(h));
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
      const q = await mustLive(serverOf(h), h, "send text");
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
      const q = await mustLive(serverOf(h), h, "send keys");
      await mustTmux(serverOf(h), ["send-keys", "-t", q.paneId, "--", ...keys.map(literalArg)], "send-keys");
    },

    async end(h) {
      const q = await query(h);
      if (q === null || q.dead) return;
      // remain-on-exit keeps the pane, dead, with the child's last screen.
      if (!(await endProcess(q.pid)))
        throw new DshError("RUNTIME_UNAVAILABLE", `the child in tmux pane ${q.paneId} (pid ${q.pid}) outlived SIGKILL`);
    },

    async close(h) {
      const q = await query(h);
      if (q === null) return;
      // kill-window only sends SIGHUP and returns: the child is ended (and seen gone) first.
      if (!q.dead) await endProcess(q.pid);
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
