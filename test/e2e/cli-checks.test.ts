// Check results where people look, through the real bin/dsh-herdr against a real daemon and real pi: `spawn --wait`
// and `show` list each check with ✓/✗ and its duration; a failed check is the card's first line and `spawn --wait`
// exits 4; `list` (watch's table) marks the status.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { startCliHarness, type CliHarness } from "./cli-harness.js";

const SCRIPT: Script = {
  conversations: [
    {
      name: "work",
      match: "CHECKED",
      afterEnd: "repeat",
      steps: [{ toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "ok" } }] }],
    },
  ],
};

let h: CliHarness;
before(async () => {
  h = await startCliHarness(SCRIPT);
});
after(async () => {
  await h?.close();
});

const idOf = (card: string) => /task (t[0-9a-z]{11})/.exec(card)?.[1];

test("spawn --wait and show: a passing check reads ✓ with its duration; exit 0", async () => {
  const r = await h.cli(["spawn", "--isolated", "--check", "true", "--wait", "--prompt", "CHECKED pass"], {
    timeoutMs: 120_000,
  });
  assert.equal(r.code, 0, `${r.out}\n${r.err}`);
  assert.match(r.out, /^checks:\n {2}✓ true · \d+(ms|\.\ds)$/m);
  const id = idOf(r.out)!;
  const shown = await h.cli(["show", id]);
  assert.match(shown.out, /^ {2}✓ true · /m);
});

test("a failing check: the card says so first, lists it ✗ with how it ended, spawn --wait exits 4; list marks it", async () => {
  const r = await h.cli(
    ["spawn", "--isolated", "--check", "true", "--check", "exit 3", "--wait", "--prompt", "CHECKED fail"],
    { timeoutMs: 120_000 },
  );
  assert.equal(r.code, 4, `${r.out}\n${r.err}`);
  const lines = r.out.split("\n");
  assert.equal(lines[0], "✗ check failed: exit 3 (exit 3)");
  assert.match(r.out, /^ {2}✓ true · /m);
  assert.match(r.out, /^ {2}✗ exit 3 · \S+ · exit 3$/m);
  const id = idOf(r.out)!;
  const shown = await h.cli(["show", id]);
  assert.equal(shown.out.split("\n")[0], "✗ check failed: exit 3 (exit 3)");
  const list = await h.cli(["list"]);
  assert.match(list.out, new RegExp(`${id}.*completed ✗check`));
});
