// Hostile files a child (or a person) controls: result.md that is a symlink, a FIFO, oversized, binary or with
// broken frontmatter; session lines that are truncated, huge or not JSON; config with unknown keys or wrong types.
// Each gives a named warning or error and harms nothing else (no secret read, no hang, no unbounded memory).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TaskFiles } from "../../src/daemon/ports/watcher.js";
import { loadConfig } from "../../src/store/config.js";
import { RESULT_MD_MAX_BYTES } from "../../src/core/result/result-md.js";
import type { DshError } from "../../src/core/errors.js";
import { TaskStore } from "../../src/store/task-store.js";
import { readOutboxSized } from "../../src/store/outbox.js";
import { readPid } from "../../src/daemon/lock.js";
import { readState } from "../../src/runtime/headless/files.js";

async function withFiles(fn: (dir: string, files: TaskFiles) => Promise<void>) {
  const dir = mkdtempSync(join(tmpdir(), "dsh-hfiles-"));
  const files = new TaskFiles({
    taskDir: dir,
    sessionPath: join(dir, "session.jsonl"),
    resultPath: join(dir, "result.md"),
    onChange: () => undefined,
  });
  try {
    await fn(dir, files);
  } finally {
    await files.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

test("result.md as a symlink is refused without following it: the secret it points at is never read", async () => {
  await withFiles(async (dir, files) => {
    writeFileSync(
      join(dir, "secret.txt"),
      "---\nstatus: completed\nsummary: SECRET-TOKEN-123\n---\nSECRET-TOKEN-123\n",
    );
    symlinkSync(join(dir, "secret.txt"), join(dir, "result.md"));
    await files.readResult();
    const r = files.result!;
    assert.match(r.warnings.join(" "), /symlink; it was not followed/);
    assert.doesNotMatch(JSON.stringify(r), /SECRET-TOKEN-123/);
  });
});

test("result.md as a FIFO is refused at once (no hang waiting for a writer)", async () => {
  await withFiles(async (dir, files) => {
    execFileSync("mkfifo", [join(dir, "result.md")]);
    await files.readResult();
    assert.match(files.result!.warnings.join(" "), /not a regular file/);
  });
});

test("result.md over the size bound is read only up to the bound and says so; binary and broken frontmatter are named", async () => {
  await withFiles(async (dir, files) => {
    writeFileSync(
      join(dir, "result.md"),
      "---\nstatus: completed\nsummary: big\n---\n" + "x".repeat(RESULT_MD_MAX_BYTES * 20),
    );
    await files.readResult();
    assert.match(files.result!.warnings.join(" "), /over \d+ bytes; the body was truncated/);
    assert.ok(files.result!.body.length <= RESULT_MD_MAX_BYTES);

    writeFileSync(join(dir, "result.md"), Buffer.from([0x00, 0x01, 0xff, 0x00, 0x7f]));
    await files.readResult();
    assert.match(files.result!.warnings.join(" "), /looks binary/);

    writeFileSync(join(dir, "result.md"), "---\nstatus: [completed\nsummary: oops\n");
    await files.readResult();
    assert.match(files.result!.warnings.join(" "), /frontmatter/);
  });
});

test("session lines that are not JSON, truncated or huge are counted and skipped; the good lines around them still count", async () => {
  await withFiles(async (dir, files) => {
    const p = join(dir, "session.jsonl");
    const ts = new Date().toISOString();
    const msg = (role: string, text: string, extra: object = {}) =>
      JSON.stringify({
        type: "message",
        id: Math.random().toString(36).slice(2),
        timestamp: ts,
        message: { role, content: [{ type: "text", text }], ...extra },
      }) + "\n";
    writeFileSync(p, JSON.stringify({ type: "session", version: 3, id: "s1", timestamp: ts, cwd: dir }) + "\n");
    appendFileSync(p, "this is not json\n");
    appendFileSync(p, '{"type":"message","message":{"role":"assistant","content":[{"type":"text","te\n'); // torn mid-line
    appendFileSync(p, JSON.stringify({ type: "custom", data: "y".repeat(8 * 1024 * 1024) }) + "\n"); // 8 MiB line
    appendFileSync(p, msg("user", "hello"));
    appendFileSync(
      p,
      msg("assistant", "final words", {
        stopReason: "stop",
        usage: { input: 5, output: 7, cacheRead: 0, cacheWrite: 0, totalTokens: 12 },
      }),
    );
    await files.readSession();
    const f = files.facts()!;
    assert.equal(f.invalidLines, 2); // the 8 MiB line (valid JSON, read across 256 KiB chunks) counts as an entry
    assert.equal(f.lastStopReason, "stop");
    assert.match(JSON.stringify(f), /final words/);
  });
});

test("config with unknown keys or wrong types is CONFIG_INVALID naming the key and the fix", async () => {
  const home = mkdtempSync(join(tmpdir(), "dsh-hcfg-"));
  try {
    writeFileSync(join(home, "config.json"), JSON.stringify({ maxParalelAgents: 2 }));
    await assert.rejects(
      loadConfig(home),
      (e: DshError) => e.code === "CONFIG_INVALID" && /maxParalelAgents/.test(e.message),
    );
    writeFileSync(join(home, "config.json"), JSON.stringify({ maxParallelAgents: "three" }));
    await assert.rejects(
      loadConfig(home),
      (e: DshError) => e.code === "CONFIG_INVALID" && /maxParallelAgents/.test(e.message),
    );
    writeFileSync(join(home, "config.json"), "{ not json");
    await assert.rejects(
      loadConfig(home),
      (e: DshError) => e.code === "CONFIG_INVALID" && /config\.json/.test(e.message),
    );
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test("store files the daemon reads (task.json, events.jsonl, result.json, the outbox, the pid file, the headless state) as a FIFO or /dev/zero: refused by name, never a hang or an unbounded read", async () => {
  const home = mkdtempSync(join(tmpdir(), "dsh-hstore-"));
  try {
    const store = await TaskStore.open(home, { groupCommit: false });
    const rec = await store.createTask((taskId) => ({ taskId, owner: "cli", status: "starting", createdAt: 1 }));
    const p = store.taskPaths(rec.taskId);
    const plant = (file: string, kind: "fifo" | "zero") => {
      rmSync(file, { force: true });
      if (kind === "fifo") execFileSync("mkfifo", [file]);
      else symlinkSync("/dev/zero", file);
    };
    for (const kind of ["fifo", "zero"] as const) {
      const named = (e: DshError) =>
        e.code === "HOME_UNSAFE" &&
        new RegExp(`is a ${kind === "fifo" ? "FIFO" : "character device"}, not a regular file; .*move it away`).test(
          e.message,
        );
      plant(p.taskJson, kind);
      await assert.rejects(store.readTask(rec.taskId), named, `task.json as ${kind}`);
      plant(p.events, kind);
      await assert.rejects(store.readEvents(rec.taskId), named, `events.jsonl as ${kind}`);
      plant(p.resultJson, kind);
      await assert.rejects(store.readResult(rec.taskId), named, `result.json as ${kind}`);
      const outbox = join(home, "owners", "sess-x", "outbox.jsonl");
      mkdirSync(join(home, "owners", "sess-x"), { recursive: true });
      plant(outbox, kind);
      await assert.rejects(readOutboxSized(home, "sess-x"), named, `outbox as ${kind}`);
      plant(join(home, "daemon.pid"), kind);
      assert.equal(readPid(home), undefined, `daemon.pid as ${kind}: no pid, no hang`);
      const state = join(p.dir, "headless.json");
      plant(state, kind);
      assert.equal(readState(state), null, `headless.json as ${kind}`);
    }
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test("session.jsonl as a FIFO or /dev/zero is not read: no hang, no session facts", async () => {
  for (const kind of ["fifo", "zero"] as const) {
    await withFiles(async (dir, files) => {
      const p = join(dir, "session.jsonl");
      if (kind === "fifo") execFileSync("mkfifo", [p]);
      else symlinkSync("/dev/zero", p);
      assert.equal(await files.readSession(), false);
      assert.equal(files.facts(), undefined);
    });
  }
});

test("a session truncated and regrown on the same inode before the next read is read again from the start: usage from what it holds now, a warning, no invalid lines", async () => {
  await withFiles(async (dir, files) => {
    const p = join(dir, "session.jsonl");
    const ts = new Date().toISOString();
    const header = (id: string) => JSON.stringify({ type: "session", version: 3, id, timestamp: ts, cwd: dir }) + "\n";
    const assistant = (text: string, output: number) =>
      JSON.stringify({
        type: "message",
        id: `m-${text}`,
        parentId: null,
        timestamp: ts,
        message: {
          role: "assistant",
          content: [{ type: "text", text }],
          stopReason: "stop",
          usage: { input: 1, output, cacheRead: 0, cacheWrite: 0, totalTokens: output + 1 },
        },
      }) + "\n";
    writeFileSync(p, header("first") + assistant("a1", 7) + assistant("a2", 7) + assistant("a3", 7));
    await files.readSession();
    assert.equal(files.facts()!.usage.outputTokens, 21);
    const ino = statSync(p).ino;
    // Same inode: emptied in place, then written again longer than what was read (nothing was read in between).
    truncateSync(p, 0);
    appendFileSync(p, header("second"));
    for (let i = 1; i <= 5; i++) appendFileSync(p, assistant(`b${i}-${"x".repeat(40)}`, 11));
    assert.equal(statSync(p).ino, ino);
    assert.equal(await files.readSession(), true);
    const f = files.facts()!;
    assert.equal(f.sessionId, "second");
    assert.equal(f.invalidLines, 0, "no line read from the middle of the new content");
    assert.equal(f.usage.assistant, 5);
    assert.equal(f.usage.outputTokens, 55);
    assert.equal(f.restarts, 1, "the result warns that the session was read again");
    // Appends after the regrow are read as usual, not as another restart.
    appendFileSync(p, assistant("b6", 11));
    await files.readSession();
    assert.equal(files.facts()!.usage.outputTokens, 66);
    assert.equal(files.facts()!.restarts, 1);
  });
});
