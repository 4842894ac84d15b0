import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createConnection } from "node:net";
import { startSocketServer, type Connection, type Handler } from "../../src/daemon/server/server.js";
import { ProtocolSchemas } from "../../src/protocol/schemas.js";
import type { PushParams } from "../../src/protocol/methods.js";
import { connect } from "../../src/client/index.js";
import { DshError } from "../../src/core/errors.js";

const silent = { info() {}, warn() {}, error() {}, debug() {} };

async function withServer(fn: (sock: string, pushes: Connection[]) => Promise<void>) {
  const dir = mkdtempSync(join(tmpdir(), "dsh-srv-"));
  const sock = join(dir, "daemon.sock");
  const conns: Connection[] = [];
  const server = await startSocketServer({
    socketPath: sock,
    schemas: new ProtocolSchemas(),
    version: "0.0.0-test",
    log: silent,
    authenticateChild: (taskId, token) => taskId === "tabcdefghijk" && token === "secret",
    handlers: {
      "task.get": (p: { taskId: string }) => {
        throw new DshError("TASK_NOT_FOUND", `no task ${p.taskId}; list tasks with dsh-herdr list`);
      },
      "task.subscribe": (_p, conn) => {
        conns.push(conn);
        return { subscribed: true };
      },
      "child.event": (_p, conn) => {
        assert.equal(conn.taskId, "tabcdefghijk");
        return { ok: true };
      },
      // A deliberately invalid result: the server's check catches it (the type would not let a real handler).
      "daemon.stop": (() => ({ stopping: false })) as unknown as Handler<"daemon.stop">,
    },
  });
  try {
    await fn(sock, conns);
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Raw socket: write bytes, collect reply lines. */
async function raw(sock: string, payload: string | Buffer, expectLines: number): Promise<any[]> {
  return await new Promise((resolve, reject) => {
    const s = createConnection(sock);
    let buf = "";
    const timer = setTimeout(() => reject(new Error(`timeout; got ${buf}`)), 5000);
    s.on("data", (d) => {
      buf += d;
      const lines = buf.split("\n").filter(Boolean);
      if (lines.length >= expectLines) {
        clearTimeout(timer);
        s.destroy();
        resolve(lines.map((l) => JSON.parse(l)));
      }
    });
    s.write(payload);
  });
}

test("socket is 0600 and bad frames get error replies while the connection lives on", async () => {
  await withServer(async (sock) => {
    assert.equal(statSync(sock).mode & 0o777, 0o600);
    const big = Buffer.alloc(1024 * 1024 + 10, 0x61);
    const replies = await raw(
      sock,
      Buffer.concat([
        Buffer.from('not json\n[1,2]\n{"method":"hello"}\n'),
        big,
        Buffer.from('\n{"id":1,"method":"nope.x"}\n{"id":2,"method":"task.get","params":{"taskId":"tabcdefghijk"}}\n'),
        Buffer.from(
          '{"id":3,"method":"hello","params":{"kind":"robot"}}\n{"id":4,"method":"hello","params":{"kind":"cli"}}\n',
        ),
        Buffer.from('{"id":5,"method":"task.get","params":{"taskId":"tabcdefghijk"}}\n'),
      ]),
      9,
    );
    // Frames without a usable id are answered in order with id null; the rest are matched by id.
    assert.deepEqual(
      replies.slice(0, 4).map((r) => [r.id, r.error.code]),
      [
        [null, "BAD_REQUEST"], // not json
        [null, "BAD_REQUEST"], // array
        [null, "BAD_REQUEST"], // no id
        [null, "FRAME_TOO_LARGE"],
      ],
    );
    const byId = new Map(replies.slice(4).map((r) => [r.id, r]));
    assert.equal(byId.get(1).error.code, "UNKNOWN_METHOD");
    assert.equal(byId.get(2).error.code, "UNAUTHORIZED");
    assert.equal(byId.get(3).error.code, "BAD_PARAMS");
    assert.equal(byId.get(4).result.protocol, 2);
    assert.equal(byId.get(5).error.code, "TASK_NOT_FOUND");
    assert.match(replies[0].error.message, /one JSON object per line/);
    assert.match(replies[3].error.message, /1 MiB/);
    assert.match(byId.get(3).error.message, /params\.kind|params/);
    assert.match(byId.get(2).error.message, /hello/);
  });
});

test("client: typed errors, params validation names the field, pushes, invalid result is caught", async () => {
  await withServer(async (sock, conns) => {
    const c = await connect(sock, { kind: "cli" });
    await assert.rejects(
      c.request("task.get", { taskId: "BAD" }),
      (e: DshError) => e.code === "BAD_PARAMS" && /params\.taskId/.test(e.message),
    );
    await assert.rejects(
      c.requestUnchecked("task.get", { taskId: "tabcdefghijk", x: 1 }),
      (e: DshError) => e.code === "BAD_PARAMS" && /unknown field "x"/.test(e.message),
    );
    await assert.rejects(
      c.request("task.get", { taskId: "tabcdefghijk" }),
      (e: DshError) => e.code === "TASK_NOT_FOUND",
    );
    await assert.rejects(c.request("child.event", { type: "agent_start" }), (e: DshError) => e.code === "FORBIDDEN");
    await assert.rejects(
      c.request("daemon.stop"),
      (e: DshError) => e.code === "INTERNAL" && /invalid result/.test(e.message),
    );
    await assert.rejects(c.request("hello", { kind: "cli" }), (e: DshError) => e.code === "BAD_STATE");
    const got = new Promise((resolve) => c.onPush("task.status", resolve));
    await c.request("task.subscribe", {});
    // A push cut to what the test reads (pushes are not schema-checked on the way out).
    conns[0]!.push("task.status", { taskId: "tabcdefghijk", status: "running" } as PushParams<"task.status">);
    assert.deepEqual(await got, { taskId: "tabcdefghijk", status: "running" });
    c.close();
  });
});

test("a BAD_PARAMS crosses the socket as {code, message, data}: the client gets its data, the CLI names its flag from it", async () => {
  await withServer(async (sock) => {
    // The wire itself: the error reply carries data beside code and message.
    const [reply] = await raw(
      sock,
      JSON.stringify({ id: 1, method: "hello", params: { kind: "cli" } }) +
        "\n" +
        JSON.stringify({ id: 2, method: "task.spawn", params: { cwd: "/tmp", prompt: "p", timeoutMs: 10 } }) +
        "\n",
      2,
    ).then((r) => r.filter((m) => m.id === 2));
    assert.equal(reply.error.code, "BAD_PARAMS");
    assert.deepEqual(reply.error.data, {
      method: "task.spawn",
      path: "params.timeoutMs",
      field: "timeoutMs",
      problem: "must be >= 1000",
    });
    // The client rebuilds the DshError with that data as its details.
    const c = await connect(sock, { kind: "cli" });
    const err: DshError = await c.requestUnchecked("task.spawn", { cwd: "/tmp", prompt: "p", timeoutMs: 10 }).then(
      () => assert.fail("accepted"),
      (e: DshError) => e,
    );
    c.close();
    assert.equal(err.code, "BAD_PARAMS");
    assert.equal(err.details?.["field"], "timeoutMs");
    // The CLI reads the field from the data, not from the words.
    const { inCliWords } = await import("../../src/cli/main.js");
    assert.equal(inCliWords(err).message, "--timeout must be at least 1000 ms; see `dsh-herdr <command> --help`");
    const reworded = new DshError("BAD_PARAMS", "reworded by a newer daemon", err.details);
    assert.equal(inCliWords(reworded).message, "--timeout must be at least 1000 ms; see `dsh-herdr <command> --help`");
  });
});

test("child hello: wrong token is UNAUTHORIZED; a child may call only child.* for its own task", async () => {
  await withServer(async (sock) => {
    await assert.rejects(
      connect(sock, { kind: "child", taskId: "tabcdefghijk", token: "wrong" }),
      (e: DshError) => e.code === "UNAUTHORIZED" && /DSH_HERDR_TASK_TOKEN/.test(e.message),
    );
    const child = await connect(sock, { kind: "child", taskId: "tabcdefghijk", token: "secret" });
    assert.deepEqual(await child.request("child.event", { type: "agent_start" }), { ok: true });
    await assert.rejects(
      child.request("task.get", { taskId: "tabcdefghijk" }),
      (e: DshError) => e.code === "FORBIDDEN",
    );
    child.close();
  });
});

test("client: unreachable socket is DAEMON_UNAVAILABLE naming the start command", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-srv-"));
  try {
    await assert.rejects(
      connect(dir, { kind: "cli" }),
      (e: DshError) => e.code === "DAEMON_UNAVAILABLE" && /daemon start/.test(e.message),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
