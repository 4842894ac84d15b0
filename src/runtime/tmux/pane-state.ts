// What tmux says about one pane: alive, dead with an exit status, or gone (closed, server gone, a reused id). A
// dead child that tmux has not reaped yet is nudged until its status shows.
import { constants as osConstants } from "node:os";
import { DshError } from "../../core/errors.js";
import type { ChildExit, RuntimeHandle } from "../types.js";
import { procAvailable, readProcStat } from "../proc.js";
import { runTmux, isGoneError, type TmuxServer } from "./tmux-cli.js";

export interface PaneState {
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

export const PANE_FORMAT =
  "#{pane_id}\t#{window_id}\t#{pane_pid}\t#{pane_dead}\t#{pane_dead_status}\t#{pane_dead_signal}";

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

export function paneOf(h: RuntimeHandle): string {
  if (h.runtime !== "tmux" || !h.tmuxPaneId) {
    throw new DshError(
      "BAD_PARAMS",
      `not a tmux handle (runtime ${h.runtime}, pane ${h.tmuxPaneId ?? "none"}): pass the handle tmux launch returned`,
    );
  }
  return h.tmuxPaneId;
}

async function listPane(server: TmuxServer, paneId: string): Promise<PaneState | null> {
  // display-message falls back to another pane for a missing target, so filter list-panes instead.
  const r = await runTmux(server, ["list-panes", "-a", "-f", `#{==:#{pane_id},${paneId}}`, "-F", PANE_FORMAT]);
  if (!r.ok) {
    if (isGoneError(r.stderr)) return null;
    throw new DshError("RUNTIME_UNAVAILABLE", `tmux list-panes failed on server ${server.socketName}: ${r.stderr}`);
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
export async function queryPane(server: TmuxServer, h: RuntimeHandle): Promise<PaneState | null> {
  const paneId = paneOf(h);
  let state = await listPane(server, paneId);
  // Pane ids restart at %0 with a new server: a different pid means a different pane.
  if (state === null || (h.pid !== undefined && state.pid !== h.pid)) return null;
  if (state.ptyClosed && !state.dead && childEnded(state.pid)) {
    // tmux 3.3 sometimes misses the SIGCHLD of a child killed right after start and leaves it a zombie
    // with no exit status; any other child exit makes it reap all, so run a trivial one and look again.
    // The reap can land a moment after run-shell returns: a few nudges before the status counts as unknown.
    for (let i = 0; i < 5 && !state.dead; i++) {
      await runTmux(server, ["run-shell", "true"]);
      state = (await listPane(server, paneId)) ?? state;
      if (!state.dead) await new Promise((r) => setTimeout(r, 20 * (i + 1)));
    }
    if (!state.dead && childEnded(state.pid)) state.dead = true; // ended, status unknown
  }
  return state;
}

/** The pane, when its child still runs; PANE_GONE (naming what could not be done) otherwise. */
export async function mustLive(server: TmuxServer, h: RuntimeHandle, what: string): Promise<PaneState> {
  const q = await queryPane(server, h);
  if (q === null)
    throw new DshError("PANE_GONE", `cannot ${what}: tmux pane ${h.tmuxPaneId} is gone; start the task again`);
  if (q.dead)
    throw new DshError(
      "PANE_GONE",
      `cannot ${what}: the child in tmux pane ${h.tmuxPaneId} has exited; read its output or start the task again`,
    );
  return q;
}

export function exitOf(q: PaneState): ChildExit {
  return q.deadSignal !== null
    ? { code: null, signal: signalName(q.deadSignal) }
    : { code: q.deadStatus, signal: null };
}
