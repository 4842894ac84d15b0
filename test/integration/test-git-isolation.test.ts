// `npm test` (scripts/run-tests.mjs) never reads the user's git config: a ~/.gitconfig that signs every commit with
// a program that fails, or sets another default branch, changes nothing the tests see. Runs the real script on a
// probe test in a copy of its layout, with a HOME whose .gitconfig says so.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const root = join(import.meta.dirname, "..", "..", "..");

test("run-tests gives git a config of its own: the user's ~/.gitconfig (signing, default branch) is never read", () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-git-isolation-"));
  try {
    // The script and its helper in a copy of the layout (scripts/, dist/test/<folder>), with one probe test.
    mkdirSync(join(dir, "scripts"));
    for (const f of ["run-tests.mjs", "leftovers.mjs"]) cpSync(join(root, "scripts", f), join(dir, "scripts", f));
    mkdirSync(join(dir, "dist", "test", "probe"), { recursive: true });
    writeFileSync(join(dir, "package.json"), '{"type":"module"}\n');
    const out = join(dir, "probe.json");
    writeFileSync(
      join(dir, "dist", "test", "probe", "git.test.js"),
      `import { test } from "node:test";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";
test("probe", () => {
  const repo = mkdtempSync(join(${JSON.stringify(dir)}, "repo-"));
  const git = (...a) => execFileSync("git", a, { cwd: repo, encoding: "utf8" });
  git("init", "-q");
  writeFileSync(join(repo, "f"), "x");
  git("add", "f");
  git("commit", "-q", "-m", "probe");
  writeFileSync(${JSON.stringify(out)}, JSON.stringify({
    branch: git("symbolic-ref", "--short", "HEAD").trim(),
    author: git("log", "-1", "--format=%an <%ae>").trim(),
    origins: git("config", "--list", "--show-origin"),
  }));
});
`,
    );
    const home = join(dir, "home");
    mkdirSync(home);
    writeFileSync(
      join(home, ".gitconfig"),
      "[user]\n\tname = FROM-USER-CONFIG\n\temail = user@example.invalid\n[commit]\n\tgpgsign = true\n[gpg]\n\tprogram = false\n[init]\n\tdefaultBranch = trunk\n",
    );
    // The user's own config, as git reads it without the script: signing that fails.
    const env: NodeJS.ProcessEnv = { ...process.env, HOME: home };
    delete env["GIT_CONFIG_GLOBAL"];
    delete env["GIT_CONFIG_NOSYSTEM"];
    delete env["NODE_TEST_CONTEXT"]; // else the nested node --test skips its files
    assert.match(execFileSync("git", ["config", "--global", "commit.gpgsign"], { env, encoding: "utf8" }), /true/);
    const r = spawnSync(process.execPath, [join(dir, "scripts", "run-tests.mjs"), "probe"], { env, encoding: "utf8" });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.ok(existsSync(out), `the probe ran: ${r.stdout}\n${r.stderr}`);
    const probe = JSON.parse(readFileSync(out, "utf8")) as { branch: string; author: string; origins: string };
    assert.equal(probe.branch, "main");
    assert.equal(probe.author, "dsh-herdr test <test@dsh-herdr.invalid>");
    assert.doesNotMatch(probe.origins, /FROM-USER-CONFIG|gpgsign=true|\.gitconfig/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
