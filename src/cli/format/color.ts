// Colour for statuses: on a terminal only, off with NO_COLOR (https://no-color.org), forced with FORCE_COLOR.
import type { AgentStatus } from "../../core/types.js";

/** Whether to colour output written to a stream that is (or is not) a terminal. */
export function colorEnabled(env: NodeJS.ProcessEnv, isTTY: boolean): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== "") return false;
  const force = env.FORCE_COLOR;
  if (force !== undefined) return !["0", "false", "no"].includes(force.trim().toLowerCase());
  return isTTY && env.TERM !== "dumb";
}

const SGR: Record<string, [number, number]> = {
  red: [31, 39],
  green: [32, 39],
  yellow: [33, 39],
  cyan: [36, 39],
  dim: [2, 22],
  bold: [1, 22],
};

export type Paint = (style: keyof typeof SGR | string, text: string) => string;

/** A painter: wraps text in SGR codes when colour is on, else returns it unchanged. */
export function painter(on: boolean): Paint {
  return (style, text) => {
    const c = SGR[style];
    return on && c && text !== "" ? `\x1b[${c[0]}m${text}\x1b[${c[1]}m` : text;
  };
}

const STATUS_STYLE: Partial<Record<AgentStatus, string>> = {
  completed: "green",
  failed: "red",
  gone: "red",
  interrupted: "red",
  blocked: "yellow",
  starting: "cyan",
  working: "cyan",
  running: "cyan",
  idle: "dim",
  closed: "dim",
};

/** The style of a status (also for `blocked (external)` or `completed·landed` cells: the first word decides). */
export function statusStyle(status: string): string | undefined {
  const first = status.split(/[ ·]/)[0] ?? "";
  // `landed`: the table's word for a completed task whose work landed.
  return first === "landed" ? STATUS_STYLE.completed : STATUS_STYLE[first as AgentStatus];
}
