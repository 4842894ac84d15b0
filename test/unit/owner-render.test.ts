// The owner TUI's tool lines and Markdown cards, rendered to strings (pi's real Markdown component from pi-tui).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Markdown } from "@mariozechner/pi-tui";
import stringWidth from "string-width";
import { loadPiMarkdown, renderCrewCard, type MarkdownCtor } from "../../src/extensions/cards.js";
import { crewToolRenderers } from "../../src/extensions/tool-render.js";

const theme = { bold: (t: string) => `<b>${t}</b>`, fg: (_c: string, t: string) => t };
const plainTheme = { bold: (t: string) => t, fg: (_c: string, t: string) => t };

test("crew_spawn's result is one confirmation line; an error shows its words; widths are terminal columns", () => {
  const r = crewToolRenderers("crew_spawn");
  const ok = r.renderResult(
    {
      content: [{ type: "text", text: '{"subagent_id":"tmx4irfk41hs"}' }],
      details: { name: "worker-flash-41hs", brief: "retry with jitter" },
    },
    {},
    plainTheme,
    { isError: false },
  );
  assert.deepEqual(ok.render(80), ["spawned worker-flash-41hs · retry with jitter"]);
  const far = r.renderResult(
    {
      content: [{ type: "text", text: '{"subagent_id":"tmx4irfk41hs"}' }],
      details: { name: "worker-flash-41hs", brief: "retry", machine: "builder" },
    },
    {},
    plainTheme,
    { isError: false },
  );
  assert.deepEqual(far.render(80), ["spawned worker-flash-41hs on builder · retry"]);
  const err = r.renderResult(
    { content: [{ type: "text", text: '{"error":"No subagent with id \\"x\\"; crew_status lists them."}' }] },
    {},
    plainTheme,
    { isError: true },
  );
  assert.deepEqual(err.render(80), ['No subagent with id "x"; crew_status lists them.']);
  const call = r.renderCall({ subagent: "worker", brief: "重试与抖动重试与抖动" }, plainTheme);
  const line = call.render(24)[0]!;
  assert.ok(stringWidth(line) <= 24, line);
  assert.equal(line, "crew_spawn worker · 重…", "a wide character is never split");
  // Expanded, the JSON the model got is shown too.
  assert.equal(
    r
      .renderResult(
        { content: [{ type: "text", text: '{"subagent_id":"t1"}' }], details: {} },
        { expanded: true },
        plainTheme,
      )
      .render(80)[1],
    '{"subagent_id":"t1"}',
  );
});

test("a result card through pi's Markdown shows bold without markers; without it the plain card stays", async () => {
  const card = {
    details: { card: { status: "completed", subagent_id: "t1", brief: "b", report: "Did **BOLD** and `CODE`" } },
  };
  const md = renderCrewCard(card, { expanded: true }, theme, Markdown as unknown as MarkdownCtor)!
    .render(60)
    .join("\n");
  assert.match(md, /<b>BOLD<\/b>/);
  assert.doesNotMatch(md, /\*\*BOLD\*\*|`CODE`/);
  const plain = renderCrewCard(card, { expanded: true }, theme)!.render(60).join("\n");
  assert.match(plain, /\*\*BOLD\*\*/, "the fallback shows the report unchanged");
  assert.equal(typeof (await loadPiMarkdown()), "function", "the dev checkout resolves pi-tui");
});
