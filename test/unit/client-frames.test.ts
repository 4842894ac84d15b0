// Frames (issue 28 §2): one limit on both sides; replies and pushes over it go by reference (frame.page) to a client
// of protocol 2; a frame either side refuses is answered or logged by name (FRAME_TOO_LARGE), never dropped without a
// word; the client surfaces an error that names no request at once instead of timing out.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { connect, MAX_FRAME_BYTES } from "../../src/client/index.js";
import type { DshError } from "../../src/core/errors.js";
import { ProtocolSchemas } from "../../src/protocol/schemas.js";
import { startSocketServer, type Connection } from "../../src/daemon/server/server.js";
import type { AgentResult } from "../../src/core/types.js";

type Logged = { level: string; obj: Record<string, unknown>; msg?: string };
function logger() {
  const lines: Logged[] = [];
  const at = (level: string) => (obj: object, msg?: string) => void lines.push({ level, obj: obj as never, msg });
  return { lines, log: { info: at("info"), warn: at("warn"), error: at("error"), debug: at("debug") } };
}

function tmpSock(): { dir: string; sock: string } {
  const dir = mkdtempSync(join(tmpdir(), "dsh-frames-"));
  return { dir, sock: join(dir, "d.sock") };
}

/** A fake daemon: answers hello, then lets the test script the rest of the conversation. */
async function fakeDaemon(onRequest: (msg: { id: number; method: string }, s: Socket) => void) {
  const { dir, sock } = tmpSock();
  const got: { id: number; method: string }[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((s) => {
    sockets.add(s);
    let buf = "";
    s.on("data", (d) => {
      buf += d;
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        const msg = JSON.parse(buf.slice(0, i)) as { id: number; method: string };
        buf = buf.slice(i + 1);
        got.push(msg);
        if (msg.method === "hello")
          s.write(
            `${JSON.stringify({ id: msg.id, result: { daemonVersion: "0", protocol: 1, pid: 1, kind: "cli" } })}\n`,
          );
        else onRequest(msg, s);
      }
    });
  });
  await new Promise<void>((r) => server.listen(sock, r));
  return {
    sock,
    got,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

test("an error reply without an id fails the waiting request at once (before: ignored, a 30 s TIMEOUT)", async () => {
  const d = await fakeDaemon((_m, s) =>
    s.write(
      `${JSON.stringify({ id: null, error: { code: "FRAME_TOO_LARGE", message: "frame of 1500000+ bytes is over the 1 MiB frame limit" } })}\n`,
    ),
  );
  try {
    const c = await connect(d.sock, { kind: "cli", timeoutMs: 20_000 });
    const t0 = Date.now();
    await assert.rejects(
      c.requestUnchecked("task.spawn", { prompt: "x" }),
      (e: DshError) => e.code === "FRAME_TOO_LARGE",
    );
    assert.ok(Date.now() - t0 < 15_000, "not the request's timeout");
    c.close();
  } finally {
    await d.close();
  }
});

test("a request over the frame limit is FRAME_TOO_LARGE at once, naming what to do; nothing of it is sent", async () => {
  const d = await fakeDaemon(() => undefined);
  try {
    const c = await connect(d.sock, { kind: "cli", timeoutMs: 20_000 });
    await assert.rejects(
      c.requestUnchecked("task.spawn", { prompt: "x".repeat(1_500_000) }),
      (e: DshError) => e.code === "FRAME_TOO_LARGE" && /1 MiB/.test(e.message) && /file/.test(e.message),
    );
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(
      d.got.map((m) => m.method),
      ["hello"],
    );
    c.close();
  } finally {
    await d.close();
  }
});

test("a frame from the daemon over the limit: its request fails FRAME_TOO_LARGE; a push is reported by name", async () => {
  const huge = "y".repeat(MAX_FRAME_BYTES + 100);
  const d = await fakeDaemon((m, s) => {
    s.write(`${JSON.stringify({ method: "task.status", params: { taskId: "t", text: huge } })}\n`);
    s.write(`${JSON.stringify({ id: m.id, result: { text: huge } })}\n`);
  });
  try {
    const reported: DshError[] = [];
    const c = await connect(d.sock, { kind: "cli", timeoutMs: 20_000, onProtocolError: (e) => reported.push(e) });
    const t0 = Date.now();
    await assert.rejects(c.request("task.get", { taskId: "t" }), (e: DshError) => e.code === "FRAME_TOO_LARGE");
    assert.ok(Date.now() - t0 < 15_000, "not the request's timeout");
    assert.equal(reported.length, 1, JSON.stringify(reported));
    assert.equal(reported[0]!.code, "FRAME_TOO_LARGE");
    assert.match(reported[0]!.message, /task\.status push/);
    c.close();
  } finally {
    await d.close();
  }
});

/** A real socket server whose task.get answers a big result and whose task.subscribe pushes a big then a small push. */
async function withBigServer(fn: (sock: string, logged: Logged[]) => Promise<void>) {
  const { dir, sock } = tmpSock();
  const { lines, log } = logger();
  const big = "z".repeat(3 * 1024 * 1024) + "é-END";
  const server = await startSocketServer({
    socketPath: sock,
    schemas: new ProtocolSchemas(),
    version: "0.0.0-test",
    log,
    authenticateChild: () => false,
    handlers: {
      // Only what the frames need: the schema's result check asks no more of an AgentResult.
      "task.get": (p) =>
        ({
          schemaVersion: 1,
          taskId: p.taskId,
          status: "completed",
          role: "worker",
          agent: {},
          herdrStatus: "done",
          summary: "s",
          timing: {},
          nextAction: "none",
          finalMessage: big,
        }) as unknown as AgentResult,
      "task.subscribe": (_p, conn: Connection) => {
        setTimeout(() => {
          // Results cut to what the frames test needs (pushes are not schema-checked on the way out).
          const part = (r: object) => r as AgentResult;
          conn.push("task.status", {
            taskId: "tbig00000000",
            status: "completed",
            result: part({ finalMessage: big }),
          });
          conn.push("task.status", { taskId: "tsmall000000", status: "completed", result: part({}) });
        }, 10);
        return { subscribed: true };
      },
    },
  });
  try {
    await fn(sock, lines);
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return big;
}

test("replies and pushes over the limit reach a protocol-2 client whole, by reference, pushes in order", async () => {
  const big = "z".repeat(3 * 1024 * 1024) + "é-END";
  await withBigServer(async (sock) => {
    const c = await connect(sock, { kind: "cli", timeoutMs: 20_000 });
    const r = await c.request("task.get", { taskId: "tabcdefghijk" });
    assert.ok(r.finalMessage === big, `whole (${r.finalMessage?.length} chars)`);
    const order: string[] = [];
    const pushes: { taskId: string; result: { finalMessage?: string } }[] = [];
    c.onPush("task.status", (p: { taskId: string; result: { finalMessage?: string } }) => {
      order.push(p.taskId);
      pushes.push(p);
    });
    await c.request("task.subscribe", {});
    const deadline = Date.now() + 15_000;
    while (order.length < 2 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 20));
    assert.deepEqual(order, ["tbig00000000", "tsmall000000"], "the small push waits behind the big one");
    assert.ok(pushes[0]!.result.finalMessage === big);
    c.close();
  });
});

test("a client of protocol 1 gets FRAME_TOO_LARGE for its big reply; the push it cannot take is logged by name", async () => {
  await withBigServer(async (sock, logged) => {
    const s = createConnection(sock);
    let buf = "";
    type Line = { id?: number; method?: string; params: { taskId: string }; error: { code: string; message: string } };
    const lines: Line[] = [];
    s.on("data", (d) => {
      buf += d;
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        lines.push(JSON.parse(buf.slice(0, i)));
        buf = buf.slice(i + 1);
      }
    });
    s.write(`${JSON.stringify({ id: 1, method: "hello", params: { kind: "cli" } })}\n`);
    s.write(`${JSON.stringify({ id: 2, method: "task.get", params: { taskId: "tabcdefghijk" } })}\n`);
    s.write(`${JSON.stringify({ id: 3, method: "task.subscribe", params: {} })}\n`);
    const deadline = Date.now() + 15_000;
    const until = async (pred: () => boolean) => {
      while (!pred() && Date.now() < deadline) await new Promise((res) => setTimeout(res, 20));
    };
    await until(() => lines.some((l) => l.method === "task.status"));
    const two = lines.find((l) => l.id === 2)!;
    assert.equal(two.error.code, "FRAME_TOO_LARGE");
    assert.match(two.error.message, /protocol 2/);
    assert.deepEqual(
      lines.filter((l) => l.method === "task.status").map((l) => l.params.taskId),
      ["tsmall000000"],
      "the big push is not sent",
    );
    await until(() => logged.filter((l) => l.obj.code === "FRAME_TOO_LARGE").length >= 2);
    const named = logged.filter((l) => l.level === "warn" && l.obj.code === "FRAME_TOO_LARGE").map((l) => l.obj.what);
    assert.deepEqual(named, ["the reply to request 2", "a task.status push"]);
    s.destroy();
  });
});

test("the daemon answers a request over the limit with its id and logs FRAME_TOO_LARGE; the connection lives on", async () => {
  await withBigServer(async (sock, logged) => {
    const c = await connect(sock, { kind: "cli", timeoutMs: 20_000 });
    // Written raw (the client itself refuses to send it): id first, as every client of ours writes it.
    const s = createConnection(sock);
    let buf = "";
    s.on("data", (d) => (buf += d));
    s.write(`${JSON.stringify({ id: 1, method: "hello", params: { kind: "cli", protocol: 2 } })}\n`);
    s.write(`${JSON.stringify({ id: 7, method: "task.spawn", params: { prompt: "p".repeat(1_500_000) } })}\n`);
    s.write(`${JSON.stringify({ id: 8, method: "frame.page", params: { ref: "L99", offset: 0 } })}\n`);
    const deadline = Date.now() + 15_000;
    while (buf.split("\n").length < 4 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 20));
    const replies = buf
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { id: number; error?: { code: string; message: string } });
    const seven = replies.find((r) => r.id === 7)!;
    assert.equal(seven.error?.code, "FRAME_TOO_LARGE");
    assert.match(seven.error!.message, /request 7 is 1\d{6}\+ bytes, over the 1 MiB frame limit/);
    assert.match(seven.error!.message, /file/);
    assert.equal(replies.find((r) => r.id === 8)!.error?.code, "BAD_PARAMS", "an unknown reference is named");
    assert.ok(
      logged.some((l) => l.level === "warn" && l.obj.code === "FRAME_TOO_LARGE" && l.obj.id === 7),
      JSON.stringify(logged),
    );
    assert.equal((await c.request("task.get", { taskId: "tabcdefghijk" })).taskId, "tabcdefghijk");
    s.destroy();
    c.close();
  });
});
