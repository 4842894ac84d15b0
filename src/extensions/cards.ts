// TUI cards for crew deliveries: rendered from the message's structured details (never from model-bound JSON).
// The component is a plain object implementing pi-tui's Component shape, so nothing is imported from pi at runtime.
import { checkLine, failedChecksLine } from "../core/result/check-lines.js";
import type { CardData, WorkPlace } from "../core/crew/crew-delivery.js";

export const CARD_ICONS: Record<CardData["status"], string> = {
  completed: "✅",
  needs_input: "❓",
  blocked: "⏸",
  error: "❌",
  aborted: "⏹",
};

/** Where an isolated task's work is, in one line: its branch and how it lands, or where it landed. */
export function workLine(id: string, w: WorkPlace): string {
  const there = w.machine ? ` on machine ${w.machine}` : "";
  if (w.landed) return `Work: landed on ${w.landedOn ?? "its base branch"}${there} (from branch ${w.branch})`;
  return w.machine
    ? `Work: on branch ${w.branch}${there}, not in this checkout; land it there with \`dsh-herdr land\``
    : `Work: on branch ${w.branch}, not in your checkout yet; land it with \`dsh-herdr land ${id}\``;
}

/** What the card says before its body: a failed check first, then each check, then where the work is. */
function cardTop(card: CardData): { failed?: string; checks: string[]; work?: string } {
  const failed = failedChecksLine(card.checks);
  return {
    ...(failed ? { failed } : {}),
    checks: (card.checks ?? []).map(checkLine),
    ...(card.work ? { work: workLine(card.subagent_id, card.work) } : {}),
  };
}

/** `aborted`, with a reason that says more than that (a card pushed by an older daemon carries `aborted` again). */
function abortedText(card: CardData): string {
  return card.reason && card.reason !== "aborted" ? `aborted: ${card.reason}` : "aborted";
}

/**
 * Markdown: icon, subagent id and brief; a failed check first, the checks and where the work is; then Needs (first)
 * and the unchanged report, or the error/abort reason.
 */
export function cardMarkdown(card: CardData): string {
  const head = `**${CARD_ICONS[card.status]} ${card.subagent_id}**${card.brief ? ` · ${card.brief}` : ""}`;
  if (card.status === "aborted") return `${head} · ${abortedText(card)}`;
  const top = cardTop(card);
  const parts = [head];
  if (top.failed) parts.push(`**${top.failed}**`);
  if (top.checks.length > 0) parts.push(top.checks.map((l) => `- ${l}`).join("\n"));
  if (top.work) parts.push(top.work);
  if (card.status === "error" || card.status === "blocked") {
    parts.push(`**${card.status === "blocked" ? "Paused at a spend cap" : "Error"}**`, card.error ?? "unknown error");
    return parts.join("\n\n");
  }
  if (card.status === "needs_input") parts.push(`**Needs**\n\n${card.needs ?? ""}`);
  parts.push(card.report ?? "");
  return parts.join("\n\n");
}

/** Hard-wrap text to the viewport (the card is plain text, so length is width). */
export function wrapLines(text: string, width: number): string[] {
  const w = Math.max(10, width);
  const out: string[] = [];
  for (const line of text.split("\n")) {
    if (line.length <= w) {
      out.push(line);
      continue;
    }
    let rest = line;
    while (rest.length > w) {
      let cut = rest.lastIndexOf(" ", w);
      if (cut <= 0) cut = w;
      out.push(rest.slice(0, cut));
      rest = rest.slice(cut).replace(/^ /, "");
    }
    out.push(rest);
  }
  return out;
}

export interface TextComponent {
  render(width: number): string[];
  invalidate(): void;
}

/** The part of pi's Theme the cards use (pi passes it to message renderers; nothing is imported from pi). */
export interface CardTheme {
  bold(text: string): string;
  fg?(color: string, text: string): string;
  italic?(text: string): string;
  underline?(text: string): string;
}

/** pi-tui's Markdown component, as pi's extension loader hands it to us (see loadPiMarkdown); never bundled. */
export type MarkdownCtor = new (
  text: string,
  paddingX: number,
  paddingY: number,
  theme: Record<string, unknown>,
) => TextComponent;

/**
 * pi-tui's Markdown class from the pi that loaded this extension: pi's loader aliases the pi-tui specifiers to its own
 * copy, so this is pi's component, not a dependency of ours. Undefined outside pi (or a pi without it): the cards
 * then fall back to plain text with bold labels.
 */
export async function loadPiMarkdown(): Promise<MarkdownCtor | undefined> {
  for (const spec of ["@earendil-works/pi-tui", "@mariozechner/pi-tui"]) {
    try {
      const mod = (await import(spec)) as { Markdown?: unknown };
      if (typeof mod.Markdown === "function") return mod.Markdown as MarkdownCtor;
    } catch {
      // not this pi's package name
    }
  }
  return undefined;
}

/** pi's markdown styles from the theme pi passes to renderers (what pi's own getMarkdownTheme builds). */
export function markdownTheme(theme: CardTheme): Record<string, unknown> {
  const fg = (color: string) => (t: string) => (theme.fg ? theme.fg(color, t) : t);
  return {
    heading: fg("mdHeading"),
    link: fg("mdLink"),
    linkUrl: fg("mdLinkUrl"),
    code: fg("mdCode"),
    codeBlock: fg("mdCodeBlock"),
    codeBlockBorder: fg("mdCodeBlockBorder"),
    quote: fg("mdQuote"),
    quoteBorder: fg("mdQuoteBorder"),
    hr: fg("mdHr"),
    listBullet: fg("mdListBullet"),
    bold: (t: string) => theme.bold(t),
    italic: (t: string) => (theme.italic ? theme.italic(t) : t),
    underline: (t: string) => (theme.underline ? theme.underline(t) : t),
    strikethrough: (t: string) => `\x1b[9m${t}\x1b[29m`,
  };
}

/** One logical line of a card: wrapped to the width, then styled (labels bold, the id in the head line bold). */
interface CardLine {
  text: string;
  bold?: boolean;
  boldPrefix?: string;
}

function cardLines(card: CardData): CardLine[] {
  const id = `${CARD_ICONS[card.status]} ${card.subagent_id}`;
  const head: CardLine = { text: `${id}${card.brief ? ` · ${card.brief}` : ""}`, boldPrefix: id };
  const para = (text: string): CardLine[] => text.split("\n").map((t) => ({ text: t }));
  if (card.status === "aborted") return [{ ...head, text: `${head.text} · ${abortedText(card)}` }];
  const top = cardTop(card);
  const lines = [head];
  if (top.failed) lines.push({ text: "" }, { text: top.failed, bold: true });
  if (top.checks.length > 0) lines.push({ text: "" }, ...top.checks.map((t) => ({ text: t })));
  if (top.work) lines.push({ text: "" }, { text: top.work });
  if (card.status === "error" || card.status === "blocked") {
    const label = card.status === "blocked" ? "Paused at a spend cap" : "Error";
    return [...lines, { text: "" }, { text: label, bold: true }, { text: "" }, ...para(card.error ?? "unknown error")];
  }
  if (card.status === "needs_input")
    lines.push({ text: "" }, { text: "Needs", bold: true }, { text: "" }, ...para(card.needs ?? ""));
  lines.push({ text: "" }, ...para(card.report ?? ""));
  return lines;
}

/** Wrapped by visible text first, styled after, so escape codes never count against the width. */
function renderCard(card: CardData, width: number, theme?: CardTheme): string[] {
  const bold = theme ? (t: string) => theme.bold(t) : (t: string) => t;
  const out: string[] = [];
  for (const l of cardLines(card)) {
    wrapLines(l.text, width).forEach((w, i) => {
      if (l.bold) out.push(bold(w));
      else if (i === 0 && l.boldPrefix && w.startsWith(l.boldPrefix))
        out.push(bold(l.boldPrefix) + w.slice(l.boldPrefix.length));
      else out.push(w);
    });
  }
  return out;
}

export function textComponent(text: string, maxLines?: number): TextComponent {
  return linesComponent(() => text, maxLines);
}

function linesComponent(render: ((width: number) => string[]) | (() => string), maxLines?: number): TextComponent {
  return {
    render(width: number) {
      const r = render(width);
      const lines = typeof r === "string" ? wrapLines(r, width) : r;
      if (maxLines === undefined || lines.length <= maxLines) return lines;
      return [...lines.slice(0, maxLines), `… ${lines.length - maxLines} more lines (expand to read all)`];
    },
    invalidate() {},
  };
}

/**
 * A message renderer for crew-result / crew-abort messages: collapsed cards show the first 12 lines. With pi's
 * theme the id and the Needs/Error labels are bold (markdown markers would show literally in a plain component).
 */
export function renderCrewCard(
  message: { details?: unknown; content?: unknown },
  options: { expanded: boolean },
  theme?: CardTheme,
  markdown?: MarkdownCtor,
): TextComponent | undefined {
  const card = (message.details as { card?: CardData } | undefined)?.card;
  if (!card || !(card.status in CARD_ICONS)) return undefined;
  const maxLines = options.expanded ? undefined : 12;
  // With pi's Markdown the report reads as written (bold, lists, code), not with literal ** markers.
  if (markdown && theme) {
    const md = new markdown(cardMarkdown(card), 0, 0, markdownTheme(theme));
    return linesComponent((width: number) => md.render(width), maxLines);
  }
  return linesComponent((width: number) => renderCard(card, width, theme), maxLines);
}
