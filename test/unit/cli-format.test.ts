import stringWidth from "string-width";
import { test } from "node:test";
import assert from "node:assert/strict";
import type { AgentResult } from "../../src/core/types.js";
import { formatDuration, parseDuration } from "../../src/cli/common/duration.js";
import { closestIds, resolveTaskId } from "../../src/cli/common/ids.js";
import { inCliWords } from "../../src/cli/main.js";
import { exitCodeForError, exitCodeForStatus } from "../../src/cli/common/exit-codes.js";
import { renderCard } from "../../src/cli/format/card.js";
import { renderTable } from "../../src/cli/format/table.js";
import { LiveBlock } from "../../src/cli/format/live.js";
import { DshError } from "../../src/core/errors.js";

const home = "/home/u";
function result(over: Partial<AgentResult> = {}): AgentResult {
  return {
    schemaVersion: 1,
    taskId: "tmg3k2a1b2c3",
    status: "completed",
    role: "reviewer",
    agent: {
      name: "review-grok4-7-a1b2",
      kind: "pi",
      model: "xai/grok-4.7",
      thinking: "high",
      paneId: "wV:p12",
      tabId: "wV:t6",
      runtime: "herdr",
    },
    herdrStatus: "done",
    sessionPath: "/home/u/.pi/agent/sessions/x.jsonl",
    summary: "2 majors, 1 minor",
    finalMessage: "[MAJOR] src/auth.ts:42 — token compared with ==",
    diff: {
      baselineHead: "abc",
      stat: " src/a.ts | 3 ++-\n 4 files changed, 120 insertions(+), 18 deletions(-)\n",
      files: ["a", "b", "c"],
      untracked: ["d"],
      patchPath: "/home/u/.dsh/herdr/tasks/tmg3k2a1b2c3/diff.patch",
      patchBytes: 900,
      truncated: false,
      dirtyAtStart: [],
    },
    timing: { createdAt: 1_760_000_000_000, settledAt: 1_760_000_042_000, elapsedMs: 42_000 },
    nextAction: "none",
    ...over,
  };
}

test("parseDuration accepts 90s, 5m, 1h30m, 250ms and plain ms", () => {
  assert.equal(parseDuration("90s"), 90_000);
  assert.equal(parseDuration("5m"), 300_000);
  assert.equal(parseDuration("1h30m"), 5_400_000);
  assert.equal(parseDuration("250ms"), 250);
  assert.equal(parseDuration("1500"), 1500);
});

test("parseDuration rejects garbage as a usage error naming the accepted forms", () => {
  for (const bad of ["", "5 minutes", "m5", "-3s", "5x"]) {
    assert.throws(
      () => parseDuration(bad, "--timeout"),
      (e: DshError) => {
        assert.equal(exitCodeForError(e), 2);
        assert.match(e.message, /--timeout.*90s, 5m/);
        return true;
      },
    );
  }
});

test("formatDuration is short and stable", () => {
  assert.equal(formatDuration(850), "850ms");
  assert.equal(formatDuration(12_400), "12s");
  assert.equal(formatDuration(245_000), "4m05s");
  assert.equal(formatDuration(7_380_000), "2h03m");
});

test("resolveTaskId: exact, unique prefix, ambiguous, unknown with closest", () => {
  const ids = ["tmg3k2a1b2c3", "tmg3zzzzzzzz", "tk81aaaaaaaa"];
  assert.equal(resolveTaskId("tk8", ids), "tk81aaaaaaaa");
  assert.equal(resolveTaskId("TMG3K2A1B2C3", ids), "tmg3k2a1b2c3");
  assert.throws(
    () => resolveTaskId("tmg3", ids),
    (e: DshError) => e.code === "BAD_TASK_ID" && /2 tasks/.test(e.message),
  );
  assert.throws(
    () => resolveTaskId("tk82", ids),
    (e: DshError) => e.code === "TASK_NOT_FOUND" && /Closest: tk81aaaaaaaa/.test(e.message),
  );
  assert.throws(
    () => resolveTaskId("tx", []),
    (e: DshError) => e.code === "TASK_NOT_FOUND" && /no tasks yet/.test(e.message),
  );
  assert.deepEqual(closestIds("tmg3k2a1b2c4", ids, 1), ["tmg3k2a1b2c3"]);
});

test("exit codes: failed/gone/interrupted fail, TIMEOUT is 3", () => {
  assert.equal(exitCodeForStatus("completed"), 0);
  assert.equal(exitCodeForStatus("blocked"), 0);
  assert.equal(exitCodeForStatus("failed"), 1);
  assert.equal(exitCodeForStatus("interrupted"), 1);
  assert.equal(exitCodeForError(new DshError("TIMEOUT", "x")), 3);
  assert.equal(exitCodeForError(new Error("x")), 1);
});

test("renderCard follows the original plugin's card layout", () => {
  const lines = renderCard(result(), home).split("\n");
  assert.equal(lines[0], "[herdr] reviewer pi (xai/grok-4.7 · high) → completed");
  assert.equal(lines[1], "agent: review-grok4-7-a1b2 · task tmg3k2a1b2c3 · pane wV:p12 · tab wV:t6");
  assert.equal(lines[2], "summary: 2 majors, 1 minor");
  assert.equal(lines[3], "diff: 4 file(s) · 4 files changed, 120 insertions(+), 18 deletions(-)");
  assert.equal(lines[4], "patch: ~/.dsh/herdr/tasks/tmg3k2a1b2c3/diff.patch");
  assert.equal(lines[5], "session: ~/.pi/agent/sessions/x.jsonl");
  assert.ok(lines.includes("--- final message ---"));
  assert.equal(lines.at(-2), "[MAJOR] src/auth.ts:42 — token compared with ==");
});

test("renderCard shows the error, warnings, next action and headless pid", () => {
  const card = renderCard(
    result({
      status: "failed",
      nextAction: "inspect",
      error: { code: "AGENT_STALLED", message: "no turn started" },
      warnings: ["empty harvest"],
      agent: { name: "worker-x", kind: "pi", model: "m", thinking: "off", runtime: "headless", runtimeId: "4242" },
      diff: undefined,
      finalMessage: undefined,
    }),
    home,
  );
  // No turn started: no thinking level is shown (none was used).
  assert.match(card, /^\[headless\] reviewer pi \(m\) → failed$/m);
  assert.match(card, /· pid 4242$/m);
  assert.match(card, /^error: AGENT_STALLED: no turn started$/m);
  assert.match(card, /^next: inspect$/m);
  assert.match(card, /^warning: empty harvest$/m);
  assert.doesNotMatch(card, /final message/);
});

test("renderCard: a report result.md cut at 256 KiB is shown once, whole, from the final message (the crew_report)", () => {
  const whole = `# Findings\n\n${"- a finding\n".repeat(30_000)}THE-END`;
  const cut = whole.slice(0, 256 * 1024);
  const card = renderCard(
    result({
      finalMessage: whole,
      result: { path: "/r/result.md", text: cut, meta: { status: "completed", summary: "Findings" } },
      warnings: ["result.md is over 262144 bytes; the body was truncated"],
    }),
    home,
  );
  assert.equal(card.split("# Findings").length, 2, "once");
  assert.match(card, /THE-END\n$/);
  assert.doesNotMatch(card, /final message/);
  // A report whose result.md is whole is shown as before, with a different final message after it.
  const plain = renderCard(
    result({
      finalMessage: "a closing line",
      result: { path: "/r/result.md", text: "the report", meta: { status: "completed" } },
    }),
    home,
  );
  assert.match(plain, /--- report ---\nthe report\n--- final message ---\na closing line\n$/);
});

test("renderTable aligns columns and cuts lines to the terminal width", () => {
  const now = 1_760_000_000_000 + 5 * 60_000;
  const lines = renderTable(
    [
      result(),
      result({
        taskId: "tk81aaaaaaaa",
        status: "running",
        worktree: { path: "/home/u/.dsh/herdr/worktrees/api-tk81", branch: "dsh/tk81", repo: "/r", base: "HEAD" },
      }),
    ],
    now,
    200,
    home,
  );
  assert.match(lines[0] ?? "", /^ID\s+AGENT\s+ROLE\s+STATUS\s+AGE\s+RUNTIME\s+BRIEF\s+CWD$/);
  assert.match(lines[1] ?? "", /^tmg3k2a1b2c3\s+review-grok4-7-a1b2\s+reviewer\s+completed\s+5m\s+herdr\s+-\s+-$/);
  assert.match(lines[2] ?? "", /running .*~\/\.dsh\/herdr\/worktrees\/api-tk81$/);
  assert.equal((lines[1] ?? "").indexOf("reviewer"), (lines[0] ?? "").indexOf("ROLE"));
  assert.ok(renderTable([result()], now, 30, home).every((l) => l.length <= 30));
});

test("LiveBlock rewrites the previous block in place instead of appending", () => {
  const live = new LiveBlock();
  const first = live.frame(["a", "b"]);
  assert.equal(first, "\r\x1b[2Ka\n\x1b[2Kb\n\x1b[J");
  const second = live.frame(["a2"]);
  assert.ok(second.startsWith("\r\x1b[2A"), "moves up over the two lines drawn before");
  assert.ok(second.endsWith("\x1b[J"), "clears what the shorter block leaves behind");
  assert.equal(live.height, 1);
});

test("renderCard prints the crew_report report, and the final message only when it adds something", () => {
  const withReport = result({
    result: { path: "/r/result.md", text: "Wrote docs/usage.md.", meta: {} },
    finalMessage: "Reported.",
  });
  const card = renderCard(withReport, home);
  assert.match(card, /^--- report ---\nWrote docs\/usage\.md\.\n--- final message ---\nReported\.\n$/m);
  const same = renderCard(
    result({ result: { path: "/r/result.md", text: "Same text.", meta: {} }, finalMessage: "Same text." }),
    home,
  );
  assert.equal(same.match(/^--- /gm)?.length, 1, "one section when report and final message agree");
  assert.match(same, /^--- final message ---\nSame text\.$/m);
  // A crew_report cycle: result.md (with its frontmatter) holds the report and the final message is that report.
  const reported = renderCard(
    result({ result: { path: "/r/result.md", text: "Done.", meta: { status: "completed" } }, finalMessage: "Done." }),
    home,
  );
  assert.equal(reported.match(/^--- /gm)?.length, 1, "one section for a reported cycle");
  assert.match(reported, /^--- report ---\nDone\.$/m);
});

test("renderTable measures wide briefs in terminal columns and colours statuses only when asked", () => {
  const now = 1_760_000_000_000 + 5 * 60_000;
  const rows = [
    result({ brief: "重试与抖动" }),
    result({ taskId: "tk81aaaaaaaa", brief: "emoji 🚀 ok", status: "failed" }),
    result({ taskId: "tk82aaaaaaaa", brief: "plain" }),
  ];
  const lines = renderTable(rows, now, 200, home);
  // The CWD column starts at the same terminal column on every line, whatever the brief's characters.
  const cwdCol = (l: string) => stringWidth(l.slice(0, l.lastIndexOf(" -") + 1));
  assert.equal(new Set(lines.slice(1).map(cwdCol)).size, 1, lines.join("\n"));
  assert.doesNotMatch(lines.join("\n"), /\x1b\[/);
  const colored = renderTable(rows, now, 200, home, true);
  assert.match(colored[2] ?? "", /\x1b\[31mfailed\x1b\[39m/);
  assert.equal(stringWidth(colored[2] ?? ""), stringWidth(lines[2] ?? ""), "colour codes take no columns");
  assert.ok(renderTable(rows, now, 50, home, true).every((l) => stringWidth(l) <= 50));
});

test("resolveTaskId: a unique suffix, the agent name, and an ambiguous input listing candidates with briefs", () => {
  const known = [
    { taskId: "tmx4irfk41hs", name: "worker-flash-41hs", brief: "retry with jitter" },
    { taskId: "tmx4irfkvzzn", name: "review-grok-vzzn", brief: "重试" },
    { taskId: "tmx4irfkaazn" },
  ];
  assert.equal(resolveTaskId("41hs", known), "tmx4irfk41hs");
  assert.equal(resolveTaskId("VZZN", known), "tmx4irfkvzzn");
  assert.equal(resolveTaskId("review-grok-vzzn", known), "tmx4irfkvzzn");
  // A name whose task has no recorded name still resolves by its trailing suffix.
  assert.equal(resolveTaskId("worker-model-aazn", known), "tmx4irfkaazn");
  assert.throws(
    () => resolveTaskId("zn", known),
    (e: DshError) =>
      e.code === "BAD_TASK_ID" &&
      /matches 2 tasks/.test(e.message) &&
      /tmx4irfkvzzn {2}review-grok-vzzn {2}重试/.test(e.message) &&
      /tmx4irfkaazn/.test(e.message) &&
      !/41hs/.test(e.message),
  );
  assert.throws(
    () => resolveTaskId("qqqq", known),
    (e: DshError) => e.code === "TASK_NOT_FOUND",
  );
});

test("inCliWords: a daemon's BAD_PARAMS data {field, problem} names the CLI flag and is a usage error; its words are not parsed", () => {
  const data = { method: "task.spawn", path: "params.timeoutMs", field: "timeoutMs", problem: "must be >= 1000" };
  const msg = "task.spawn: params.timeoutMs must be >= 1000; fix the request (see docs/socket-protocol.md#taskspawn)";
  const e = inCliWords(new DshError("BAD_PARAMS", msg, data));
  assert.equal(e.message, "--timeout must be at least 1000 ms; see `dsh-herdr <command> --help`");
  assert.equal(e.details?.["usage"], true);
  // The same words without data (an older daemon): passed on as the daemon said them.
  const wordsOnly = new DshError("BAD_PARAMS", msg);
  assert.equal(inCliWords(wordsOnly), wordsOnly);
  const other = new DshError("BAD_PARAMS", "something else");
  assert.equal(inCliWords(other), other);
});

test("a child's control characters are escaped in the card, the table and CLI errors: C0, DEL and C1; newlines and tabs kept in reports only", async () => {
  const { safeLine, safeText } = await import("../../src/cli/format/safe.js");
  const evil = "a\x1b]0;T\x07b\x1b[2J\u009b31m\x7f\r";
  assert.equal(safeText(`${evil}\n\tz`), "a\\x1b]0;T\\x07b\\x1b[2J\\x9b31m\\x7f\\r\n\tz");
  assert.equal(safeLine(`${evil}\n\tz`), "a\\x1b]0;T\\x07b\\x1b[2J\\x9b31m\\x7f\\r\\n\\tz");
  assert.equal(safeText("plain ünïcödé ✓ 日本"), "plain ünïcödé ✓ 日本");
  const r = result({
    summary: `sum ${evil}`,
    brief: `brief\n${evil}`,
    agent: { ...result().agent, name: `name${evil}` },
    error: { code: "AGENT_ERROR", message: `line1\n${evil}` },
    warnings: [`warn ${evil}`],
    result: { text: `report ${evil}\nmore`, meta: { status: "completed" } },
  } as Partial<AgentResult>);
  const raw = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;
  const card = renderCard(r, undefined, { color: true });
  // Only the CLI's own SGR colour codes remain (ESC [ digits m).
  assert.doesNotMatch(card.replace(/\x1b\[\d+m/g, ""), raw, card);
  assert.match(card, /^summary: sum a\\x1b\]0;T\\x07b/m);
  assert.match(card, /^brief: brief\\na\\x1b/m, "a one-line field keeps one line");
  assert.match(card, /^report a\\x1b\]0;T\\x07b\\x1b\[2J\\x9b31m\\x7f\\r\nmore$/m, "the report keeps its lines");
  const table = renderTable([r], Date.now(), 400).join("\n");
  assert.doesNotMatch(table, raw, table);
  const { run } = await import("../../src/cli/main.js");
  let err = "";
  // The error quotes what it was given (here the id; from the daemon, a child's stderr or a remote's words).
  const code = await run(["node", "dsh-herdr", "show", `x${evil}`], {
    io: {
      out: () => undefined,
      err: (t) => void (err += t),
      isTTY: false,
      columns: 80,
      env: { DSH_HERDR_HOME: "/nonexistent/h" },
    },
  });
  assert.equal(code, 1);
  assert.match(err, /no task matches "xa\\x1b\]0;T\\x07b/);
  assert.doesNotMatch(err.replace(/\n$/, ""), raw, err);
});
