// The board's HTTP server: node:http with a small router. The board has a dozen routes, no templates and no
// middleware chain; a framework would add a dependency tree to the daemon for less than this file, and the checks that
// matter here (token, Host, Origin) are clearer written out than configured.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { chmod, lstat, mkdir, readFile, realpath, stat, unlink, writeFile } from "node:fs/promises";
import { dirname, join, sep } from "node:path";
import { LATENCY_BUCKET_MS, type LatencyBucket } from "../core/status-latency.js";
import { DshError } from "../core/errors.js";
import { isValidTaskId } from "../core/ids.js";
import type { AgentResult } from "../core/types.js";
import type { Logger } from "../core/logger.js";
import { ASSETS, readAsset, readPage } from "./assets.js";
import type { BoardActions, LandStrategy } from "./actions.js";
import { cardOf, type Card } from "./cards.js";
import { boardAddressPath, BoardToken } from "./token.js";
import { usageReport } from "../core/budget.js";
import { localDay } from "../store/usage-day.js";

export interface BoardOptions {
  home: string;
  port: number;
  /** Serve on this Unix socket instead of 127.0.0.1 (for `ssh -L` from a laptop); its folder must be 0700. */
  socket?: string;
  actions: BoardActions;
  /** The daemon's status latency of the last hour (src/daemon/delivery/status-latency.ts), for /api/latency. */
  latency?: () => LatencyBucket[];
  log: Logger;
  /** At most this many live event streams at once (one per open page); one more is refused 503. */
  maxClients?: number;
  /** Bytes a slow stream may hold unsent before it is closed (the page reconnects and reloads the board). */
  maxUnsentBytes?: number;
}

export interface BoardServer {
  /** http://127.0.0.1:PORT/ (no token); on a socket, http://localhost:LOCALPORT/ as `ssh -L` forwards it. */
  url: string;
  /** The TCP port; 0 on a socket. */
  port: number;
  socket?: string;
  close(): Promise<void>;
}

const COOKIE = "dsh_board";
const BODY_MAX = 256 * 1024;
const LOG_MAX = 512 * 1024;
const LIST_LIMIT = 1000;
const STRATEGIES = new Set<LandStrategy>(["auto", "merge", "squash", "rebase"]);
/** Loopback names with any port: the Host a board forwarded by `ssh -L` from a socket may be reached by. */
const SOCKET_HOST = /^(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?$/;
/** The laptop port the printed `ssh -L` line uses (any free one works: the Host check takes any port). */
export const FORWARD_PORT = 8080;
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** A refusal of the board's own (not a daemon error): status and message. */
class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export async function startBoard(opts: BoardOptions): Promise<BoardServer> {
  const token = new BoardToken(opts.home);
  const streams = new Set<ServerResponse>();
  const maxClients = opts.maxClients ?? 32;
  const maxUnsent = opts.maxUnsentBytes ?? 4 * 1024 * 1024;
  let port = 0;
  const hosts = () => new Set([`127.0.0.1:${port}`, `localhost:${port}`]);
  // On a socket the port is the laptop's end of `ssh -L`, unknown here: any port, but only a loopback name, which a
  // page of another site cannot make a browser send (its Host is its own name, whatever that resolves to).
  const hostOk = (host: string) => (opts.socket ? SOCKET_HOST.test(host) : hosts().has(host));

  const server: Server = createServer((req, res) => {
    void route(req, res).catch((e: unknown) => fail(res, e));
  });

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // DNS rebinding: a page of another site resolved to 127.0.0.1 still sends its own name as Host.
    const host = req.headers.host ?? "";
    if (!hostOk(host)) throw new Refusal(421, "wrong Host: open the board by the URL `dsh-herdr board` prints");
    const url = new URL(req.url ?? "/", `http://${host}`);
    const path = url.pathname;
    if (req.method === "GET" && path === "/" && url.searchParams.has("token")) {
      if (!token.matches(url.searchParams.get("token") ?? undefined))
        throw new Refusal(401, "this board link is no longer valid: run `dsh-herdr board` for the current one");
      // The token leaves the address bar (and history) at once; the cookie carries it from here.
      res.writeHead(303, {
        location: "/",
        "set-cookie": `${COOKIE}=${token.current()}; HttpOnly; SameSite=Strict; Path=/`,
        "cache-control": "no-store",
        "referrer-policy": "no-referrer",
      });
      res.end();
      return;
    }
    if (!token.matches(cookieOf(req)))
      throw new Refusal(401, "not signed in: open the board by the URL `dsh-herdr board` prints");
    if (req.method === "POST") {
      // Anything that changes state: only from the board's own page (a cross-site form or fetch names its origin).
      const origin = req.headers.origin;
      if (origin !== `http://${host}`) throw new Refusal(403, "cross-origin request refused");
      if (!String(req.headers["content-type"] ?? "").startsWith("application/json"))
        throw new Refusal(415, "send JSON");
      return post(req, res, path);
    }
    if (req.method !== "GET") throw new Refusal(405, "method not allowed");
    if (path === "/") return send(res, 200, await readPage(), "text/html; charset=utf-8");
    if (path.startsWith("/assets/")) {
      const a = await readAsset(path.slice("/assets/".length));
      if (!a) throw new Refusal(404, "no such file");
      return send(res, 200, a.body, a.type, "private, max-age=300");
    }
    if (path === "/api/tasks") return json(res, { cards: await cards() });
    if (path === "/api/events") return stream(req, res);
    if (path === "/api/usage") return json(res, await usage());
    if (path === "/api/latency") return json(res, { bucketMs: LATENCY_BUCKET_MS, buckets: opts.latency?.() ?? [] });
    const m = /^\/api\/task\/([^/]+)(?:\/(patch|checks\/(\d{1,3})\/log))?$/.exec(path);
    if (m) {
      const taskId = taskIdOf(m[1]!);
      if (m[2] === "patch") return json(res, await opts.actions.patch(taskId));
      if (m[3] !== undefined) return send(res, 200, await checkLog(taskId, Number(m[3])), "text/plain; charset=utf-8");
      const result = await opts.actions.get(taskId);
      return json(res, { result, mayAct: opts.actions.mayAct(result.owner) });
    }
    throw new Refusal(404, "no such page");
  }

  async function post(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const m = /^\/api\/task\/([^/]+)\/(land|check|close|abort|respond)$/.exec(path);
    if (!m) throw new Refusal(404, "no such action");
    const taskId = taskIdOf(m[1]!);
    const body = await readBody(req);
    const a = opts.actions;
    switch (m[2]) {
      case "land": {
        const strategy = body.strategy;
        if (strategy !== undefined && !STRATEGIES.has(strategy as LandStrategy))
          throw new DshError(
            "BAD_PARAMS",
            `strategy ${JSON.stringify(strategy)}: one of ${[...STRATEGIES].join(", ")}`,
          );
        return json(
          res,
          await a.land(taskId, {
            ...(strategy ? { strategy: strategy as LandStrategy } : {}),
            check: body.check === true,
          }),
        );
      }
      case "check":
        return json(res, await a.check(taskId));
      case "close":
        return json(res, await a.close(taskId));
      case "abort":
        return json(res, await a.abort(taskId));
      default: {
        const message = body.message;
        if (typeof message !== "string" || message.trim() === "" || message.length > 100_000)
          throw new DshError("BAD_PARAMS", "a follow-up needs a message (1 to 100,000 characters)");
        return json(res, await a.respond(taskId, message, body.steer === true));
      }
    }
  }

  async function cards(): Promise<Card[]> {
    const rows = (await opts.actions.list(LIST_LIMIT)) as unknown as AgentResult[];
    // Open tasks: their whole live result (warnings name sibling conflicts); closed ones: the listing row.
    return Promise.all(
      rows.map(async (r) => {
        const full = r.status === "closed" ? r : await opts.actions.get(r.taskId).catch(() => r);
        return cardOf(full, (o) => opts.actions.mayAct(o));
      }),
    );
  }

  /** Cost and tokens per local day (the last 14 with tasks) and the costliest tasks, of the newest 1,000 tasks. */
  async function usage() {
    const rows = (await opts.actions.list(LIST_LIMIT)) as unknown as AgentResult[];
    const report = usageReport(
      rows.map((r) => ({
        taskId: r.taskId,
        owner: "all",
        createdAt: r.timing.createdAt,
        ...(r.usage ? { usage: r.usage } : {}),
      })),
      localDay,
    );
    const tokens = (u: AgentResult["usage"]) =>
      u ? u.outputTokens + (u.inputTokens ?? 0) + (u.cacheReadTokens ?? 0) + (u.cacheWriteTokens ?? 0) : 0;
    const tasks = rows
      .filter((r) => r.usage)
      .map((r) => ({ taskId: r.taskId, agent: r.agent.name, cost: r.usage?.cost ?? 0, tokens: tokens(r.usage) }))
      .sort((a, b) => b.cost - a.cost || b.tokens - a.tokens)
      .slice(0, 10);
    const days = report.days.slice(0, 14).map((d) => ({
      day: d.day,
      tasks: d.tasks,
      cost: d.cost,
      tokens: d.outputTokens + d.inputTokens + d.cacheReadTokens + d.cacheWriteTokens,
    }));
    return { days, tasks, total: report.total };
  }

  /** A check's whole log: the path is the daemon's own receipt's, and must lie in the task's directory. */
  async function checkLog(taskId: string, n: number): Promise<string> {
    const r = await opts.actions.get(taskId);
    const receipt = r.checks?.[n];
    if (!receipt) throw new Refusal(404, `task ${taskId} has no check ${n}`);
    const dir = await realpath(join(opts.home, "tasks", taskId));
    const file = await realpath(receipt.logPath).catch(() => undefined);
    if (!file?.startsWith(dir + sep)) throw new Refusal(404, "that check's log is not in its task directory");
    const text = await readFile(file, "utf8");
    return text.length > LOG_MAX
      ? `… (first ${text.length - LOG_MAX} characters left out)\n${text.slice(-LOG_MAX)}`
      : text;
  }

  function stream(req: IncomingMessage, res: ServerResponse): void {
    if (streams.size >= maxClients)
      throw new Refusal(503, `the board already serves ${maxClients} live pages; close one and reload`);
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      connection: "keep-alive",
    });
    // The page reloads the whole board on every (re)connect, so it never misses what happened while it was away.
    res.write("retry: 1000\n\nevent: hello\ndata: {}\n\n");
    streams.add(res);
    const off = opts.actions.subscribe((result) => {
      const data = `event: card\ndata: ${JSON.stringify(cardOf(result, (o) => opts.actions.mayAct(o)))}\n\n`;
      // Bounded: a page that does not read is cut off rather than buffered without end (it reconnects).
      if (res.writableLength > maxUnsent) return end();
      res.write(data);
    });
    const ping = setInterval(() => res.write(": ping\n\n"), 25_000);
    ping.unref();
    function end() {
      off();
      clearInterval(ping);
      streams.delete(res);
      res.end();
    }
    req.on("close", end);
  }

  function fail(res: ServerResponse, e: unknown): void {
    if (res.headersSent) return void res.end();
    if (e instanceof Refusal) return send(res, e.status, `${e.message}\n`, "text/plain; charset=utf-8");
    if (e instanceof DshError) {
      const status =
        e.code === "TASK_NOT_FOUND"
          ? 404
          : e.code === "BAD_PARAMS"
            ? 400
            : e.code === "FORBIDDEN" || e.code === "NOT_OWNER"
              ? 403
              : e.code === "INTERNAL"
                ? 500
                : 409;
      return json(res, { error: { code: e.code, message: e.message } }, status);
    }
    opts.log.warn({ err: (e as Error)?.message }, "board request failed");
    json(res, { error: { code: "INTERNAL", message: String((e as Error)?.message ?? e) } }, 500);
  }

  let url: string;
  if (opts.socket) {
    await listenOnSocket(server, opts.socket);
    url = `http://localhost:${FORWARD_PORT}/`;
  } else {
    port = await listen(server, opts.port, opts.home);
    url = `http://127.0.0.1:${port}/`;
  }
  const address = { url, port, ...(opts.socket ? { socket: opts.socket } : {}), pid: process.pid };
  await writeFile(boardAddressPath(opts.home), `${JSON.stringify(address)}\n`, { mode: 0o600 });
  opts.log.info(opts.socket ? { socket: opts.socket } : { port }, "board serving");
  return {
    url,
    port,
    ...(opts.socket ? { socket: opts.socket } : {}),
    async close() {
      for (const s of streams) s.end();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      if (opts.socket) await unlink(opts.socket).catch(() => undefined);
    },
  };
}

/**
 * Listens on 127.0.0.1: the configured port, or (port 0) the one the last daemon used, so an open page reconnects
 * to a restarted daemon; any free port when that one is taken.
 */
async function listen(server: Server, port: number, home: string): Promise<number> {
  const tryPort = (p: number) =>
    new Promise<number>((resolve, reject) => {
      const onError = (e: Error) => reject(e);
      server.once("error", onError);
      server.listen(p, "127.0.0.1", () => {
        server.off("error", onError);
        resolve((server.address() as { port: number }).port);
      });
    });
  if (port !== 0) return tryPort(port);
  const last = await readFile(boardAddressPath(home), "utf8")
    .then((t) => (JSON.parse(t) as { port?: unknown }).port)
    .catch(() => undefined);
  if (typeof last === "number" && Number.isInteger(last) && last > 0 && last < 65536) {
    try {
      return await tryPort(last);
    } catch {
      /* taken: any free one */
    }
  }
  return tryPort(0);
}

/**
 * Listens on a Unix socket in a folder only the user may enter (0700, made so when missing), owner-only (0600) from
 * the first moment; a stale socket of a previous daemon is replaced, any other file at the path is refused.
 */
async function listenOnSocket(server: Server, socket: string): Promise<void> {
  // sockaddr_un holds about 104 bytes (macOS) to 108 (Linux): a longer path cannot be listened on at all.
  if (Buffer.byteLength(socket) > 103)
    throw new DshError("CONFIG_INVALID", `board.socket ${socket} is too long for a Unix socket: choose a shorter path`);
  const dir = dirname(socket);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const d = await stat(dir);
  if (process.getuid && d.uid !== process.getuid())
    throw new DshError("CONFIG_INVALID", `board.socket's folder ${dir} is not yours: choose a folder of your own`);
  if ((d.mode & 0o077) !== 0)
    throw new DshError(
      "CONFIG_INVALID",
      `board.socket's folder ${dir} is open to others (mode ${(d.mode & 0o777).toString(8)}): \`chmod 700 ${dir}\` or choose another folder`,
    );
  const old = await lstat(socket).catch(() => undefined);
  if (old && !old.isSocket())
    throw new DshError(
      "CONFIG_INVALID",
      `board.socket ${socket} is a file that is not a socket: remove it or choose another path`,
    );
  if (old) await unlink(socket);
  const oldUmask = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(socket, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } finally {
    process.umask(oldUmask);
  }
  await chmod(socket, 0o600);
}

function taskIdOf(s: string): string {
  const id = decodeURIComponent(s);
  if (!isValidTaskId(id)) throw new Refusal(404, "no such task");
  return id;
}

function cookieOf(req: IncomingMessage): string | undefined {
  for (const part of (req.headers.cookie ?? "").split(";")) {
    const [k, v] = part.trim().split("=");
    if (k === COOKIE) return v;
  }
  return undefined;
}

async function readBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > BODY_MAX) throw new Refusal(413, "request too large");
    chunks.push(c as Buffer);
  }
  try {
    const v = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as unknown;
    if (v && typeof v === "object" && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    /* below */
  }
  throw new Refusal(400, "the body must be a JSON object");
}

function headers(type: string, cache = "no-store"): Record<string, string> {
  return {
    "content-type": type,
    "cache-control": cache,
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-resource-policy": "same-origin",
  };
}

function send(res: ServerResponse, status: number, body: string | Buffer, type: string, cache?: string): void {
  res.writeHead(status, headers(type, cache));
  res.end(body);
}

function json(res: ServerResponse, v: unknown, status = 200): void {
  send(res, status, JSON.stringify(v), "application/json; charset=utf-8");
}

export { ASSETS };
