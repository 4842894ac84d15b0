// A crew tool called with no daemon names the fix once: the client's error already says how to start the daemon,
// and the owner's words must not say it a second time.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "../../src/client/index.js";
import { DshError } from "../../src/core/errors.js";
import { daemonError } from "../../src/extensions/owner-tools.js";

test("no daemon: the crew tool's error says `dsh-herdr daemon start` exactly once", async () => {
  const home = mkdtempSync(join(tmpdir(), "dsh-nodaemon-"));
  try {
    const e = await connect(home, { kind: "cli", timeoutMs: 2000 }).then(
      () => assert.fail("connected to no daemon"),
      (err: unknown) => err,
    );
    assert.equal((e as DshError).code, "DAEMON_UNAVAILABLE");
    const said = daemonError(e).message;
    assert.match(said, /daemon is not reachable/);
    assert.equal(said.split("dsh-herdr daemon start").length - 1, 1, said);
    // An unavailable daemon whose message names no fix still gets it.
    const bare = daemonError(new DshError("DAEMON_UNAVAILABLE", "the owner extension is shut down")).message;
    assert.equal(bare.split("dsh-herdr daemon start").length - 1, 1, bare);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});
