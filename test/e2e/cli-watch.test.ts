// watch on a real terminal (a private tmux server) redraws rows in place; piped, it prints one line per change.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execa } from "execa";
import { privateTmux, tmuxInstalled, waitFor, type PrivateTmux } from "../helpers/tmux.js";
import { bin, startCliHarness, type CliHarness } from "./cli-harness.js";

const script = {
  conversations: [
    {
      name: "watch",
      match: "[t-watch]",
      steps: [
        {
          toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "watched (WATCH-DONE)" } }],
          delayMs: 4000,
        },
      ],
    },
  ],
};

let h: CliHarness;
let tmux: PrivateTmux;

before(async () => {
  assert.ok(await tmuxInstalled(), "tmux is required (the CI installs it)");
  h = await startCliHarness(script);
  const s = await h.cli(["daemon", "start"]);
  assert.equal(s.code, 0, s.err);
  tmux = privateTmux("dsh-watch");
});

after(async () => {
  await tmux?.kill();
  await h?.close();
});

test("watch under tmux: a row changes from running to completed in place, no line appended", async () => {
  const envArgs = Object.entries(h.env).flatMap(([k, v]) => ["-e", `${k}=${v}`]);
  await tmux.run([
    "new-session",
    "-d",
    "-s",
    "watch",
    "-x",
    "150",
    "-y",
    "20",
    ...envArgs,
    process.execPath,
    bin,
    "watch",
  ]);
  await waitFor("the empty table", async () => (await screen()).includes("watching 0 task(s)"));

  const s = await h.cli(["spawn", "--prompt", "[t-watch] report after a while"]);
  assert.equal(s.code, 0, s.err);
  const id = s.out.trim();
  const rowOf = (lines: string[]) => lines.findIndex((l) => l.startsWith(id));

  const before = await waitFor(
    "the row while the child works",
    async () => {
      const lines = (await screen()).split("\n");
      const i = rowOf(lines);
      return i >= 0 && /\s(starting|working|running)\s/.test(lines[i] ?? "") ? lines : undefined;
    },
    60_000,
  );
  const after = await waitFor(
    "the row completed",
    async () => {
      const lines = (await screen()).split("\n");
      const i = rowOf(lines);
      return i >= 0 && /\scompleted\s/.test(lines[i] ?? "") ? lines : undefined;
    },
    90_000,
  );

  assert.equal(rowOf(after), rowOf(before), "the row stays where it was");
  assert.equal(after.filter((l) => l.includes(id)).length, 1, "one row for the task: nothing appended");
  assert.equal(
    after.filter((l) => /^ID\s+AGENT/.test(l)).length,
    1,
    "one header: the table was redrawn, not reprinted",
  );
  assert.equal(after.filter((l) => l.trim() !== "").length, before.filter((l) => l.trim() !== "").length);

  await tmux.run(["send-keys", "-t", "watch", "C-c"]);
  await waitFor(
    "watch to exit on Ctrl+C",
    async () =>
      !(await tmux.run(["list-panes", "-t", "watch", "-F", "#{pane_current_command}"]).catch(() => "")).includes(
        "node",
      ),
    10_000,
  );
});

test("watch piped (not a TTY): one line per status change, --until-settled exits", async () => {
  const s = await h.cli(["spawn", "--json", "--prompt", "[t-watch] again"]);
  const id = (JSON.parse(s.out) as { taskId: string }).taskId;
  const r = await execa(process.execPath, [bin, "watch", id, "--until-settled"], {
    env: h.env,
    reject: false,
    timeout: 90_000,
    stdin: "ignore",
  });
  assert.equal(r.exitCode, 0, String(r.stderr));
  const lines = String(r.stdout).trim().split("\n");
  assert.ok(
    lines.every((l) => l.includes(id)),
    String(r.stdout),
  );
  assert.match(lines.at(-1) ?? "", /→ completed {2}watched \(WATCH-DONE\)$/);
  assert.doesNotMatch(String(r.stdout), /\x1b\[/, "no ANSI escapes when not a terminal");
});

async function screen(): Promise<string> {
  return tmux.run(["capture-pane", "-p", "-t", "watch"]);
}
