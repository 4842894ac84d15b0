// Reading a relayed task's result in pages (src/daemon/relay/relay-fetch.ts) against a link that serves task.fetch pages
// the test shapes. A result whose version changes under every read (a task that runs there, a follow-up under way)
// is the machine's honest word, not a violation: it used to be refused as REMOTE_INVALID, which settles the cycle
// `failed` here; now it is REMOTE_CHANGING, which the relay treats as a read to try again.
import assert from "node:assert/strict";
import { test } from "node:test";
import { isDshError } from "../../src/core/errors.js";
import type { MachineLink } from "../../src/link/link.js";
import { fetchPart } from "../../src/daemon/relay/relay-fetch.js";
import { isRemoteViolation } from "../../src/daemon/relay/remote-check.js";

const TASK = "tremote00001";
const body = Buffer.from(JSON.stringify({ report: "x".repeat(1_200_000) }));

/** A link whose task.fetch serves `body` in pages; `versionAt(read)` names the version of the read-th page served. */
function pagedLink(versionAt: (read: number) => string) {
  let read = 0;
  const link = {
    async request(method: string, p: { taskId: string; part: string; offset: number; limit: number }) {
      assert.equal(method, "task.fetch");
      const data = body.subarray(p.offset, p.offset + p.limit);
      return {
        taskId: p.taskId,
        part: p.part,
        cycle: 1,
        status: "working",
        settled: false,
        exists: true,
        size: body.length,
        offset: p.offset,
        data: data.toString("base64"),
        version: versionAt(read++),
      };
    },
  };
  return { link: link as unknown as MachineLink, reads: () => read };
}

test("a result whose version changes once while it is read is read again whole", async () => {
  // Pages 0 and 1 of the first read disagree; the second read holds still.
  const { link, reads } = pagedLink((n) => (n === 0 ? "v1" : "v2"));
  const f = await fetchPart(link, TASK, "result", 4 * 1024 * 1024, 5000);
  assert.ok(f.bytes.equals(body), "the whole result, as served");
  assert.equal(reads(), 2 + 3, "two pages of the first read, then all three of the second");
});

test("a result that changes during each of 3 reads is REMOTE_CHANGING (read again later), not a violation", async () => {
  const { link, reads } = pagedLink((n) => `v${n}`);
  const err = await fetchPart(link, TASK, "result", 4 * 1024 * 1024, 5000).then(
    () => assert.fail("a result that never held still was taken"),
    (e: unknown) => e,
  );
  assert.equal(isRemoteViolation(err), false, `not a violation of the protocol: ${String(err)}`);
  assert.ok(isDshError(err) && err.code === "REMOTE_CHANGING", String(err));
  assert.match((err as Error).message, /changed there during each of 3 reads in pages; nothing of it was taken/);
  assert.equal(reads(), 6, "three reads of two pages each");
});
