// config.json: defaults, ajv validation against schema/config.schema.json, atomic set that refuses bad values.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DshError } from "../../src/core/errors.js";
import { configPath, DEFAULT_CONFIG, loadConfig, setConfigValue } from "../../src/store/config.js";
import { readRepoFile, repoSettingsOf } from "../../src/store/repo-settings.js";

function tempHome(): { home: string; done: () => void } {
  const base = mkdtempSync(join(tmpdir(), "dsh-cfg-"));
  const home = join(base, "herdr");
  mkdirSync(home, { mode: 0o700 });
  return { home, done: () => rmSync(base, { recursive: true, force: true }) };
}

test("a missing config gives the documented defaults", async () => {
  const t = tempHome();
  try {
    const c = await loadConfig(t.home);
    assert.deepEqual(c, { ...DEFAULT_CONFIG });
    assert.equal(c.maxParallelAgents, 3);
    assert.equal(c.patchCapBytes, 8 * 1024 * 1024);
    assert.equal(c.deliveryTtlMs, 86_400_000);
    assert.equal(c.workspaceLabel, "DSH · {repo}");
    assert.equal(c.tmuxSocket, "dsh-herdr");
  } finally {
    t.done();
  }
});

test("set validates, writes only the user's keys, expands ~ and keeps aliases", async () => {
  const t = tempHome();
  try {
    await setConfigValue(t.home, "maxParallelAgents", "5");
    await setConfigValue(t.home, "modelAliases.flash", "openai/gpt-5-mini");
    const c = await setConfigValue(t.home, "allowCwd", '["~/code", "/srv/work"]');
    assert.equal(c.maxParallelAgents, 5);
    assert.deepEqual(c.modelAliases, { flash: "openai/gpt-5-mini" });
    assert.deepEqual(c.allowCwd, [join(process.env.HOME ?? "", "code"), "/srv/work"]);
    assert.deepEqual(JSON.parse(readFileSync(configPath(t.home), "utf8")), {
      maxParallelAgents: 5,
      modelAliases: { flash: "openai/gpt-5-mini" },
      allowCwd: ["~/code", "/srv/work"],
    });
    const unset = await setConfigValue(t.home, "maxParallelAgents", undefined);
    assert.equal(unset.maxParallelAgents, 3);
  } finally {
    t.done();
  }
});

test("bad values and unknown keys are refused with CONFIG_INVALID naming the key; the file is unchanged", async () => {
  const t = tempHome();
  try {
    await setConfigValue(t.home, "runtime", "tmux");
    const before = readFileSync(configPath(t.home), "utf8");
    await assert.rejects(
      setConfigValue(t.home, "maxParallelAgents", "lots"),
      (e: Error & { code?: string }) =>
        e.code === "CONFIG_INVALID" &&
        /maxParallelAgents/.test(e.message) &&
        /config set maxParallelAgents 3/.test(e.message),
    );
    await assert.rejects(
      setConfigValue(t.home, "maxParallelAgents", "0"),
      (e: Error & { code?: string }) => e.code === "CONFIG_INVALID" && /maxParallelAgents/.test(e.message),
    );
    await assert.rejects(
      setConfigValue(t.home, "runtime", "docker"),
      (e: Error & { code?: string }) =>
        e.code === "CONFIG_INVALID" && /runtime/.test(e.message) && /headless/.test(e.message),
    );
    await assert.rejects(
      setConfigValue(t.home, "maxParalelAgents", "2"),
      (e: Error & { code?: string }) =>
        e.code === "CONFIG_INVALID" && /unknown config key "maxParalelAgents"/.test(e.message),
    );
    await assert.rejects(setConfigValue(t.home, "tmuxSocket", "../x"), { code: "CONFIG_INVALID" });
    assert.equal(readFileSync(configPath(t.home), "utf8"), before);

    writeFileSync(configPath(t.home), JSON.stringify({ enabled: "yes" }));
    await assert.rejects(
      loadConfig(t.home),
      (e: Error & { code?: string }) => e.code === "CONFIG_INVALID" && /"enabled" must be boolean/.test(e.message),
    );
    writeFileSync(configPath(t.home), JSON.stringify({ enabled: true, colour: "red" }));
    await assert.rejects(
      loadConfig(t.home),
      (e: Error & { code?: string }) =>
        e.code === "CONFIG_INVALID" && /unknown key "colour"/.test(e.message) && /remove it/.test(e.message),
    );
    writeFileSync(configPath(t.home), "{ not json");
    await assert.rejects(
      loadConfig(t.home),
      (e: Error & { code?: string }) =>
        e.code === "CONFIG_INVALID" && /not valid JSON/.test(e.message) && /delete the file/.test(e.message),
    );
  } finally {
    t.done();
  }
});

test("owner.mayLand is set like any key; repos entries are validated; a repository's settings join .dsh-herdr.json", async () => {
  const t = tempHome();
  try {
    const c = await setConfigValue(t.home, "owner.mayLand", "true");
    assert.equal(c.owner?.mayLand, true);
    assert.deepEqual(JSON.parse(readFileSync(configPath(t.home), "utf8")), { owner: { mayLand: true } });
    await assert.rejects(
      () => setConfigValue(t.home, "owner.mayRule", "true"),
      (e: DshError) => e.code === "CONFIG_INVALID" && /unknown config key "owner\.mayRule"/.test(e.message),
    );
    await assert.rejects(
      () => setConfigValue(t.home, "repos", '{"/r": {"worktree": {"setpu": "x"}}}'),
      (e: DshError) => e.code === "CONFIG_INVALID" && /setpu/.test(e.message),
    );
    const root = join(t.home, "repo");
    mkdirSync(root);
    writeFileSync(
      join(root, ".dsh-herdr.json"),
      JSON.stringify({ $schema: "x", worktree: { include: [".env"], setup: "npm ci" }, checks: ["npm test"] }),
    );
    const cfg = await setConfigValue(
      t.home,
      "repos",
      JSON.stringify({
        [`${root}/`]: {
          worktree: { include: [".env", "node_modules/"], setupTimeoutMs: 5000 },
          checks: ["npm run lint"],
        },
      }),
    );
    assert.deepEqual(repoSettingsOf(root, cfg), {
      worktree: { include: [".env", "node_modules/"], setup: "npm ci", setupTimeoutMs: 5000 },
      checks: ["npm test", "npm run lint"],
    });
    assert.deepEqual(repoSettingsOf(t.home, cfg), {}, "no file, no entry: nothing");
    writeFileSync(join(root, ".dsh-herdr.json"), '{"checks": "npm test"}');
    assert.throws(
      () => readRepoFile(root),
      (e: DshError) => e.code === "CONFIG_INVALID" && e.message.includes(".dsh-herdr.json") && /checks/.test(e.message),
    );
    writeFileSync(join(root, ".dsh-herdr.json"), "{not json");
    assert.throws(
      () => readRepoFile(root),
      (e: DshError) => e.code === "CONFIG_INVALID" && /not valid JSON/.test(e.message),
    );
  } finally {
    t.done();
  }
});

test("board.socket takes a path (~ expanded) or a boolean from `config set`; anything else is refused", async () => {
  const t = tempHome();
  try {
    const c = await setConfigValue(t.home, "board.socket", "~/run/board.sock");
    assert.equal(c.board?.socket, join(process.env.HOME ?? "", "run/board.sock"));
    assert.deepEqual(JSON.parse(readFileSync(configPath(t.home), "utf8")), { board: { socket: "~/run/board.sock" } });
    assert.equal((await setConfigValue(t.home, "board.socket", "true")).board?.socket, true);
    assert.equal((await setConfigValue(t.home, "board.socket", "false")).board?.socket, false);
    await assert.rejects(setConfigValue(t.home, "board.socket", "3"), { code: "CONFIG_INVALID" });
    await assert.rejects(setConfigValue(t.home, "board.socket", ""), { code: "CONFIG_INVALID" });
  } finally {
    t.done();
  }
});
