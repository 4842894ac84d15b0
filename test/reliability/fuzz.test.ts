// Property-based fuzz (fast-check) of the socket against a real daemon process: 10,000 generated frames, one in
// flight at a time on a hello'd connection; each must get exactly one reply, a result or an error with a stable
// code and a message. Meanwhile a well-formed client loops over real requests and must see no failure.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { connect } from "../../src/client/index.js";
import { ERROR_CODES } from "../../src/core/errors.js";
import { REQUEST_METHODS } from "../../src/protocol/methods.js";
import { rawConnect, startDaemonProc, type DaemonProc } from "./proc-harness.js";

const RUNS = 10_000;
let dir: string;
let home: string;
let d: DaemonProc;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "dsh-fuzz-"));
  home = join(dir, "home");
  // Spawning disabled: a generated task.spawn that happens to be valid must not start agents.
  d = await startDaemonProc(home, {}, { config: { enabled: false } });
});
after(async () => {
  d.proc.kill("SIGTERM");
  await d.exited;
  rmSync(dir, { recursive: true, force: true });
});

// daemon.stop is the one method whose success ends the run; everything else may be generated.
const methods = REQUEST_METHODS.filter((m) => m !== "daemon.stop");
const fieldNames = [
  "taskId",
  "taskIds",
  "kind",
  "token",
  "ownerId",
  "cwd",
  "prompt",
  "message",
  "status",
  "owner",
  "limit",
  "timeoutMs",
  "mode",
  "all",
  "closePane",
  "type",
  "cycle",
  "outcome",
  "report",
  "external",
  "x",
];
const value = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }),
  fc.constantFrom(
    "tabcdefghijk",
    "../../etc/passwd",
    "/etc/passwd",
    "t",
    "T".repeat(300),
    "",
    "\u0000",
    "cli",
    "child",
    "owner",
  ),
);
const params = fc.oneof(fc.dictionary(fc.constantFrom(...fieldNames), value, { maxKeys: 5 }), value);
const request = fc.record(
  {
    id: fc.oneof(
      { weight: 8, arbitrary: fc.integer() },
      { weight: 1, arbitrary: fc.string({ maxLength: 8 }) },
      { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 1 }) },
    ),
    method: fc.oneof(
      { weight: 8, arbitrary: fc.constantFrom(...methods) },
      { weight: 1, arbitrary: fc.string({ maxLength: 20 }) },
      { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 1 }) },
    ),
    params,
  },
  { requiredKeys: ["id"] },
);
/**
 * A line the daemon skips without a reply, by its own rule (src/protocol/frames.ts): valid UTF-8 that trims to nothing.
 * Trimming the latin1 reading instead let through lines of Unicode spaces (U+202F, a lone BOM), which waited for a
 * reply that never comes (a CI run's "no reply in time").
 */
const utf8 = new TextDecoder("utf-8", { fatal: true });
function blankLine(b: Buffer): boolean {
  try {
    return utf8.decode(b).replace(/\r$/, "").trim() === "";
  } catch {
    return false; // not UTF-8: answered BAD_REQUEST
  }
}
// One line: a generated request, any JSON value, any text, or raw bytes (no newline inside, not blank).
const frame = fc
  .oneof(
    { weight: 6, arbitrary: request.map((r) => Buffer.from(JSON.stringify(r))) },
    { weight: 2, arbitrary: fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v) ?? "null")) },
    {
      weight: 1,
      arbitrary: fc.string({ unit: "binary", minLength: 1, maxLength: 200 }).map((s) => Buffer.from(s, "utf8")),
    },
    { weight: 1, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 200 }).map((a) => Buffer.from(a)) },
  )
  .map((b) => Buffer.from(b.filter((x) => x !== 0x0a)))
  .filter((b) => !blankLine(b));

test(`fuzz: ${RUNS} generated frames each get exactly one reply; a concurrent well-formed client sees no failure`, {
  timeout: 600_000,
}, async () => {
  const fuzz = await rawConnect(join(home, "daemon.sock"));
  fuzz.send(JSON.stringify({ id: "h", method: "hello", params: { kind: "cli" } }) + "\n");
  assert.equal((await fuzz.next()).result.kind, "cli");

  const good = await connect(home, { kind: "cli" });
  let goodOk = 0;
  let fuzzing = true;
  const goodLoop = (async () => {
    while (fuzzing) {
      const st = await good.request("daemon.status");
      assert.equal(st.pid, d.pid);
      assert.deepEqual(await good.request("task.list", {}), { tasks: [] });
      await assert.rejects(
        good.request("task.get", { taskId: "tabcdefghijk" }),
        (e: { code?: string }) => e.code === "TASK_NOT_FOUND",
      );
      goodOk += 3;
    }
  })();

  const codes = new Map<string, number>();
  let results = 0;
  try {
    await fc.assert(
      fc.asyncProperty(frame, async (bytes) => {
        fuzz.send(Buffer.concat([bytes, Buffer.from("\n")]));
        const r = await fuzz.next(10_000);
        assert.equal(typeof r, "object");
        if ("result" in r) {
          results++;
          return;
        }
        assert.ok(
          (ERROR_CODES as readonly string[]).includes(r.error?.code),
          `unknown error code in ${JSON.stringify(r)}`,
        );
        assert.equal(typeof r.error.message, "string");
        assert.ok(r.error.message.length > 10);
        codes.set(r.error.code, (codes.get(r.error.code) ?? 0) + 1);
      }),
      { numRuns: RUNS },
    );
    // Exactly one reply per frame: nothing extra is waiting, and the connection still answers in order.
    assert.equal(fuzz.queued, 0);
    fuzz.send('{"id":"last","method":"daemon.status"}\n');
    assert.equal((await fuzz.next()).id, "last");
  } finally {
    fuzzing = false;
    await goodLoop;
    good.close();
    fuzz.close();
  }
  assert.ok(goodOk > 30, `the well-formed client made progress (${goodOk})`);
  assert.equal(codes.get("INTERNAL") ?? 0, 0, "no frame made the daemon fail internally");
  // The spread shows the generator reaches past the parser (params checks, handlers, access rules).
  for (const c of ["BAD_REQUEST", "BAD_PARAMS", "UNKNOWN_METHOD"])
    assert.ok((codes.get(c) ?? 0) > 0, `${c} reached: ${JSON.stringify([...codes])}`);
  process.stdout.write(
    `# fuzz: ${RUNS} frames, ${results} results, errors ${JSON.stringify(Object.fromEntries(codes))}, well-formed requests ${goodOk}\n`,
  );
});
