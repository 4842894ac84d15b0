import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import {
  relayedReport,
  DELIVERY_EXTRAS,
  DELIVERY_TTL_MS,
  crewStatusOf,
  deliveryFor,
  isExpired,
} from "../../src/core/crew/crew-delivery.js";
import type { AgentResult, AgentStatus } from "../../src/core/types.js";
import { cardMarkdown, renderCrewCard } from "../../src/extensions/cards.js";

const root = join(import.meta.dirname, "..", "..", "..");
const pushSchema = JSON.parse(readFileSync(join(root, "schema", "protocol", "delivery.push.json"), "utf8"));
const validPush = new Ajv2020({ strict: false }).addSchema(pushSchema).getSchema(`${pushSchema.$id}#/$defs/params`)!;

const result = (status: AgentStatus, extra: Partial<AgentResult> = {}): AgentResult => ({
  schemaVersion: 1,
  taskId: "tabc123456789",
  status,
  role: "worker",
  herdrStatus: "unknown",
  summary: "sum",
  nextAction: "none",
  agent: { name: "w", kind: "pi", model: "m", thinking: "off" },
  timing: { createdAt: 1 },
  brief: "label",
  ...extra,
});

test("completed and needs_input deliveries carry the validated crew_report unchanged", () => {
  const report = {
    outcome: "needs_input" as const,
    report: "The *implementation* needs a decision.",
    needs: "Delete or keep?",
  };
  const d = deliveryFor(result("blocked"), 2, report)!;
  assert.deepEqual(d.model, { subagent_id: "tabc123456789", brief: "label", result: report });
  assert.equal(d.deliveryId, "tabc123456789-c2-needs_input");
  assert.equal(validPush({ ...d, queuedAt: 5 }), true, JSON.stringify(validPush.errors));
  const c = deliveryFor(result("completed"), 1, { outcome: "completed", report: "done" })!;
  assert.deepEqual(c.model, {
    subagent_id: "tabc123456789",
    brief: "label",
    result: { outcome: "completed", report: "done" },
  });
});

test("errors use status/error, never a fabricated result; only the owner's abort is TUI-only; running and closed owe nothing", () => {
  const e = deliveryFor(result("failed", { error: { code: "CONTRACT_ERROR", message: "no crew_report twice" } }), 1)!;
  assert.deepEqual(e.model, {
    subagent_id: "tabc123456789",
    brief: "label",
    status: "error",
    error: "CONTRACT_ERROR: no crew_report twice",
  });
  assert.equal(validPush({ ...e, queuedAt: 5 }), true);
  // A timeout is no abort the owner asked for: its model hears it as an error.
  const t = deliveryFor(result("interrupted", { error: { code: "TIMEOUT", message: "too slow" } }), 1)!;
  assert.deepEqual(t.model, {
    subagent_id: "tabc123456789",
    brief: "label",
    status: "error",
    error: "TIMEOUT: too slow",
  });
  assert.equal(t.deliveryId, "tabc123456789-c1-error");
  assert.equal(validPush({ ...t, queuedAt: 5 }), true);
  const a = deliveryFor(result("interrupted"), 1)!;
  assert.equal(a.model, null);
  assert.deepEqual(a.card, { status: "aborted", subagent_id: "tabc123456789", brief: "label" });
  assert.equal(validPush({ ...a, queuedAt: 5 }), true);
  for (const s of ["working", "running", "starting", "closed"] as const) assert.equal(deliveryFor(result(s), 1), null);
});

test("without a validated crew_report the delivery is an error carrying pi's own words, never a report made from result.md or the status", () => {
  const r = result("completed", {
    result: { path: "/r.md", text: "---\nstatus: completed\n---\nBody text\n", meta: { status: "completed" } },
    finalMessage: "  All done, see the diff.  ",
  });
  const d = deliveryFor(r, 1)!;
  assert.equal("result" in d.model!, false, JSON.stringify(d.model));
  assert.equal((d.model as { status: string }).status, "error");
  assert.match((d.model as { error: string }).error, /^NO_REPORT: /);
  assert.ok((d.model as { error: string }).error.includes("All done, see the diff."), "pi's own last words");
  assert.equal(d.card.status, "error");
  assert.equal(d.deliveryId, "tabc123456789-c1-error");
  assert.equal(validPush({ ...d, queuedAt: 5 }), true, JSON.stringify(validPush.errors));
  // Herdr's blocked with no report: no needs_input is made up from the final message either.
  const b = deliveryFor(result("blocked", { herdrStatus: "blocked", finalMessage: "Which one?" }), 1)!;
  assert.equal((b.model as { status: string }).status, "error");
  assert.ok((b.model as { error: string }).error.includes("Which one?"));
  const none = deliveryFor(result("completed", { summary: "completed" }), 1)!;
  assert.equal((none.model as { status: string }).status, "error");
  assert.match((none.model as { error: string }).error, /^NO_REPORT: /);
});

test("a validated crew_report is delivered exactly as the child made it, whatever Herdr says", () => {
  const report = { outcome: "completed" as const, report: "Done: wrote feature.txt.\nSecond line." };
  const d = deliveryFor(result("blocked", { herdrStatus: "blocked", summary: "Done: wrote feature.txt." }), 1, report)!;
  assert.deepEqual(d.model, { subagent_id: "tabc123456789", brief: "label", result: report });
  assert.equal(d.card.status, "completed");
  assert.equal(d.card.report, report.report);
  assert.equal(d.deliveryId, "tabc123456789-c1-completed");
  const ask = { outcome: "needs_input" as const, report: "r", needs: "which?" };
  const n = deliveryFor(result("completed"), 2, ask)!;
  assert.deepEqual((n.model as { result: unknown }).result, ask);
  assert.equal(n.card.status, "needs_input");
  // Herdr's missing pane after the child reported: the report stands.
  const g = deliveryFor(result("gone", { herdrStatus: "unknown" }), 1, report)!;
  assert.deepEqual((g.model as { result: unknown }).result, report);
});

test("a cap pause reaches the owner as a blocked error naming the cap, the spend and the person's command, never as a result", () => {
  const cap = { cap: "turns" as const, limit: 1, spent: 1, step: 1 };
  const d = deliveryFor(
    result("blocked", {
      cap,
      summary: "turn cap 1 reached (1 spent); respond to continue with another 1",
      finalMessage: "working on it",
    }),
    1,
  )!;
  assert.equal("result" in d.model!, false, JSON.stringify(d.model));
  const m = d.model as { subagent_id: string; brief: string; status: string; error: string };
  assert.equal(m.status, "blocked");
  assert.equal(m.subagent_id, "tabc123456789");
  assert.equal(m.brief, "label");
  assert.match(m.error, /^CAP_REACHED: /);
  assert.match(m.error, /turn cap 1 reached \(1 spent\)/);
  assert.ok(m.error.includes('dsh-herdr respond tabc123456789 --max-turns 1 "'), m.error);
  assert.match(m.error, /ask the (user|person)/i);
  assert.equal(d.card.status, "blocked");
  assert.equal(d.card.error, m.error);
  assert.equal(validPush({ ...d, queuedAt: 5 }), true, JSON.stringify(validPush.errors));
  const cost = deliveryFor(result("blocked", { cap: { cap: "cost", limit: 1.5, spent: 2, step: 1.5 } }), 3)!;
  assert.ok((cost.model as { error: string }).error.includes("dsh-herdr respond tabc123456789 --max-cost 1.5 "));
  assert.match((cost.model as { error: string }).error, /cost cap 1\.50 \$ reached \(2\.00 \$ spent\)/);
  const out = deliveryFor(result("blocked", { cap: { cap: "outputTokens", limit: 100, spent: 120, step: 100 } }), 1)!;
  assert.ok((out.model as { error: string }).error.includes("--max-output-tokens 100 "));
});

test("status mapping and the 24 h expiry", () => {
  assert.deepEqual(
    (["blocked", "completed", "failed", "gone", "interrupted", "closed", "working"] as const).map(crewStatusOf),
    ["needs_input", "completed", "error", "error", "aborted", "closed", "running"],
  );
  assert.equal(isExpired(0, DELIVERY_TTL_MS), false);
  assert.equal(isExpired(0, DELIVERY_TTL_MS + 1), true);
});

test("cards: icon, id and brief first; Needs before the unchanged report; error explanation; compact abort", () => {
  assert.equal(
    cardMarkdown({ status: "completed", subagent_id: "t1", brief: "b", report: "R\n\nmore" }),
    "**✅ t1** · b\n\nR\n\nmore",
  );
  assert.equal(
    cardMarkdown({ status: "needs_input", subagent_id: "t1", brief: "b", report: "R", needs: "N?" }),
    "**❓ t1** · b\n\n**Needs**\n\nN?\n\nR",
  );
  assert.equal(
    cardMarkdown({ status: "error", subagent_id: "t1", brief: "b", error: "E" }),
    "**❌ t1** · b\n\n**Error**\n\nE",
  );
  assert.equal(
    cardMarkdown({ status: "aborted", subagent_id: "t1", brief: "b", reason: "by owner" }),
    "**⏹ t1** · b · aborted: by owner",
  );
  const long = {
    details: {
      card: {
        status: "completed",
        subagent_id: "t1",
        brief: "b",
        report: Array.from({ length: 30 }, (_, i) => `line ${i}`).join("\n"),
      },
    },
  };
  const collapsed = renderCrewCard(long, { expanded: false })!.render(40);
  assert.equal(collapsed.length, 13);
  assert.match(collapsed.at(-1)!, /more lines/);
  assert.equal(renderCrewCard(long, { expanded: true })!.render(40).length, 32);
  assert.ok(
    renderCrewCard(long, { expanded: true })!
      .render(12)
      .every((l) => l.length <= 12),
  );
  assert.equal(renderCrewCard({ details: {} }, { expanded: true }), undefined);
  // Rendered, no markdown markers show; with pi's theme the id and the labels are bold, wrapped by visible width.
  const ask = {
    details: {
      card: { status: "needs_input", subagent_id: "t1", brief: "a brief", report: "the report", needs: "which one?" },
    },
  };
  assert.deepEqual(renderCrewCard(ask, { expanded: true })!.render(40), [
    "❓ t1 · a brief",
    "",
    "Needs",
    "",
    "which one?",
    "",
    "the report",
  ]);
  const theme = { bold: (t: string) => `<b>${t}</b>` };
  assert.deepEqual(renderCrewCard(ask, { expanded: true }, theme)!.render(40), [
    "<b>❓ t1</b> · a brief",
    "",
    "<b>Needs</b>",
    "",
    "which one?",
    "",
    "the report",
  ]);
  const err = {
    details: { card: { status: "error", subagent_id: "t2", brief: "b", error: "word ".repeat(10).trim() } },
  };
  const lines = renderCrewCard(err, { expanded: true }, theme)!.render(12);
  assert.deepEqual(lines.slice(0, 3), ["<b>❌ t2</b> · b", "", "<b>Error</b>"]);
  assert.ok(
    lines.every((l) => l.replace(/<\/?b>/g, "").length <= 12),
    JSON.stringify(lines),
  );
  assert.ok(lines.every((l) => !l.includes("**")));
});

test("a completed delivery carries the check receipts; a failing check's output tail reaches the owner's model", () => {
  const checks = [
    { command: "npm test", exitCode: 0, durationMs: 5, startedAt: 1, logPath: "/l/1", outputTail: "all good\n" },
    { command: "npm run lint", exitCode: 2, durationMs: 5, startedAt: 2, logPath: "/l/2", outputTail: "x.ts: error\n" },
  ];
  const d = deliveryFor(result("completed", { checks, verified: false }), 1, { outcome: "completed", report: "done" })!;
  assert.deepEqual(d.model, {
    subagent_id: "tabc123456789",
    brief: "label",
    result: { outcome: "completed", report: "done" },
    checks: [
      { command: "npm test", exitCode: 0 },
      { command: "npm run lint", exitCode: 2, outputTail: "x.ts: error\n" },
    ],
    verified: false,
  });
  assert.equal(validPush({ ...d, queuedAt: 5 }), true, JSON.stringify(validPush.errors));
});

test("a delivery carries only the warnings an owner can act on (a sibling conflict, a reviewer that edited), not bookkeeping", () => {
  const sibling =
    "conflicts with sibling task tdef987654321 (w) in 1 path(s): src/a.ts; land one of the two, then respond to the other to rebase its work onto it";
  const warnings = [
    "not isolated: /repo has 1 uncommitted change(s) (x.ts) and the child edits that working tree beside them",
    "empty harvest: no result.md and no new final message",
    "stale session: the session file did not change after the prompt; finalMessage omitted",
    sibling,
    "reviewer changed files: a.ts",
  ];
  const d = deliveryFor(result("completed", { warnings }), 1, { outcome: "completed", report: "done" })!;
  // Only what the owner's model can act on: our bookkeeping stays in the AgentResult.
  assert.deepEqual(d.model, {
    subagent_id: "tabc123456789",
    brief: "label",
    result: { outcome: "completed", report: "done" },
    warnings: [sibling, "reviewer changed files: a.ts"],
  });
  assert.equal(validPush({ ...d, queuedAt: 5 }), true, JSON.stringify(validPush.errors));
  const n = deliveryFor(result("blocked", { warnings: [sibling] }), 2, {
    outcome: "needs_input",
    report: "r",
    needs: "?",
  })!;
  assert.deepEqual((n.model as { warnings?: string[] }).warnings, [sibling]);
  // None: no field (the pi-crew delivery as it was).
  const plain = deliveryFor(result("completed", { warnings: [] }), 1, { outcome: "completed", report: "done" })!;
  assert.equal("warnings" in plain.model!, false);
});

test("the additive fields are declared once: the schema's model part and docs/socket-protocol.md name exactly them", () => {
  const resultPart = pushSchema.$defs.params.properties.model.oneOf[0].properties;
  const extra = Object.keys(resultPart).filter((k) => !["subagent_id", "brief", "result"].includes(k));
  assert.deepEqual(extra.sort(), [...DELIVERY_EXTRAS].sort());
  const doc = readFileSync(join(root, "docs", "socket-protocol.md"), "utf8");
  for (const k of DELIVERY_EXTRAS) assert.match(doc, new RegExp("\\| `" + k + "` \\|"), `docs row for ${k}`);
});

test("an isolated task's delivery says where the work is: its branch, and whether it is landed", () => {
  const worktree = { path: "/w/x", branch: "dsh/tabc123456789", repo: "/repo", base: "main" };
  const d = deliveryFor(result("completed", { worktree }), 1, { outcome: "completed", report: "done" })!;
  assert.deepEqual((d.model as { work?: unknown }).work, { branch: "dsh/tabc123456789", landed: false });
  assert.deepEqual(d.card.work, { branch: "dsh/tabc123456789", landed: false });
  assert.equal(validPush({ ...d, queuedAt: 5 }), true, JSON.stringify(validPush.errors));
  const landing = { baseBranch: "main", baseHead: "abc", clean: true, conflicts: [], landedAs: "def" };
  const l = deliveryFor(result("completed", { worktree, landing }), 2, { outcome: "completed", report: "done" })!;
  assert.deepEqual((l.model as { work?: unknown }).work, {
    branch: "dsh/tabc123456789",
    landed: true,
    landedOn: "main",
  });
  // Not isolated: the work is in the checkout it was spawned in, no field.
  const plain = deliveryFor(result("completed"), 1, { outcome: "completed", report: "done" })!;
  assert.equal("work" in plain.model!, false);
  const card = cardMarkdown({
    status: "completed",
    subagent_id: "t1",
    brief: "b",
    report: "R",
    work: { branch: "dsh/t1", landed: false },
  });
  assert.match(card, /dsh\/t1/);
  assert.match(card, /dsh-herdr land t1/);
});

test("a relayed task's report is read back from the result.md its machine's child extension wrote for it", () => {
  const md = (status: string, body: string) => ({
    path: "/r.md",
    text: `---\nstatus: ${status}\nsummary: x\n---\n\n${body}\n`,
    meta: { status },
  });
  assert.deepEqual(relayedReport(result("completed", { result: md("completed", "All done.\n\nDetails.") })), {
    outcome: "completed",
    report: "All done.\n\nDetails.",
  });
  assert.deepEqual(
    relayedReport(result("blocked", { result: md("blocked", "Half way.\n\n## Needs\n\nWhich color?") })),
    {
      outcome: "needs_input",
      report: "Half way.",
      needs: "Which color?",
    },
  );
  assert.equal(relayedReport(result("completed")), undefined);
  assert.equal(relayedReport(result("blocked", { result: md("blocked", "no question here") })), undefined);
  assert.equal(relayedReport(result("failed", { result: md("failed", "broke") })), undefined);
});
