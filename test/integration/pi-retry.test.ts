// The agent-dir retry settings really govern how often pi calls a failing model (pi's own retry and the
// OpenAI SDK's hidden retries both count as requests the scripted model sees).
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { startPiHarness } from "../helpers/pi.js";

const failing = { conversations: [{ steps: [{ httpError: { status: 500, message: "scripted upstream failure" } }] }] };

for (const retry of [false, true]) {
  test(`HTTP 500 with retry ${retry ? "on (maxRetries 1)" : "off"}: pi makes exactly ${retry ? 2 : 1} request(s) and fails`, async () => {
    const h = await startPiHarness({ script: failing, retry });
    try {
      const sessionPath = join(h.dir, "s.jsonl");
      const r = await h.runPi(["-p", "--model", h.modelName, "--session", sessionPath, "do anything"]);
      assert.equal(r.exitCode, 1);
      assert.match(String(r.stderr), /500 scripted upstream failure/);
      assert.equal(h.model.requests().length, retry ? 2 : 1);
    } finally {
      await h.cleanup();
    }
  });
}
