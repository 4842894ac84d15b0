// TUI cards for crew deliveries: rendered from the message's structured details (never from model-bound JSON).
// The component is a plain object implementing pi-tui's Component shape, so nothing is imported from pi at runtime.
import type { CardData } from "../core/crew-delivery.js";

export const CARD_ICONS: Record<CardData["status"], string> = {
  completed: "✅",
  needs_input: "❓",
  error: "❌",
  aborted: "⏹",
};

/** Markdown: icon, subagent id and brief, then Needs (first) and the unchanged report, or the error/abort reason. */
export function cardMarkdown(card: CardData): string {
  const head = `**${CARD_ICONS[card.status]} ${card.subagent_id}**${card.brief ? ` · ${card.brief}` : ""}`;
  if (card.status === "aborted") return `${head} · aborted${card.reason ? `: ${card.reason}` : ""}`;
  if (card.status === "error") return `${head}\n\n**Error**\n\n${card.error ?? "unknown error"}`;
  const parts = [head];
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

export function textComponent(text: string, maxLines?: number): TextComponent {
  return {
    render(width: number) {
      const lines = wrapLines(text, width);
      if (maxLines === undefined || lines.length <= maxLines) return lines;
      return [...lines.slice(0, maxLines), `… ${lines.length - maxLines} more lines (expand to read all)`];
    },
    invalidate() {},
  };
}

/** A message renderer for crew-result / crew-abort messages: collapsed cards show the first 12 lines. */
export function renderCrewCard(message: { details?: unknown; content?: unknown }, options: { expanded: boolean }): TextComponent | undefined {
  const card = (message.details as { card?: CardData } | undefined)?.card;
  if (!card || !(card.status in CARD_ICONS)) return undefined;
  return textComponent(cardMarkdown(card), options.expanded ? undefined : 12);
}
