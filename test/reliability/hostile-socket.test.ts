// Hostile socket input against a real daemon process: every bad frame gets an error reply naming the problem, and
// the same connection and the daemon keep serving. Also 500 connections at once and a one-byte-per-second client.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "../../src/client/index.js";
import { rawConnect, sleep, startDaemonProc, type DaemonProc, type RawConn } from "./proc-harness.js";

let dir: string;
let home: string;
let d: DaemonProc;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "dsh-hostile-"));
  home = join(dir, "home");
  d = await startDaemonProc(home, {}, { config: { enabled: false } });
});
after(async () => {
  d.proc.kill("SIGTERM");
  await d.exited;
  rmSync(dir, { recursive: true, force: true });
});

const sock = () => join(home, "daemon.sock");

async function helloed(): Promise<RawConn> {
  const c = await rawConnect(sock());
  c.send(JSON.stringify({ id: 0, method: "hello", params: { kind: "cli" } }) + "\n");
  assert.equal((await c.next()).result.kind, "cli");
  return c;
}

async function stillServes(c: RawConn): Promise<void> {
  c.send(JSON.stringify({ id: "ok?", method: "daemon.status", params: {} }) + "\n");
  const r = await c.next();
  assert.equal(r.id, "ok?");
  assert.equal(r.result.pid, d.pid);
}

const cases: { name: string; frame: string | Buffer; code: string; message: RegExp }[] = [
  { name: "not JSON", frame: "hello there\n", code: "BAD_REQUEST", message: /not valid JSON/ },
  { name: "truncated JSON", frame: '{"id":1,"method":"daemon.st\n', code: "BAD_REQUEST", message: /not valid JSON/ },
  {
    name: "not UTF-8",
    frame: Buffer.concat([
      Buffer.from('{"id":1,"method":"task.get","params":{"taskId":"t'),
      Buffer.from([0xff, 0xfe, 0xc3]),
      Buffer.from('"}}\n'),
    ]),
    code: "BAD_REQUEST",
    message: /not valid UTF-8/,
  },
  {
    name: "over 1 MiB",
    frame:
      JSON.stringify({
        id: 1,
        method: "task.respond",
        params: { taskId: "tabcdefghijk", message: "x".repeat(1024 * 1024) },
      }) + "\n",
    code: "FRAME_TOO_LARGE",
    message: /1 MiB/,
  },
  {
    name: "deeply nested",
    frame: '{"id":1,"method":"task.list","params":{"x":' + "[".repeat(100_000) + "]".repeat(100_000) + "}}\n",
    code: "BAD_REQUEST",
    message: /nests deeper than 64/,
  },
  { name: "a JSON array", frame: "[1,2,3]\n", code: "BAD_REQUEST", message: /JSON object/ },
  { name: "no id", frame: '{"method":"daemon.status"}\n', code: "BAD_REQUEST", message: /needs an id/ },
  {
    name: "id of a wrong type",
    frame: '{"id":{"a":1},"method":"daemon.status"}\n',
    code: "BAD_REQUEST",
    message: /needs an id/,
  },
  {
    name: "unknown method",
    frame: '{"id":7,"method":"task.explode","params":{}}\n',
    code: "UNKNOWN_METHOD",
    message: /socket-protocol/,
  },
  {
    name: "method of a wrong type",
    frame: '{"id":7,"method":42}\n',
    code: "UNKNOWN_METHOD",
    message: /unknown method/,
  },
  {
    name: "params of a wrong type",
    frame: '{"id":8,"method":"task.get","params":"tabcdefghijk"}\n',
    code: "BAD_PARAMS",
    message: /params must be object/,
  },
  {
    name: "field of a wrong type",
    frame: '{"id":9,"method":"task.wait","params":{"taskIds":"tabcdefghijk"}}\n',
    code: "BAD_PARAMS",
    message: /params\.taskIds must be array/,
  },
  {
    name: "unknown field",
    frame: '{"id":10,"method":"task.get","params":{"taskId":"tabcdefghijk","sudo":true}}\n',
    code: "BAD_PARAMS",
    message: /unknown field "sudo"/,
  },
  {
    name: "task id with path separators",
    frame: '{"id":11,"method":"task.get","params":{"taskId":"../../etc/passwd"}}\n',
    code: "BAD_PARAMS",
    message: /params\.taskId/,
  },
  {
    name: "child method from a cli",
    frame: '{"id":12,"method":"child.event","params":{"type":"agent_end"}}\n',
    code: "FORBIDDEN",
    message: /child connections only/,
  },
  {
    name: "second hello",
    frame: '{"id":13,"method":"hello","params":{"kind":"child","taskId":"tabcdefghijk","token":"x"}}\n',
    code: "BAD_STATE",
    message: /already sent/,
  },
  {
    name: "spawn while disabled",
    frame: '{"id":14,"method":"task.spawn","params":{"cwd":"/","prompt":"hi"}}\n',
    code: "SPAWN_REFUSED",
    message: /enabled/,
  },
];

for (const c of cases) {
  test(`hostile frame: ${c.name} → ${c.code}, and the connection serves on`, async () => {
    const conn = await helloed();
    try {
      conn.send(c.frame);
      const r = await conn.next();
      assert.equal(r.error?.code, c.code, JSON.stringify(r));
      assert.match(r.error.message, c.message);
      await stillServes(conn);
    } finally {
      conn.close();
    }
  });
}

test("hostile hello: a child with a made-up token is UNAUTHORIZED; methods before hello are UNAUTHORIZED", async () => {
  const c = await rawConnect(sock());
  try {
    c.send('{"id":1,"method":"task.list","params":{}}\n');
    assert.equal((await c.next()).error.code, "UNAUTHORIZED");
    c.send('{"id":2,"method":"hello","params":{"kind":"child","taskId":"tabcdefghijk","token":"guess"}}\n');
    const r = await c.next();
    assert.equal(r.error.code, "UNAUTHORIZED");
    assert.match(r.error.message, /DSH_HERDR_TASK_TOKEN/);
  } finally {
    c.close();
  }
});

test("500 connections at once: every one is answered and a well-formed client still works", async () => {
  const conns = await Promise.all(Array.from({ length: 500 }, () => rawConnect(sock())));
  try {
    conns.forEach((c, i) =>
      c.send(
        JSON.stringify({ id: i, method: "hello", params: { kind: "cli" } }) +
          "\n" +
          JSON.stringify({ id: `s${i}`, method: "daemon.status" }) +
          "\n",
      ),
    );
    const replies = await Promise.all(conns.map(async (c) => [await c.next(20_000), await c.next(20_000)]));
    assert.ok(replies.every(([h, s]) => h.result?.kind === "cli" && s.result?.pid === d.pid));
    const cli = await connect(home, { kind: "cli" });
    assert.equal((await cli.request("daemon.status")).pid, d.pid);
    cli.close();
  } finally {
    for (const c of conns) c.close();
  }
});

test("a client sending one byte per second holds nobody up; its frame is answered when complete", async () => {
  const slow = await helloed();
  const frame = '{"id":"slow","method":"daemon.status"}\n';
  const cli = await connect(home, { kind: "cli" });
  try {
    // Dribble the first bytes one per second while a normal client does its work.
    for (let i = 0; i < 4; i++) {
      slow.send(frame[i]!);
      // A server that waited for the slow client's frame would never answer: bound the wait generously.
      const answered = await Promise.race([
        cli.request("task.list", {}).then(() => true),
        sleep(10_000).then(() => false),
      ]);
      assert.ok(answered, "a normal request is not held up by the slow client");
      await sleep(1000);
    }
    assert.equal(slow.queued, 0, "no reply to half a frame");
    slow.send(frame.slice(4));
    assert.equal((await slow.next()).id, "slow");
  } finally {
    cli.close();
    slow.close();
  }
});
