// How the crew_* tool calls look in the owner's TUI: one line for the call and one confirmation for the result
// (`spawned worker-flash-a1b2 · retry with jitter`), errors as their text. The model context keeps the JSON; only
// the screen changes. Components are plain objects of pi-tui's Component shape, styled with the theme pi passes in.
import stringWidth from "string-width";
import type { TextComponent } from "./cards.js";

/** The part of pi's Theme the tool lines use. */
export interface ToolTheme {
  bold(text: string): string;
  fg(color: string, text: string): string;
}

interface ToolResultView {
  content?: { type: string; text?: string }[];
  details?: unknown;
}

/** A styled piece of a line: the text is measured, the style applied after cutting to the width. */
type Piece = [text: string, style?: (t: string) => string];

/** Cut a plain string to `width` terminal columns (wide CJK and emoji count as two). */
export function cutToWidth(text: string, width: number): string {
  if (stringWidth(text) <= width) return text;
  let out = "";
  for (const ch of text) {
    if (stringWidth(out + ch + "…") > width) break;
    out += ch;
  }
  return out + "…";
}

function lineComponent(lines: () => Piece[][]): TextComponent {
  return {
    render(width: number) {
      return lines().map((pieces) => {
        let left = Math.max(1, width);
        let out = "";
        for (const [text, style] of pieces) {
          if (left <= 0) break;
          const cut = cutToWidth(text.replace(/\s*\n\s*/g, " "), left);
          left -= stringWidth(cut);
          out += style ? style(cut) : cut;
        }
        return out;
      });
    },
    invalidate() {},
  };
}

const str = (v: unknown): string => (typeof v === "string" ? v : "");
const list = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);

/** The JSON text of a tool result, parsed; a thrown tool error is `{"error": "..."}`. */
function resultJson(r: ToolResultView): Record<string, unknown> {
  const text = r.content?.find((c) => c.type === "text")?.text ?? "";
  try {
    const v = JSON.parse(text) as unknown;
    return typeof v === "object" && v !== null ? (v as Record<string, unknown>) : {};
  } catch {
    return text ? { error: text } : {};
  }
}

/** The call as one line: the tool's label and what it acts on. */
export function callLine(tool: string, args: Record<string, unknown>, theme: ToolTheme): Piece[] {
  const title: Piece = [tool, (t) => theme.fg("toolTitle", theme.bold(t))];
  const dim = (t: string) => theme.fg("muted", t);
  switch (tool) {
    case "crew_spawn":
      return [title, [` ${str(args["subagent"])}`], [str(args["brief"]) ? ` · ${str(args["brief"])}` : "", dim]];
    case "crew_respond":
      return [title, [` ${str(args["subagent_id"])}`], [str(args["message"]) ? ` · ${str(args["message"])}` : "", dim]];
    case "crew_done":
      return [title, [` ${str(args["subagent_id"])}`]];
    case "crew_land":
      return [title, [` ${str(args["subagent_id"])}`], [args["check"] === true ? " · checks first" : "", dim]];
    case "crew_abort": {
      const ids =
        args["all"] === true ? ["all"] : [str(args["subagent_id"]), ...list(args["subagent_ids"])].filter(Boolean);
      return [title, [` ${ids.join(", ")}`]];
    }
    default:
      return [title];
  }
}

/** The confirmation lines of a result, or its error text. */
export function resultLines(tool: string, r: ToolResultView, isError: boolean, theme: ToolTheme): Piece[][] {
  const v = resultJson(r);
  const ok = (t: string) => theme.fg("success", t);
  const dim = (t: string) => theme.fg("muted", t);
  if (isError || typeof v["error"] === "string") return [[[str(v["error"]) || "failed", (t) => theme.fg("error", t)]]];
  const details = (r.details ?? {}) as Record<string, unknown>;
  switch (tool) {
    case "crew_spawn": {
      const who = str(details["name"]) || str(v["subagent_id"]);
      const brief = str(details["brief"]);
      const machine = str(details["machine"]);
      return [
        [
          ["spawned ", ok],
          [who, (t) => theme.bold(t)],
          [machine ? ` on ${machine}` : ""],
          [brief ? ` · ${brief}` : "", dim],
        ],
      ];
    }
    case "crew_respond":
      return [[["sent to ", ok], [str(v["subagent_id"])], [" · its answer arrives as a message", dim]]];
    case "crew_done":
      return [[["closed ", ok], [str(v["subagent_id"])]]];
    case "crew_land":
      return [
        [
          [v["landed"] === true ? "landed " : "nothing to land: ", ok],
          [str(v["subagent_id"])],
          [str(v["landedAs"]) ? ` as ${str(v["landedAs"]).slice(0, 12)}` : ""],
          [str(v["said"]) ? ` · ${str(v["said"])}` : "", dim],
        ],
      ];
    case "crew_abort": {
      const lines: Piece[][] = [[["aborted ", ok], [list(v["aborted_ids"]).join(", ") || "none"]]];
      const missing = list(v["missing_ids"]);
      if (missing.length > 0) lines.push([[`not open: ${missing.join(", ")}`, dim]]);
      return lines;
    }
    case "crew_status": {
      const sessions = Array.isArray(v["sessions"]) ? (v["sessions"] as Record<string, unknown>[]) : [];
      if (sessions.length === 0) return [[["no open subagents", dim]]];
      return [
        [[`${sessions.length} open`, ok]],
        ...sessions.map((x): Piece[] => [
          [`${str(x["subagent_id"])} `],
          [str(x["status"]), dim],
          [str(x["brief"]) ? ` · ${str(x["brief"])}` : ""],
        ]),
      ];
    }
    case "crew_list": {
      const agents = Array.isArray(v["subagents"]) ? (v["subagents"] as Record<string, unknown>[]) : [];
      const warnings = Array.isArray(v["warnings"]) ? v["warnings"].length : 0;
      return [
        [
          [`${agents.length} subagent(s): `, ok],
          [agents.map((a) => str(a["name"])).join(", ")],
          [warnings ? ` · ${warnings} warning(s)` : "", dim],
        ],
      ];
    }
    default:
      return [[[JSON.stringify(v)]]];
  }
}

/** renderCall/renderResult for a crew tool, in the shape pi's registerTool takes. */
export function crewToolRenderers(tool: string) {
  return {
    renderCall(args: unknown, theme: ToolTheme): TextComponent {
      const a = typeof args === "object" && args !== null ? (args as Record<string, unknown>) : {};
      return lineComponent(() => [callLine(tool, a, theme)]);
    },
    renderResult(
      result: ToolResultView,
      options: { expanded?: boolean },
      theme: ToolTheme,
      context?: { isError?: boolean },
    ): TextComponent {
      const lines = resultLines(tool, result, context?.isError === true, theme);
      // Expanded (ctrl+o) also shows the JSON the model got, one line.
      const raw = result.content?.find((c) => c.type === "text")?.text ?? "";
      return lineComponent(() => (options.expanded && raw ? [...lines, [[raw, (t) => theme.fg("muted", t)]]] : lines));
    },
  };
}
