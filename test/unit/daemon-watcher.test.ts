// TaskFiles (src/daemon/ports/watcher.ts) against a real directory: lines appended a few ms apart (as pi writes its
// settling tool result right after the assistant line) must all be read without any other nudge. chokidar's
// 50 ms per-file change throttle used to drop the last one.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  appendFileSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createConnection, createServer } from "node:net";
import { TaskFiles } from "../../src/daemon/ports/watcher.js";
import { until } from "../helpers/wait.js";
import { FakeClock } from "../helpers/fake-clock.js";

const root = join(import.meta.dirname, "..", "..", "..");
const fixture = readFileSync(join(root, "fixtures", "sessions", "crew-report.jsonl"), "utf8")
  .split("\n")
  .filter(Boolean);

function setup() {
  const dir = mkdtempSync(join(tmpdir(), "dsh-watch-"));
  const changes: string[] = [];
  const files = new TaskFiles({
    taskDir: dir,
    sessionPath: join(dir, "session.jsonl"),
    resultPath: join(dir, "result.md"),
    onChange: (what) => changes.push(what),
  });
  return {
    dir,
    files,
    changes,
    cleanup: async () => (await files.stop(), rmSync(dir, { recursive: true, force: true })),
  };
}

test("watcher: the last session lines, appended 1-3 ms apart, are read without any further event", async () => {
  const { dir, files, changes, cleanup } = setup();
  try {
    files.start();
    const session = join(dir, "session.jsonl");
    for (let round = 0; round < 10; round++) {
      // One cycle's worth of lines; the final two land within a few ms of each other.
      for (const line of fixture) {
        appendFileSync(session, line + "\n");
        await new Promise((r) => setTimeout(r, 1 + (round % 3)));
      }
      const size = readFileSync(session).length;
      await until(
        `offset ${size} in round ${round} (at ${files.sessionOffset})`,
        () => (files.sessionOffset === size ? true : undefined),
        5000,
        5,
      );
    }
    const f = files.facts();
    assert.ok(f, "the session was read");
    assert.equal(f.cycleSettled, true, "the settling line was seen");
    assert.ok(changes.filter((c) => c === "session").length >= 10, "every round reported a session change");
  } finally {
    await cleanup();
  }
});

test("watcher: result.md appearing, changing and vanishing each reach onChange; pre-existing files are read at start", async () => {
  const { dir, files, changes, cleanup } = setup();
  try {
    writeFileSync(join(dir, "session.jsonl"), fixture.slice(0, 3).join("\n") + "\n");
    files.start();
    await until("the pre-existing session", () => (files.sessionOffset > 0 ? true : undefined), 5000, 5);
    const resultPath = join(dir, "result.md");
    writeFileSync(resultPath, "---\noutcome: completed\n---\n\nFirst report.\n");
    await until("result.md read", () => (files.result ? true : undefined), 5000, 5);
    writeFileSync(resultPath, "---\noutcome: blocked\n---\n\nNeed a decision.\n");
    await until("result.md re-read", () => (files.result?.body.includes("decision") ? true : undefined), 5000, 5);
    unlinkSync(resultPath);
    await until("result.md gone", () => (files.result === undefined ? true : undefined), 5000, 5);
    assert.ok(
      changes.filter((c) => c === "result").length >= 3,
      `appear, change, vanish reported: ${changes.join(",")}`,
    );
  } finally {
    await cleanup();
  }
});

test("watcher: with no OS watch available it falls back to polling and still reads every line", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-watch-"));
  // A task dir that does not exist yet makes fs.watch throw ENOENT: the same path as an exhausted inotify limit.
  const taskDir = join(dir, "later");
  const clock = new FakeClock();
  const files = new TaskFiles({
    taskDir,
    sessionPath: join(taskDir, "session.jsonl"),
    resultPath: join(taskDir, "result.md"),
    onChange: () => undefined,
    fallbackPollMs: 20,
    clock,
  });
  try {
    files.start();
    assert.equal(files.polling, true);
    const { mkdirSync } = await import("node:fs");
    mkdirSync(taskDir);
    for (const line of fixture) appendFileSync(join(taskDir, "session.jsonl"), line + "\n");
    const size = readFileSync(join(taskDir, "session.jsonl")).length;
    // Each check moves the fake clock one poll on; the poll's reads are real I/O, waited for by until.
    await until(
      "every line by polling",
      () => (clock.advance(20), files.sessionOffset === size ? true : undefined),
      5000,
      5,
    );
    assert.equal(files.facts()?.cycleSettled, true);
  } finally {
    await files.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

/** This process's descriptors open on `path` (Linux /proc). */
function fdsOn(path: string): number {
  let n = 0;
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      if (readlinkSync(join("/proc/self/fd", fd)).startsWith(path)) n++;
    } catch {
      // closed while listing
    }
  }
  return n;
}

/** Start watching, append the fixture's first three lines, and wait until they are read. */
async function readFirstLines(files: TaskFiles, session: string): Promise<void> {
  files.start();
  appendFileSync(session, fixture.slice(0, 3).join("\n") + "\n");
  const size = readFileSync(session).length;
  await until("the first lines", () => (files.sessionOffset === size ? true : undefined), 5000, 5);
}

test("watcher: the session stays open while watched and is closed at stop; a file replaced under the name is read from 0", async () => {
  const { dir, files, cleanup } = setup();
  const session = join(dir, "session.jsonl");
  try {
    await readFirstLines(files, session);
    assert.equal(fdsOn(session), 1, "one descriptor on the session while watched");
    // Another file under the name (a rename over it), shorter than what was read: read again from 0.
    writeFileSync(join(dir, "other.jsonl"), fixture[0] + "\n");
    renameSync(join(dir, "other.jsonl"), session);
    const shorter = readFileSync(session).length;
    await until(
      `offset ${shorter} of the new file`,
      () => (files.sessionOffset === shorter ? true : undefined),
      5000,
      5,
    );
    assert.equal(files.facts()?.restarts, 1, "the reader started again once");
    assert.equal(fdsOn(session), 1, "the old file's descriptor was closed");
    await files.stop();
    assert.equal(fdsOn(session), 0, "no descriptor on the session after stop");
  } finally {
    await cleanup();
  }
});

test("watcher: file events handled back to back do not starve a socket: a frame sent mid-burst is read within a few events", async () => {
  // The daemon writes into the task dirs it watches (journal, records) as it handles an event, so under load the
  // next file event is always waiting. A child's agent_end frame must still be read promptly, not after the
  // whole run of file events (a 100-task burst read it 10-15 ms late: libuv reads inotify until it is drained).
  const dir = mkdtempSync(join(tmpdir(), "dsh-watch-"));
  const session = join(dir, "session.jsonl");
  const sock = join(dir, "s.sock");
  const ROUNDS = 60;
  let rounds = 0;
  let roundsAtFrame = -1;
  const server = createServer((c) => c.once("data", () => (roundsAtFrame = rounds)));
  await new Promise<void>((r) => server.listen(sock, r));
  const client = createConnection(sock);
  await new Promise<void>((r) => client.once("connect", () => r()));
  const files = new TaskFiles({
    taskDir: dir,
    sessionPath: session,
    resultPath: join(dir, "result.md"),
    onChange: (what) => {
      if (what !== "session" || rounds >= ROUNDS) return;
      rounds++;
      if (rounds === 2) client.write("agent_end\n"); // the child's frame, sent while the burst goes on
      appendFileSync(session, fixture[rounds % fixture.length] + "\n"); // the next event, as our own writes make
    },
  });
  try {
    writeFileSync(session, fixture[0] + "\n");
    files.start();
    await until("the burst to end", () => (rounds >= ROUNDS && roundsAtFrame >= 0 ? true : undefined), 10_000);
    assert.ok(roundsAtFrame <= 6, `the frame was read after ${roundsAtFrame} of ${ROUNDS} file events (want <= 6)`);
  } finally {
    client.destroy();
    await new Promise<void>((r) => server.close(() => r()));
    await files.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

// The session's first line is kept for the task's life (to tell a file truncated and regrown on the same inode).
// A copy from node's shared 8 KiB pool kept the whole pool slab alive with it: 8 MB at 1,000 live tasks.
test("watcher: the kept first line of the session owns its memory, not a slab of node's buffer pool", async () => {
  const { dir, files, cleanup } = setup();
  const session = join(dir, "session.jsonl");
  try {
    await readFirstLines(files, session);
    const first = (files as unknown as { firstLine?: Buffer }).firstLine;
    assert.ok(first, "the first line is kept");
    assert.equal(first.toString(), fixture[0] + "\n");
    assert.equal(first.buffer.byteLength, first.length, "its ArrayBuffer holds the line and nothing more");
  } finally {
    await cleanup();
  }
});
