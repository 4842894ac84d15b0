// Clients that try to balloon a real daemon process (issue 13 §3): one that sends requests and never reads its
// replies, hundreds that each hold a 1 MB unfinished frame, one that never finishes its frame, and more connections
// than the cap. Bounds are asserted on the daemon's RSS (/proc/<pid>/status) with wide margins, never on timings.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createConnection, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "../../src/client/index.js";
import { rawConnect, sleep, startDaemonProc, until, type DaemonProc } from "./proc-harness.js";

const MB = 1024 * 1024;
const MAX_CONNECTIONS = 400;
let dir: string;
let home: string;
let d: DaemonProc;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "dsh-abuse-"));
  home = join(dir, "home");
  // The default cap (1024) is lowered so the test stays far below any fd limit; the other bounds are the defaults.
  d = await startDaemonProc(
    home,
    {},
    {
      config: { enabled: false },
      env: { DSH_TEST_LIMITS: JSON.stringify({ maxConnections: MAX_CONNECTIONS, partialFrameTimeoutMs: 15_000 }) },
    },
  );
});
after(async () => {
  d.proc.kill("SIGTERM");
  await d.exited;
  rmSync(dir, { recursive: true, force: true });
});

const sock = () => join(home, "daemon.sock");

function rssMB(pid: number): number {
  const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]);
  return Math.round(kb / 1024);
}

async function stillServes(): Promise<void> {
  const cli = await connect(home, { kind: "cli", timeoutMs: 60_000 });
  try {
    assert.equal((await cli.request("daemon.status")).pid, d.pid);
  } finally {
    cli.close();
  }
}

function openSocket(): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = createConnection(sock());
    s.once("connect", () => resolve(s));
    s.once("error", reject);
  });
}

/** Everything a socket receives until it closes (or until the wait ends). */
function received(s: Socket): { text(): string; closed: Promise<void> } {
  let text = "";
  s.on("data", (b: Buffer) => (text += b.toString("utf8")));
  s.on("error", () => undefined);
  return { text: () => text, closed: new Promise((r) => s.once("close", () => r())) };
}

test("a client that sends requests and never reads: the daemon stops reading it, its memory stays bounded", async (t) => {
  const before = rssMB(d.pid);
  const s = await openSocket();
  s.on("error", () => undefined);
  s.pause(); // never read a reply
  // Each request is answered with an error naming its 100 kB method: replies as large as the requests.
  const frame = JSON.stringify({ id: 1, method: "m".repeat(100_000) }) + "\n";
  let sent = 0;
  const LIMIT = 160 * MB;
  // Send while the daemon reads; once it stops reading, our own buffer fills and 'drain' does not come.
  while (sent < LIMIT) {
    sent += frame.length;
    if (!s.write(frame)) {
      const drained = await Promise.race([
        new Promise<boolean>((r) => s.once("drain", () => r(true))),
        sleep(5000).then(() => false),
      ]);
      if (!drained) break;
    }
  }
  const during = rssMB(d.pid);
  t.diagnostic(`slow reader: sent ${Math.round(sent / MB)} MB of requests; daemon RSS ${before} → ${during} MB`);
  assert.ok(sent < LIMIT, `the daemon read all ${Math.round(sent / MB)} MB while none of its replies were read`);
  assert.ok(during - before < 80, `daemon RSS grew ${during - before} MB (bound: replies held up to 8 MiB)`);
  await stillServes();
  s.destroy();
  await stillServes();
});

test("300 connections holding a 1 MB unfinished frame each: the daemon holds at most its budget and refuses the rest", async (t) => {
  const before = rssMB(d.pid);
  const partial = Buffer.alloc(1_000_000, 0x61); // under the 1 MiB frame cap, no newline
  const conns = await Promise.all(Array.from({ length: 300 }, () => openSocket()));
  const seen = conns.map((c) => received(c));
  try {
    for (const c of conns) c.write(partial);
    // Refused at once with CONNECTION_LIMIT, or held within the budget until the partial-frame timeout (15 s here)
    // closes it with TIMEOUT: each connection ends with exactly one of the two.
    const refusedNow = await until(
      "the first refusals",
      () => {
        const n = seen.filter((r) => r.text().includes('"CONNECTION_LIMIT"')).length;
        return n >= 200 ? n : undefined;
      },
      60_000,
    );
    const during = rssMB(d.pid);
    await until(
      "every connection refused or timed out",
      () => (seen.every((r) => /"CONNECTION_LIMIT"|"TIMEOUT"/.test(r.text())) ? true : undefined),
      60_000,
    );
    const held = seen.filter((r) => r.text().includes('"TIMEOUT"')).length;
    t.diagnostic(
      `partial frames: 300 × 1 MB sent, ${held} held (then timed out), ${300 - held} refused (${refusedNow} when RSS was read); daemon RSS ${before} → ${during} MB`,
    );
    assert.ok(held <= 34, `${held} connections held 1 MB each (budget 32 MiB)`);
    assert.match(seen.find((r) => r.text().includes("CONNECTION_LIMIT"))!.text(), /unfinished frames/);
    assert.ok(during - before < 200, `daemon RSS grew ${during - before} MB for 300 MB of partial frames`);
    await stillServes();
  } finally {
    for (const c of conns) c.destroy();
  }
  // The budget is given back when those connections go: a large whole frame is served again.
  await until(
    "budget released",
    async () => {
      const c = await rawConnect(sock());
      try {
        c.send(
          JSON.stringify({ id: "big", method: "hello", params: { kind: "cli" }, pad: "x".repeat(900_000) }) + "\n",
        );
        const r = await c.next(30_000).catch(() => undefined);
        return r?.error?.code === "CONNECTION_LIMIT" ? undefined : r;
      } finally {
        c.close();
      }
    },
    30_000,
  );
});

test("a connection that never completes its frame is closed with TIMEOUT", async () => {
  const s = await openSocket();
  const r = received(s);
  s.write('{"id":1,"method":"daemon.sta');
  // partialFrameTimeoutMs is 15 s for this daemon; generous wait.
  await Promise.race([r.closed, sleep(60_000).then(() => assert.fail("the connection was never closed"))]);
  assert.match(r.text(), /"TIMEOUT".*no complete frame/);
  await stillServes();
});

test("more connections than the cap: the extra ones get CONNECTION_LIMIT, the held ones and a new one later are served", async (t) => {
  const conns: Socket[] = [];
  try {
    for (let i = 0; i < MAX_CONNECTIONS; i++) conns.push(await openSocket());
    for (const c of conns) c.on("error", () => undefined);
    const extra = await rawConnect(sock());
    const r = await extra.next(30_000);
    extra.close();
    assert.equal(r.error?.code, "CONNECTION_LIMIT", JSON.stringify(r));
    assert.match(r.error.message, new RegExp(`${MAX_CONNECTIONS} connections`));
    t.diagnostic(`connection cap: ${MAX_CONNECTIONS} held, the next refused; daemon RSS ${rssMB(d.pid)} MB`);
    conns[0]!.write(JSON.stringify({ id: 0, method: "hello", params: { kind: "cli" } }) + "\n");
    const first = received(conns[0]!);
    await until(
      "the held connection is answered",
      () => (first.text().includes('"kind":"cli"') ? true : undefined),
      30_000,
    );
  } finally {
    for (const c of conns) c.destroy();
  }
  await until(
    "a new connection is served",
    async () => {
      try {
        await stillServes();
        return true;
      } catch {
        return undefined;
      }
    },
    30_000,
  );
});
