// A child's terminal escapes never reach the user's terminal (issue 28.4): a report and a brief holding OSC 0 (set the
// window title), CSI 2J (clear the screen), OSC 52 (write the clipboard) are printed escaped by `wait`,
// `show`, `list` and `watch` (piped), through the real CLI and a real pi child; `result --json` keeps them exact. (C1
// controls do not survive pi's own handling of a tool argument; they are covered in test/unit/cli-format.)
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { runWithClosedStdout } from "../helpers/epipe.js";
import { startCliHarness, type CliHarness } from "./cli-harness.js";

const TITLE = "\x1b]0;PWNED-TITLE\x07";
const CLEAR = "\x1b[2J";
const CLIP = "\x1b]52;c;ZWNobyBwd25lZA==\x07";
const REPORT = `evil ${TITLE}${CLEAR} summary\nsecond line ${CLIP}\ttabbed\nend`;
const BRIEF = `brief ${TITLE}${CLEAR}`;

const script = {
  conversations: [
    {
      name: "escapes",
      match: "[t-escapes]",
      steps: [{ toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: REPORT } }] }],
    },
  ],
};

let h: CliHarness;
before(async () => {
  h = await startCliHarness(script);
});
after(async () => {
  await h?.close();
});

/** No ESC, BEL or C1 byte at all: what a terminal would act on. */
function assertNeutral(what: string, text: string): void {
  const bad = [...text].filter((c) => /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/.test(c));
  assert.deepEqual(
    bad.map((c) => c.charCodeAt(0).toString(16)),
    [],
    `${what} printed raw control characters: ${JSON.stringify(text)}`,
  );
}

test("a report and a brief with OSC 0, CSI 2J, OSC 52: wait, show, list and watch print them escaped; result --json is exact", async () => {
  const s = await h.cli(["spawn", "--brief", BRIEF, "--prompt", "[t-escapes] report escapes"]);
  assert.equal(s.code, 0, s.err);
  const id = s.out.trim();

  const w = await h.cli(["wait", id]);
  assert.equal(w.code, 0, w.err);
  assertNeutral("wait", w.out);
  // Shown, not dropped: the escapes are visible as text, the report's own newlines and tab kept.
  assert.ok(w.out.includes("\\x1b]0;PWNED-TITLE\\x07\\x1b[2J"), w.out);
  assert.ok(w.out.includes("second line \\x1b]52;c;ZWNobyBwd25lZA==\\x07\ttabbed\nend"), w.out);
  assert.match(w.out, /^brief: brief \\x1b\]0;PWNED-TITLE\\x07\\x1b\[2J$/m);

  const show = await h.cli(["show", id]);
  assert.equal(show.code, 0, show.err);
  assertNeutral("show", show.out);
  assert.ok(show.out.includes("\\x1b]52;c;"), show.out);

  const list = await h.cli(["list", "--all"]);
  assert.equal(list.code, 0, list.err);
  assertNeutral("list", list.out);
  assert.ok(list.out.includes("brief \\x1b]0;PWNED"), list.out);

  const watch = await h.cli(["watch", "--all", "--until-settled"], { timeoutMs: 30_000 });
  assert.equal(watch.code, 0, watch.err);
  assertNeutral("watch", watch.out);
  assert.ok(watch.out.includes(id), watch.out);
  assert.ok(watch.out.includes("evil \\x1b]0;PWNED-TITLE"), `the summary escaped: ${watch.out}`);

  // Machine output stays exact: the escapes are JSON-escaped and parse back to the very bytes the child wrote.
  const json = await h.cli(["result", id, "--json"]);
  assert.equal(json.code, 0, json.err);
  assertNeutral("result --json", json.out);
  const r = JSON.parse(json.out) as { brief?: string; result?: { text: string } };
  assert.equal(r.brief, BRIEF);
  assert.ok(r.result?.text.includes(REPORT), JSON.stringify(r.result));
  const wj = JSON.parse((await h.cli(["wait", id, "--json"])).out) as { results: { result?: { text: string } }[] };
  assert.ok(wj.results[0]?.result?.text.includes(REPORT));
});

test("show, list and schema into a closed pipe (`show ID | head`): a quiet exit 0, no EPIPE stack", async () => {
  const s = await h.cli(["spawn", "--prompt", "[t-escapes] again"]);
  assert.equal(s.code, 0, s.err);
  const id = s.out.trim();
  assert.equal((await h.cli(["wait", id])).code, 0);
  for (const args of [["show", id], ["list", "--all"], ["schema"]]) {
    const r = await runWithClosedStdout(args, h.env, h.repo);
    assert.equal(r.err, "", `${args.join(" ")}: nothing on stderr (it printed an unhandled 'error' event and a stack)`);
    assert.equal(r.code, 0, args.join(" "));
  }
});
