// The tmux runtime suites again, in a child process whose environment has no locale at all (no LANG, LANGUAGE or
// LC_*), as under a systemd unit, cron or a bare container. Without a UTF-8 locale tmux prints "_" for the tabs of
// -F formats unless the client is told it is UTF-8 (tmux -u); the runtime must find its panes either way.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";

const SUITES = ["runtime-tmux.test.js", "runtime-tmux-pi.test.js"].map((f) => join(import.meta.dirname, f));

/** The parent's environment without any locale variable (nor node's marker that would make --test a no-op). */
function noLocaleEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k === "LANG" || k === "LANGUAGE" || k.startsWith("LC_") || k === "NODE_TEST_CONTEXT") continue;
    env[k] = v;
  }
  return env;
}

test("tmux: the runtime suites pass with no locale in the environment", { timeout: 240_000 }, async () => {
  for (const f of SUITES) assert.ok(existsSync(f), `${f} is built`);
  const env = noLocaleEnv();
  assert.ok(!Object.keys(env).some((k) => k === "LANG" || k.startsWith("LC_")), "no locale is left");
  const r = await new Promise<{ code: number | null; out: string }>((resolve) => {
    execFile(
      process.execPath,
      ["--test", "--test-concurrency=1", "--test-reporter=tap", ...SUITES],
      { env, maxBuffer: 64 * 1024 * 1024, timeout: 230_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : null) : 0;
        resolve({ code, out: `${stdout}\n${stderr}` });
      },
    );
  });
  assert.equal(r.code, 0, `the tmux suites failed with no locale:\n${r.out.slice(-6000)}`);
  assert.match(r.out, /# fail 0/);
  assert.doesNotMatch(r.out, /# pass 0\b/, "some tests ran");
});
