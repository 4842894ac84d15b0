// What `list`, `watch` and the cards show: only what happened, in words that fit the terminal they are shown on.
import { test } from "node:test";
import assert from "node:assert/strict";
import stringWidth from "string-width";
import type { AgentResult } from "../../src/core/types.js";
import { renderCard } from "../../src/cli/format/card.js";
import { questionLine, renderTable } from "../../src/cli/format/table.js";
import { KEYS_HELP, WatchKeys, type WatchKeysOptions } from "../../src/cli/commands/watch-keys.js";
import { deliveryFor } from "../../src/core/crew/crew-delivery.js";
import { settleError } from "../../src/core/lifecycle/settle-verdict.js";
import { rowOf } from "../../src/store/task-index.js";
import { cardMarkdown, renderCrewCard } from "../../src/extensions/cards.js";

const now = 1_760_000_000_000 + 5 * 60_000;
function result(over: Partial<AgentResult> = {}): AgentResult {
  return {
    schemaVersion: 1,
    taskId: "tmg3k2a1b2c3",
    status: "completed",
    role: "worker",
    agent: { name: "worker-haiku-4-5-sllv", kind: "pi", model: "anthropic/claude-haiku-4-5", thinking: "medium" },
    herdrStatus: "done",
    summary: "done",
    brief: "add retries with jitter to the HTTP client and test them",
    cwd: "/home/u/src/some-project/packages/http-client",
    timing: { createdAt: 1_760_000_000_000, settledAt: 1_760_000_042_000 },
    nextAction: "none",
    ...over,
  };
}

const landing = {
  baseBranch: "main",
  baseHead: "a".repeat(40),
  clean: true,
  conflicts: [],
  landedAs: "b".repeat(40),
  strategy: "fast-forward" as const,
};

test("a landed task reads `landed` in list and watch, from the daemon's result and from the task index's row", () => {
  const landed = result({ landing });
  const fromIndex = rowOf(landed);
  for (const row of [landed, fromIndex]) {
    const [, line] = renderTable([row], now, 200, "/home/u");
    assert.match(line ?? "", /\slanded\s/, line);
    assert.doesNotMatch(line ?? "", /\scompleted\s/, line);
  }
  // Measured but not landed: still completed.
  const [, measured] = renderTable([result({ landing: { ...landing, landedAs: undefined } })], now, 200);
  assert.match(measured ?? "", /\scompleted\s/);
  // Coloured as a completion.
  const [, colored] = renderTable([landed], now, 200, "/home/u", true);
  assert.match(colored ?? "", /\x1b\[32mlanded\x1b\[39m/);
});

test("an abort the owner asked for says `aborted` once on its card", () => {
  const d = deliveryFor(result({ status: "interrupted" }), 1)!;
  const md = cardMarkdown(d.card);
  assert.equal(md.match(/aborted/g)?.length, 1, md);
  const tui = renderCrewCard({ details: { card: d.card } }, { expanded: true })!
    .render(100)
    .join("\n");
  assert.equal(tui.match(/aborted/g)?.length, 1, tui);
  // A card pushed by an older daemon (reason "aborted") reads the same.
  assert.equal(cardMarkdown({ ...d.card, reason: "aborted" }), md);
});

test("a card names no thinking level for a model that never ran", () => {
  const never = result({
    status: "failed",
    error: { code: "PROMPT_FAILED", message: "pi did not run the prompt" },
  });
  const head = renderCard(never).split("\n")[0] ?? "";
  assert.equal(head, "[herdr] worker pi (anthropic/claude-haiku-4-5) → failed");
  const ran = result({ usage: { assistant: 2, toolCalls: 1, outputTokens: 40 } });
  assert.match(renderCard(ran).split("\n")[0] ?? "", /\(anthropic\/claude-haiku-4-5 · medium\)/);
});

function keysOver(rows: AgentResult[]): WatchKeys {
  return new WatchKeys({ rows: () => rows } as unknown as WatchKeysOptions);
}

test("watch at 80 columns keeps `q quit` in its key help and gives the brief a fair share", () => {
  const width = 79; // watch draws to one column less than the terminal
  const rows = [result({ status: "running" }), result({ taskId: "tk81aaaaaaaa", landing, cwd: "/x" })];
  const footer = keysOver(rows).footer("watching 2 task(s) · 01:02:03", width);
  assert.ok(footer.every((l) => stringWidth(l) <= width));
  assert.match(footer.at(-1) ?? "", /q quit$/, footer.at(-1));
  assert.equal(keysOver(rows).footer("s", 200).at(-1), KEYS_HELP, "a wide terminal shows every key in full");
  const table = renderTable(rows, now, width);
  assert.ok(table.every((l) => stringWidth(l) <= width));
  // At least 20 columns of brief: `add retries with ji…`.
  assert.match(table[1] ?? "", /add retries with ji/, table.join("\n"));
});

test("watch shows a blocked task's question: under the table for the selected task, and as a line without keys", () => {
  const blocked = result({ status: "blocked", summary: "Delete the legacy client or keep it behind a flag?" });
  const footer = keysOver([blocked]).footer("watching 1 task(s)", 120);
  assert.ok(
    footer.some((l) => l.includes("needs: Delete the legacy client or keep it behind a flag?")),
    footer.join("\n"),
  );
  assert.equal(questionLine(result({ status: "running" }), 120), undefined);
  assert.equal(questionLine(blocked, 120), "tmg3k2a1b2c3 needs: Delete the legacy client or keep it behind a flag?");
  assert.ok(stringWidth(questionLine(blocked, 30) ?? "") <= 30);
});

test("a failed cycle's error does not advise `respond` (refused on a failed task): it says to spawn again", () => {
  const ev = { hasReport: false, sessionPath: "/s.jsonl" };
  const aborted = settleError({ kind: "agent_end", stopReason: "aborted" }, ev);
  const errored = settleError(
    { kind: "agent_end", stopReason: "error" },
    { ...ev, stopReason: "error", errorMessage: "429" },
  );
  for (const e of [aborted, errored]) {
    assert.ok(e);
    assert.doesNotMatch(e.message, /respond/, e.message);
    assert.match(e.message, /spawn again/);
  }
  assert.equal(aborted?.code, "AGENT_ABORTED");
  assert.equal(errored?.code, "AGENT_ERROR");
});
