// The trust book (<home>/repo-trust.json): a repository's .dsh-herdr.json applies only while the book holds the
// sha256 of its current content; config.json repos.<root> applies always; a symlinked path names the same root.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DshError } from "../../src/core/errors.js";
import { consentedRepoSettings, readRepoFileHashed, untrustedLine } from "../../src/store/repo-settings.js";
import { readTrustBook, setTrust, trustStateOf } from "../../src/store/repo-trust.js";

test("a .dsh-herdr.json applies once its content is trusted, and not after it changes; the user's own settings always", async () => {
  const base = mkdtempSync(join(tmpdir(), "dsh-trust-"));
  try {
    const home = join(base, "home");
    mkdirSync(home, { mode: 0o700 });
    const root = join(base, "repo");
    mkdirSync(root);
    writeFileSync(join(root, ".dsh-herdr.json"), JSON.stringify({ worktree: { setup: "make" }, checks: ["evil"] }));
    const cfg = { repos: { [root]: { checks: ["npm test"] } } };

    const before = consentedRepoSettings(root, cfg, home);
    assert.deepEqual(before.settings, { checks: ["npm test"] }, "only the user's own");
    assert.equal(before.untrusted?.state, "untrusted");
    assert.match(untrustedLine(root, before.untrusted!), /is not trusted: its setup, checks did not apply/);

    const f = readRepoFileHashed(root)!;
    // Trusted through a symlink to the root: the same repository.
    const link = join(base, "link");
    symlinkSync(root, link);
    assert.equal(await setTrust(home, link, f.sha256), false);
    assert.equal((statSync(join(home, "repo-trust.json")).mode & 0o777).toString(8), "600");
    assert.equal(trustStateOf(readTrustBook(home), root, f.sha256), "trusted");
    const after = consentedRepoSettings(root, cfg, home);
    assert.deepEqual(after.settings, { worktree: { setup: "make" }, checks: ["evil", "npm test"] });
    assert.equal(after.untrusted, undefined);

    writeFileSync(join(root, ".dsh-herdr.json"), JSON.stringify({ worktree: { setup: "make" }, checks: ["evil2"] }));
    const changed = consentedRepoSettings(root, cfg, home);
    assert.deepEqual(changed.settings, { checks: ["npm test"] });
    assert.equal(changed.untrusted?.state, "changed");
    assert.match(untrustedLine(root, changed.untrusted!), /changed since you trusted it/);

    assert.equal(await setTrust(home, root, undefined), true, "untrust");
    assert.deepEqual(readTrustBook(home), {});
    // A broken book is named, never taken as trust.
    writeFileSync(join(home, "repo-trust.json"), "{broken");
    assert.throws(
      () => consentedRepoSettings(root, cfg, home),
      (e: DshError) => e.code === "CONFIG_INVALID" && /repo-trust\.json/.test(e.message),
    );
    assert.ok(readFileSync(join(root, ".dsh-herdr.json"), "utf8").includes("evil2"));
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});
