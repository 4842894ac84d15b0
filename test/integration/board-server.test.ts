// The board's server against the daemon's handler table stood in by a small fake (no daemon, no pi): the live stream
// is bounded per client (a page too many is refused, a page that does not read is cut off and its subscription ends).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { connect as netConnect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BoardActions, type Handlers } from "../../src/board/actions.js";
import type { AgentResult } from "../../src/core/types.js";
import { startBoard, type BoardServer } from "../../src/board/server.js";
import { ensureBoardToken } from "../../src/board/token.js";
import type { Connection } from "../../src/daemon/server/server-types.js";
import { chromium } from "playwright-core";

const log = { info() {}, warn() {}, error() {}, debug() {} };
const subscribers = new Set<Connection>();
/** The tasks the fake daemon lists (newest first) and answers task.get for. */
let listed: ReturnType<typeof result>[] = [];
let home: string;
let board: BoardServer;
let token: string;

before(async () => {
  home = mkdtempSync(join(tmpdir(), "dsh-board-"));
  token = await ensureBoardToken(home);
  const actions = new BoardActions({
    mayActOnOwnerTasks: () => false,
    // A stand-in daemon answering only what the board's page reads; shapes cut to what the board shows.
    handlers: {
      "task.list": () => ({ tasks: listed }),
      "task.get": (p: { taskId: string }) => listed.find((r) => r.taskId === p.taskId),
      "task.subscribe": (_p: unknown, conn: Connection) => {
        subscribers.add(conn);
        conn.onClose(() => subscribers.delete(conn));
        return { subscribed: true };
      },
    } as unknown as Handlers,
  });
  board = await startBoard({ home, port: 0, actions, log, maxClients: 2, maxUnsentBytes: 64 * 1024 });
});

after(async () => {
  await board?.close();
  rmSync(home, { recursive: true, force: true });
});

/** An event stream request on a raw socket that reads only its head (then stops reading when `pause`). */
function openStream(pause: boolean): Promise<{ head: string; socket: import("node:net").Socket }> {
  return new Promise((resolve, reject) => {
    const socket = netConnect(board.port, "127.0.0.1");
    socket.on("error", reject);
    socket.write(`GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:${board.port}\r\nCookie: dsh_board=${token}\r\n\r\n`);
    socket.once("data", (d: Buffer) => {
      if (pause) socket.pause();
      resolve({ head: d.toString("utf8"), socket });
    });
  });
}

const result = (i: number, status = "running") => ({
  taskId: `tm${String(i).padStart(10, "0")}`,
  status,
  agent: { name: "worker", model: "m", kind: "pi", thinking: "off" },
  summary: "x".repeat(900),
  brief: "y".repeat(500),
  timing: { createdAt: 1 },
});

test("a third live page is refused; a page that stops reading is cut off and its subscription ends", async () => {
  const a = await openStream(true);
  const b = await openStream(false);
  b.socket.on("data", () => undefined);
  assert.match(a.head, /^HTTP\/1\.1 200/);
  assert.match(b.head, /^HTTP\/1\.1 200/);
  const c = await openStream(false);
  assert.match(c.head, /^HTTP\/1\.1 503/);
  c.socket.destroy();
  assert.equal(subscribers.size, 2);
  // Statuses pushed faster than page a reads: its unsent bytes pass the bound, and the board lets it go.
  for (let i = 0; i < 40_000 && subscribers.size === 2; i++) {
    for (const s of subscribers)
      s.push("task.status", { taskId: "x", status: "running", result: result(i) as unknown as AgentResult });
    if (i % 20 === 0) await new Promise((r) => setTimeout(r, 1));
  }
  assert.equal(subscribers.size, 1, "the page that did not read was cut off; the reading one stays");
  a.socket.destroy();
  b.socket.destroy();
});

test("1,000 tasks: the listing answers in well under a second and the page draws each column's newest 50, more on request", async () => {
  const statuses = ["running", "blocked", "completed", "failed", "closed"];
  listed = Array.from({ length: 1000 }, (_, i) => result(i, statuses[i % 5]));
  const t0 = Date.now();
  const res = await fetch(`http://127.0.0.1:${board.port}/api/tasks`, { headers: { cookie: `dsh_board=${token}` } });
  const { cards } = (await res.json()) as { cards: unknown[] };
  const listMs = Date.now() - t0;
  assert.equal(cards.length, 1000);
  assert.ok(listMs < 1000, `listing 1,000 tasks took ${listMs} ms`);
  const browser = await chromium.launch({
    executablePath: process.env.DSH_TEST_CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox"],
  });
  try {
    const page = await browser.newPage();
    const t1 = Date.now();
    await page.goto(`http://127.0.0.1:${board.port}/?token=${token}`);
    await page.waitForSelector(".column[data-column=failed] .more");
    const firstMs = Date.now() - t1;
    // Again, warm (a browser's first page pays its own start-up): what a person waits for on a reload.
    const t2 = Date.now();
    await page.reload();
    await page.waitForSelector(".column[data-column=failed] .more");
    const drawMs = Date.now() - t2;
    console.log(`1,000 tasks: listing ${listMs} ms, page drawn in ${firstMs} ms (first), ${drawMs} ms (reload)`);
    assert.equal(await page.locator(".card").count(), 200); // 50 in each of four columns (none landed)
    assert.equal((await page.textContent(".column[data-column=failed] .more"))?.trim(), "+350 more"); // failed + closed
    await page.click(".column[data-column=failed] .more");
    await page.waitForSelector(".column[data-column=failed] .more:has-text('+300 more')");
    assert.equal(await page.locator(".column[data-column=failed] .card").count(), 100);
    assert.ok(drawMs < 3000, `the page took ${drawMs} ms`);
  } finally {
    await browser.close();
    listed = [];
  }
});
