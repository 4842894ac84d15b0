// The board's server against the daemon's handler table stood in by a small fake (no daemon, no pi): the live stream
// is bounded per client (a page too many is refused, a page that does not read is cut off and its subscription ends).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { connect as netConnect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BoardActions, type Handlers } from "../../src/board/actions.js";
import type { AgentResult } from "../../src/core/types.js";
import { startBoard, type BoardServer } from "../../src/board/server.js";
import { boardAddressPath, boardTokenPath, ensureBoardToken } from "../../src/board/token.js";
import { boardSocketPath, startDaemonBoard } from "../../src/board/start.js";
import type { Config } from "../../src/store/config.js";
import { boardLink } from "../../src/board/link.js";
import type { Connection } from "../../src/daemon/server/server-types.js";
import { ProtocolSchemas } from "../../src/protocol/schemas.js";
import type { RequestMethod } from "../../src/protocol/methods.js";
import { chromium } from "playwright-core";

const log = { info() {}, warn() {}, error() {}, debug() {} };
/** The daemon's schemas, read once for the tests as the daemon reads them once per start. */
const schemas = new ProtocolSchemas();
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
    schemas,
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

/** A request over the board's Unix socket (as `ssh -L` delivers it), with the Host header the laptop's browser sends. */
function overSocket(
  socketPath: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ socketPath, method, path, headers }, (res) => {
      let text = "";
      res.on("data", (d: Buffer) => (text += d.toString("utf8")));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

test("board.socket: served on a Unix socket (0600 in a 0700 folder) with the same token, Host and Origin rules; any loopback port as Host", async () => {
  const sockHome = mkdtempSync(join(tmpdir(), "dsh-board-sock-"));
  const sockToken = await ensureBoardToken(sockHome);
  const socketPath = boardSocketPath(sockHome, true)!;
  assert.equal(socketPath, join(sockHome, "board.sock"));
  // Started as the daemon starts it: board.socket true means the home's board.sock.
  const sock = (await startDaemonBoard({
    home: sockHome,
    schemas,
    config: () => ({ board: { socket: true } }) as Config,
    log,
    latency: { buckets: () => [{ start: 0, count: 2, p50: 3, p99: 5, max: 5 }] },
    handlers: {
      "task.list": () => ({ tasks: [] }),
      "task.get": (p: { taskId: string }) => ({ taskId: p.taskId, owner: "cli", status: "completed" }),
      "task.close": () => ({ status: "closed" }),
    } as unknown as Handlers,
  }))!;
  assert.equal(sock.socket, socketPath);
  try {
    assert.equal(statSync(socketPath).mode & 0o777, 0o600, "the socket is the user's alone");
    assert.ok(statSync(socketPath).isSocket());
    assert.equal(statSync(sockHome).mode & 0o777, 0o700);
    assert.equal(sock.port, 0);
    const address = JSON.parse(readFileSync(boardAddressPath(sockHome), "utf8")) as { url: string; socket: string };
    assert.equal(address.socket, socketPath);
    assert.equal(boardLink(address, sockToken, "box").ssh, `ssh -N -L 8080:${socketPath} box`);
    const cookie = `dsh_board=${sockToken}`;
    // The laptop's forwarded port is not known here: any loopback name and port is the board's Host.
    for (const host of ["localhost:8080", "localhost:51234", "127.0.0.1:9000", "[::1]:8080", "localhost"]) {
      const r = await overSocket(socketPath, "GET", "/api/tasks", { host, cookie });
      assert.equal(r.status, 200, `${host}: ${r.body}`);
    }
    // The same refusals as on a port: no token, a wrong token, another site's name (DNS rebinding).
    assert.equal((await overSocket(socketPath, "GET", "/api/tasks", { host: "localhost:8080" })).status, 401);
    assert.equal(
      (
        await overSocket(socketPath, "GET", "/api/tasks", {
          host: "localhost:8080",
          cookie: "dsh_board=" + "z".repeat(43),
        })
      ).status,
      401,
    );
    for (const host of ["evil.example:8080", "localhost.evil.example:8080", "127.0.0.1.nip.io:8080", "evil.example"])
      assert.equal((await overSocket(socketPath, "GET", "/api/tasks", { host, cookie })).status, 421, host);
    const login = await overSocket(socketPath, "GET", `/?token=${sockToken}`, { host: "localhost:8080" });
    assert.equal(login.status, 303);
    assert.match(String(login.headers["set-cookie"]), /HttpOnly; SameSite=Strict/);
    // State changes: only from the page's own origin (another localhost port is another origin).
    const post = (origin: string | undefined) =>
      overSocket(
        socketPath,
        "POST",
        "/api/task/tm0000000001/close",
        { host: "localhost:8080", cookie, "content-type": "application/json", ...(origin ? { origin } : {}) },
        "{}",
      );
    assert.equal((await post("http://localhost:3000")).status, 403);
    assert.equal((await post("http://evil.example")).status, 403);
    assert.equal((await post(undefined)).status, 403);
    assert.equal((await post("http://localhost:8080")).status, 200);
    const latency = JSON.parse(
      (await overSocket(socketPath, "GET", "/api/latency", { host: "localhost:8080", cookie })).body,
    ) as {
      bucketMs: number;
      buckets: { count: number }[];
    };
    assert.equal(latency.bucketMs, 300_000);
    assert.equal(latency.buckets[0]!.count, 2);
  } finally {
    await sock.close();
  }
  assert.ok(!existsSync(socketPath), "the socket is removed when the board closes");
  rmSync(sockHome, { recursive: true, force: true });
});

test("board.socket in a folder others may enter is refused by name; a file that is not a socket is not replaced", async () => {
  const sockHome = mkdtempSync(join(tmpdir(), "dsh-board-sock-"));
  await ensureBoardToken(sockHome);
  const open = join(sockHome, "open");
  mkdirSync(open, { mode: 0o755 });
  chmodSync(open, 0o755);
  const actions = new BoardActions({
    mayActOnOwnerTasks: () => false,
    schemas,
    handlers: {} as unknown as Handlers,
  });
  await assert.rejects(
    startBoard({ home: sockHome, port: 0, socket: join(open, "b.sock"), actions, log }),
    /open to others \(mode 755\): `chmod 700/,
  );
  const file = join(sockHome, "not-a-socket");
  writeFileSync(file, "keep me");
  await assert.rejects(startBoard({ home: sockHome, port: 0, socket: file, actions, log }), /not a socket/);
  assert.equal(readFileSync(file, "utf8"), "keep me");
  rmSync(sockHome, { recursive: true, force: true });
});

test("the board checks its calls with the daemon's schemas (one instance: the schema files are read once per start)", async () => {
  const h = mkdtempSync(join(tmpdir(), "dsh-board-schemas-"));
  const checked: string[] = [];
  class Counting extends ProtocolSchemas {
    override checkParams(method: RequestMethod, params: unknown): void {
      checked.push(method);
      super.checkParams(method, params);
    }
  }
  const b = (await startDaemonBoard({
    home: h,
    schemas: new Counting(),
    config: () => ({}) as Config,
    log,
    handlers: { "task.list": () => ({ tasks: [] }) } as unknown as Handlers,
  }))!;
  try {
    const t = readFileSync(boardTokenPath(h), "utf8").trim();
    const res = await fetch(`http://127.0.0.1:${b.port}/api/tasks`, { headers: { cookie: `dsh_board=${t}` } });
    assert.equal(res.status, 200);
    assert.deepEqual(checked, ["task.list"], "the page's list was checked by the schemas handed in");
  } finally {
    await b.close();
    rmSync(h, { recursive: true, force: true });
  }
});
