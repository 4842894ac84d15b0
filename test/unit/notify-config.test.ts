// config.json `notify` (issue 26): validated like every key (a bad value is named and leaves the file as it was), and
// the notify log (src/notify/log.ts): what a restart finds pending, what it remembers, what compaction keeps.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isDshError } from "../../src/core/errors.js";
import { notifyBody, notifyEnv } from "../../src/core/notify.js";
import type { AgentResult } from "../../src/core/types.js";
import { NotifyLog } from "../../src/notify/log.js";
import { signBody, targetKey, webhookLabel } from "../../src/notify/send.js";
import { configPath, loadConfig, setConfigValue } from "../../src/store/config.js";

function tempHome(): { home: string; done: () => void } {
  const base = mkdtempSync(join(tmpdir(), "dsh-notify-"));
  const home = join(base, "herdr");
  mkdirSync(home, { mode: 0o700 });
  return { home, done: () => rmSync(base, { recursive: true, force: true }) };
}

test("config set notify takes webhooks and commands and refuses bad ones by name, leaving the file as it was", async () => {
  const t = tempHome();
  try {
    const good = {
      webhooks: [
        {
          url: "https://hooks.example.com/a/b?c=d",
          secret: "x",
          on: ["blocked", "failed"],
          headers: { Authorization: "Bearer t" },
        },
      ],
      commands: [
        { command: 'notify-send dsh-herdr "$DSH_HERDR_SUMMARY"', on: ["completed"] },
        { command: ["/usr/bin/true"] },
      ],
    };
    const c = await setConfigValue(t.home, "notify", JSON.stringify(good));
    assert.deepEqual(c.notify, good);
    assert.deepEqual((await loadConfig(t.home)).notify, good);
    const written = readFileSync(configPath(t.home), "utf8");
    const bad: [unknown, RegExp][] = [
      [{ webhooks: [{ url: "ftp://x" }] }, /notify\.webhooks\.0\.url/],
      [{ webhooks: [{ url: "https://x", on: ["done"] }] }, /notify\.webhooks\.0\.on\.0/],
      [{ webhooks: [{ url: "https://x", on: [] }] }, /notify\.webhooks\.0\.on/],
      [{ webhooks: [{ url: "https://x", headers: { "X-A": "a\r\nInjected: 1" } }] }, /notify\.webhooks\.0\.headers/],
      [{ webhooks: [{ url: "https://x", headers: { "Bad Name": "v" } }] }, /notify\.webhooks\.0\.headers/],
      [{ webhooks: [{ url: "https://x", sekret: "typo" }] }, /unknown key "notify\.webhooks\.0\.sekret"/],
      [{ commands: [{ command: "   " }] }, /notify\.commands\.0\.command/],
      [{ commands: [{ command: [] }] }, /notify\.commands\.0\.command/],
      [{ pager: [] }, /unknown key "notify\.pager"/],
    ];
    for (const [value, named] of bad) {
      await assert.rejects(
        setConfigValue(t.home, "notify", JSON.stringify(value)),
        (e: unknown) => isDshError(e) && e.code === "CONFIG_INVALID" && named.test(e.message),
        JSON.stringify(value),
      );
    }
    assert.equal(readFileSync(configPath(t.home), "utf8"), written, "a refused value changed nothing");
  } finally {
    t.done();
  }
});

const result = {
  schemaVersion: 1,
  taskId: "tmg3k2a1b2c3",
  status: "failed",
  role: "worker",
  agent: { name: "worker-m-b2c3", kind: "pi", model: "p/m", thinking: "off", machine: "box" },
  herdrStatus: "unknown",
  summary: "it broke",
  timing: { createdAt: 1 },
  nextAction: "inspect",
  owner: "sess-1",
  error: { code: "AGENT_ERROR", message: "boom" },
  brief: "not in the body",
} as AgentResult;

test("the body: the contract's fields only, the error and machine when there are some, a stable delivery id", () => {
  const b = notifyBody(result, 3, Date.UTC(2026, 11, 1, 10, 0, 0))!;
  assert.deepEqual(b, {
    deliveryId: "tmg3k2a1b2c3-c3-failed",
    taskId: "tmg3k2a1b2c3",
    agent: "worker-m-b2c3",
    status: "failed",
    summary: "it broke",
    nextAction: "inspect",
    error: { code: "AGENT_ERROR", message: "boom" },
    owner: "sess-1",
    machine: "box",
    at: "2026-12-01T10:00:00.000Z",
  });
  assert.equal(notifyBody({ ...result, status: "running" }, 1, 0), undefined, "a running task is no notification");
  assert.equal(notifyEnv(b).DSH_HERDR_ERROR, "AGENT_ERROR: boom");
  // RFC-style HMAC-SHA256 test vector (key "key"): the header is the hex digest of the raw bytes.
  assert.equal(
    signBody("The quick brown fox jumps over the lazy dog", "key"),
    "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8",
  );
  assert.notEqual(signBody('{"a":1}', "k"), signBody('{"a":1}', "k2"));
  assert.equal(webhookLabel("https://hooks.slack.com/services/T0/B0/SECRET"), "https://hooks.slack.com");
  assert.doesNotMatch(targetKey({ kind: "webhook", url: "https://x/SECRET" }), /SECRET/);
});

test("the notify log: pending deliveries and every id survive a restart; compaction keeps what a restart needs", async () => {
  const t = tempHome();
  try {
    const body = notifyBody(result, 1, 1000)!;
    const log = new NotifyLog(t.home);
    await log.load(0, 1000);
    const q = (id: string, ts: number) => ({
      state: "queued" as const,
      id,
      ts,
      target: "w-1",
      kind: "webhook" as const,
      label: "x",
      body,
    });
    await log.append([{ state: "target", target: "w-1", ts: 10 }, q("a@w-1", 100), q("b@w-1", 200), q("old@w-1", 50)]);
    await Promise.all([
      log.append([{ state: "done", id: "a@w-1", ts: 5000 }]),
      log.append([{ state: "expired", id: "old@w-1", ts: 60 }]),
    ]);
    const again = new NotifyLog(t.home);
    const r = await again.load(6000, 2000);
    assert.deepEqual(
      r.pending.map((p) => p.id),
      ["b@w-1"],
    );
    assert.deepEqual(r.pending[0]!.body, body);
    assert.deepEqual([...r.known].sort(), ["a@w-1", "b@w-1", "old@w-1"]);
    assert.equal(r.since.get("w-1"), 10);
    // Compacted: the old finished id is gone, the recent done one and the pending one stay.
    const third = await new NotifyLog(t.home).load(6000, 2000);
    assert.deepEqual([...third.known].sort(), ["a@w-1", "b@w-1"]);
    assert.deepEqual(
      third.pending.map((p) => p.id),
      ["b@w-1"],
    );
    assert.equal(third.since.get("w-1"), 10);
  } finally {
    t.done();
  }
});

test("config set budget.perDay and its siblings one key at a time; unknown or bad ones refused by name", async () => {
  const t = tempHome();
  try {
    await setConfigValue(t.home, "budget.perDay", "20");
    const c = await setConfigValue(t.home, "budget.maxCost", "2.5");
    assert.deepEqual(c.budget, { perDay: 20, maxCost: 2.5 });
    for (const [key, value, named] of [
      ["budget.nope", "1", /unknown config key "budget\.nope"/],
      ["budget.perDay", "-1", /"budget\.perDay" must be > 0/],
      ["budget.maxTurns", "1.5", /"budget\.maxTurns" must be integer/],
      ["budget.maxCost", "lots", /"budget\.maxCost" needs a number/],
      ["notify.webhooks", '[{"url":"ftp://x"}]', /notify\.webhooks\.0\.url/],
    ] as const)
      await assert.rejects(
        setConfigValue(t.home, key, value),
        (e: unknown) => isDshError(e) && e.code === "CONFIG_INVALID" && named.test(e.message),
        `${key} ${value}`,
      );
    // One part of notify at a time works the same way.
    const n = await setConfigValue(t.home, "notify.commands", '[{"command":"true"}]');
    assert.deepEqual(n.notify, { commands: [{ command: "true" }] });
    const after = await setConfigValue(t.home, "budget.perDay", undefined);
    assert.deepEqual(after.budget, { maxCost: 2.5 }, "unset takes one key");
  } finally {
    t.done();
  }
});
