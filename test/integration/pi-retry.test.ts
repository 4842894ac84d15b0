// The agent-dir retry settings really govern how often pi calls a failing model (pi's own retry and the
// OpenAI SDK's hidden retries both count as requests the scripted model sees).
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { startPiHarness, testPiLine } from "../helpers/pi.js";

const failing = { conversations: [{ steps: [{ httpError: { status: 500, message: "scripted upstream failure" } }] }] };

for (const retry of [false, true]) {
  test(`HTTP 500 with retry ${retry ? "on (maxRetries 1)" : "off"}: pi makes exactly ${retry ? 2 : 1} request(s) and fails`, async () => {
    const h = await startPiHarness({ script: failing, retry });
    try {
      const sessionPath = join(h.dir, "s.jsonl");
      const r = await h.runPi(["-p", "--model", h.modelName, "--session", sessionPath, "do anything"]);
      assert.equal(r.exitCode, 1);
      // 0.73: "500 scripted upstream failure"; 1.x: "500: {"message":"scripted upstream failure",...}"
      assert.match(String(r.stderr), /500:? .*scripted upstream failure/);
      assert.equal(h.model.requests().length, retry ? 2 : 1);
    } finally {
      await h.cleanup();
    }
  });
}

// OpenAI's quota error: HTTP 429 with code insufficient_quota. pi 1.x never retries it (quota does not come back in
// seconds); pi 0.73.1's rule matches "429" and retries it. Each line as it is: the daemon reads each line's signals.
const QUOTA = {
  status: 429,
  message: "You exceeded your current quota, please check your plan and billing details.",
  type: "insufficient_quota",
  code: "insufficient_quota",
};
test("HTTP 429 insufficient_quota with retry on: pi 1.x makes 1 request, pi 0.73.1 retries it (2)", async () => {
  const h = await startPiHarness({ script: { conversations: [{ steps: [{ httpError: QUOTA }] }] }, retry: true });
  try {
    const r = await h.runPi(["-p", "--model", h.modelName, "--session", join(h.dir, "s.jsonl"), "do anything"]);
    assert.equal(r.exitCode, 1);
    assert.match(String(r.stderr), /exceeded your current quota/);
    assert.equal(h.model.requests().length, testPiLine() === "1.x" ? 1 : 2);
  } finally {
    await h.cleanup();
  }
});
