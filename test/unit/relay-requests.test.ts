// The relay's requests to a machine (src/daemon/relay/relay-requests.ts) against a link whose state the test sets: a send
// that finds the link down waits for the next "up" (reconcile), and an "up" that comes while that send is still
// marking the request unanswered must not be lost (the request never went again while the link stayed up).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { DshError } from "../../src/core/errors.js";
import type { MachineLink } from "../../src/link/link.js";
import type { RemoteRequest } from "../../src/daemon/task/relay-request-state.js";
import { RelayRequests } from "../../src/daemon/relay/relay-requests.js";
import type { RelayContext, RelayLive } from "../../src/daemon/relay/relay-types.js";
import { systemClock } from "../../src/daemon/ports/clock.js";

const dir = mkdtempSync(join(tmpdir(), "dsh-relay-requests-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test('an "up" that comes while a failed send marks the request unanswered sends it again once that send ends', async () => {
  const sent: string[] = [];
  const link = {
    state: "down" as "down" | "up",
    error: new DshError("MACHINE_UNREACHABLE", "machine m: down (the test's)"),
    async request(method: string, params: { requestId: string }) {
      sent.push(`${method} ${params.requestId}`);
      return { cycle: 2, queued: false };
    },
  };
  const live = {
    rec: { taskId: "tabcdefghijk", remote: { label: "m", taskId: "tremote00001" } },
    journal: async () => undefined,
  } as unknown as RelayLive;
  const ctx = {
    sup: {
      tasks: new Map([["tabcdefghijk", live]]),
      deps: {
        store: { taskPaths: () => ({ dir }) },
        clock: systemClock,
        log: { info() {}, warn() {}, error() {} },
      },
    },
    stopped: false,
    linkOf: () => link as unknown as MachineLink,
    ready: async () => link as unknown as MachineLink,
  } as unknown as RelayContext;
  let release!: () => void;
  const marking = new Promise<void>((r) => (release = r));
  let markingStarted!: () => void;
  const marked = new Promise<void>((r) => (markingStarted = r));
  const requests = new RelayRequests(ctx, {
    answered: async () => undefined,
    refused: async () => undefined,
    // Marking the follow-up unanswered starts its cycle here (a journal fsync and a record write): it takes a while.
    unanswered: async () => {
      markingStarted();
      await marking;
    },
  });
  const req: RemoteRequest = {
    requestId: "rtest",
    method: "task.respond",
    params: { taskId: "tremote00001" },
    cycle: 2,
  };
  await requests.begin(live, req);
  const answer = requests.call(live, 60_000);
  await marked; // the send found the link down and is marking the request unanswered
  link.state = "up";
  requests.reconcile("m"); // the link came up meanwhile
  release();
  assert.deepEqual(await answer, { cycle: 2, queued: false });
  assert.deepEqual(sent, ["task.respond rtest"], "sent once, after the link came up");
});
