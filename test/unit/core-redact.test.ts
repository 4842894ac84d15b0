// Secrets out of messages and log lines (src/core/redact.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import { redactSecrets } from "../../src/core/redact.js";

test("a known secret value is removed wherever it appears; short ones are left alone", () => {
  const token = "f3a9c0d2e1b4a5968776";
  assert.equal(
    redactSecrets(`last output: raw: ${token}; again ${token}`, [token]),
    "last output: raw: [redacted]; again [redacted]",
  );
  assert.equal(redactSecrets("a b c", ["b"]), "a b c");
});

test("NAME=value with a secret-looking name loses its value, in a command line and in a JSON log line", () => {
  const cmd =
    "Command failed with ENOENT: tmux -u -L dsh new-window -e DSH_HERDR_TASK_TOKEN=abc123def456 -e OPENAI_API_KEY=sk-xyz -e DSH_HERDR_TASK_ID=t1 -- pi";
  const out = redactSecrets(cmd);
  assert.ok(!out.includes("abc123def456") && !out.includes("sk-xyz"), out);
  assert.match(out, /DSH_HERDR_TASK_TOKEN=\[redacted\] .*OPENAI_API_KEY=\[redacted\] -e DSH_HERDR_TASK_ID=t1 -- pi/);
  const line = JSON.stringify({ err: "tmux failed: GITHUB_TOKEN=ghp_123456 x" });
  assert.equal(JSON.parse(redactSecrets(line)).err, "tmux failed: GITHUB_TOKEN=[redacted] x");
  assert.equal(redactSecrets("MONKEY=banana PATH=/usr/bin"), "MONKEY=banana PATH=/usr/bin");
  assert.equal(redactSecrets(redactSecrets("X_TOKEN=abc")), "X_TOKEN=[redacted]");
});
