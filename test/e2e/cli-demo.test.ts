// `dsh-herdr demo` as CI runs it: real pi, scripted model, headless and tmux; three cards, both workers with a diff.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execa } from "execa";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bin } from "./cli-harness.js";

for (const runtime of ["headless", "tmux"]) {
  test(`demo --runtime ${runtime}: three completed cards, worker diffs, cleaned up`, async () => {
    const home = mkdtempSync(join(tmpdir(), "dsh-demo-user-"));
    try {
      const r = await execa(process.execPath, [bin, "demo", "--runtime", runtime], {
        env: { HOME: home, HERDR_SOCKET_PATH: join(home, "no-herdr.sock") },
        extendEnv: true,
        reject: false,
        timeout: 150_000,
        stdin: "ignore",
      });
      const out = String(r.stdout);
      assert.equal(r.exitCode, 0, `${out}\n${String(r.stderr)}`);
      assert.equal(
        out.match(
          new RegExp(`^\\[${runtime}\\] (worker|reviewer) pi \\(scripted/scripted-model · \\w+\\) → completed$`, "gm"),
        )?.length,
        3,
        out,
      );
      assert.equal(
        out.match(/^--- diff t[0-9a-z]{11} ---$/gm)?.length,
        2,
        "a diff for each worker, none for the reviewer",
      );
      assert.match(out, /^\+\+\+ b\/src\/greeting\.js$/m);
      assert.match(out, /^\+\+\+ b\/docs\/usage\.md$/m);
      assert.match(out, /\[MINOR\] README\.md:3/);
      assert.match(out, /^demo: ok/m);
      const repo = /^demo: repo (\S+),/m.exec(out)?.[1];
      assert.ok(repo && !existsSync(repo), "the temp repo and home are removed");
      assert.ok(!existsSync(join(home, ".dsh")), "the user's ~/.dsh is never touched");
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
}
