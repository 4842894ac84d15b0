// owner.* over a real daemon socket: only owner connections may call them; attach pushes what waits in the durable
// outbox; ack is idempotent; move hands the previous session's queued deliveries to the new one.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type DaemonClient } from "../../src/client/index.js";
import type { DeliveryPayload } from "../../src/core/crew/crew-delivery.js";
import type { DshError } from "../../src/core/errors.js";
import { runDaemon, type RunningDaemon } from "../../src/daemon/daemon.js";
import { appendOutbox, readOutbox } from "../../src/store/outbox.js";
import { until } from "../helpers/wait.js";

let dir: string;
let daemon: RunningDaemon;
const clients: DaemonClient[] = [];

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "crew-owner-methods-"));
  daemon = await runDaemon(join(dir, "home"), { config: { runtime: "headless" } });
});
after(async () => {
  for (const c of clients) c.close();
  await daemon?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const open = async (opts: { kind: "cli" } | { kind: "owner"; ownerId: string; secret?: string }) => {
  const c = await connect(daemon.home, opts);
  clients.push(c);
  return c;
};
const payload = (id: string): DeliveryPayload => ({
  deliveryId: id,
  taskId: "tabc123456789",
  cycle: 1,
  model: { subagent_id: "tabc123456789", brief: "b", result: { outcome: "completed", report: "r" } },
  card: { status: "completed", subagent_id: "tabc123456789", brief: "b", report: "r" },
});
const queue = (owner: string, id: string) =>
  appendOutbox(daemon.home, owner, { deliveryId: id, state: "queued", taskId: "tabc123456789", payload: payload(id) });

test("owner.* is refused to a cli connection with FORBIDDEN naming the fix", async () => {
  const cli = await open({ kind: "cli" });
  for (const [method, params] of [
    ["owner.attach", {}],
    ["owner.ack", { deliveryIds: ["x"] }],
    ["owner.move", { fromOwnerId: "a" }],
  ] as const) {
    await assert.rejects(
      cli.request(method, params),
      (e: DshError) => e.code === "FORBIDDEN" && /owner connections only/.test(e.message) && /hello/.test(e.message),
      method,
    );
  }
  // The connection lives on.
  assert.equal(typeof (await cli.request("daemon.status", {})).pid, "number");
});

test("attach pushes queued deliveries (then marks them sent); ack acks once; bad params are BAD_PARAMS", async () => {
  await queue("sess-a", "d-a1");
  const owner = await open({ kind: "owner", ownerId: "sess-a" });
  const pushed: DeliveryPayload[] = [];
  owner.onPush("owner.delivery", (p: DeliveryPayload) => pushed.push(p));
  assert.match(owner.hello.secret ?? "", /^[0-9a-f]{64}$/, "the owner's first hello is issued its secret");
  const attached = await owner.request("owner.attach", {});
  assert.equal(attached.pending, 1);
  assert.equal(attached.secret, undefined, "attach issues nothing");
  await until("the push", () => pushed.length > 0, 10_000, 5);
  await until("the sent record", async () => (await readOutbox(daemon.home, "sess-a")).length >= 2, 10_000, 5);
  assert.deepEqual(
    pushed.map((p) => p.deliveryId),
    ["d-a1"],
  );
  assert.deepEqual(
    (await readOutbox(daemon.home, "sess-a")).map((r) => r.state),
    ["queued", "sent"],
  );
  assert.deepEqual(await owner.request("owner.ack", { deliveryIds: ["d-a1", "unknown"] }), { acked: 1 });
  assert.deepEqual(await owner.request("owner.ack", { deliveryIds: ["d-a1"] }), { acked: 0 });
  await assert.rejects(owner.request("owner.ack", { deliveryIds: [] }), (e: DshError) => e.code === "BAD_PARAMS");
  await assert.rejects(
    owner.request("owner.move", { fromOwnerId: "../etc" }),
    (e: DshError) => e.code === "BAD_PARAMS" && /fromOwnerId/.test(e.message),
  );
});

test("owner.move: the previous session's unacked deliveries go to the new session (pushed at once), and leave the old one", async () => {
  await queue("sess-old", "d-o1");
  await queue("sess-old", "d-o2");
  await appendOutbox(daemon.home, "sess-old", { deliveryId: "d-o2", state: "acked" });
  // The old session attached once and kept its secret (the owner extension keeps it in the session); then it left.
  const before = await open({ kind: "owner", ownerId: "sess-old" });
  const secret = before.hello.secret!;
  await before.request("owner.attach", {});
  before.close();
  const fresh = await open({ kind: "owner", ownerId: "sess-new" });
  const pushed: string[] = [];
  fresh.onPush("owner.delivery", (p: DeliveryPayload) => pushed.push(p.deliveryId));
  await fresh.request("owner.attach", {});
  await assert.rejects(
    fresh.request("owner.move", { fromOwnerId: "sess-old" }),
    (e: DshError) => e.code === "NOT_OWNER",
  );
  assert.deepEqual(await fresh.request("owner.move", { fromOwnerId: "sess-old", secret }), {
    moved_ids: [],
    deliveries: 1,
  });
  await until("the moved delivery's push", () => pushed.length > 0, 10_000, 5);
  assert.deepEqual(pushed, ["d-o1"], "only the unacked one moves");
  const old = await readOutbox(daemon.home, "sess-old");
  assert.equal(old.filter((r) => r.deliveryId === "d-o1").at(-1)?.state, "acked");
  assert.equal(old.filter((r) => r.deliveryId === "d-o1").at(-1)?.movedTo, "sess-new");
  // Moving again finds nothing left; moving from oneself is a no-op.
  assert.deepEqual(await fresh.request("owner.move", { fromOwnerId: "sess-old", secret }), {
    moved_ids: [],
    deliveries: 0,
  });
  assert.deepEqual(await fresh.request("owner.move", { fromOwnerId: "sess-new" }), { moved_ids: [], deliveries: 0 });
});

test("owners prove their id on every hello: an owner from before secrets is issued one and keeps its deliveries; a hello without it is NOT_OWNER; the secret is never logged", async () => {
  // An owner from before owners proved themselves: deliveries waiting in its outbox, no secret on record.
  await queue("sess-legacy", "d-l1");
  assert.equal(existsSync(join(daemon.home, "owners", "sess-legacy", "secret.sha256")), false);
  const first = await open({ kind: "owner", ownerId: "sess-legacy" });
  const secret = first.hello.secret;
  assert.match(secret ?? "", /^[0-9a-f]{64}$/, "its first hello is issued a secret");
  const pushed: string[] = [];
  first.onPush("owner.delivery", (p: DeliveryPayload) => pushed.push(p.deliveryId));
  await first.request("owner.attach", {});
  await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(pushed, ["d-l1"], "its deliveries are still its own");

  const notOwner = (e: DshError) => e.code === "NOT_OWNER" && /secret/.test(e.message);
  await assert.rejects(open({ kind: "owner", ownerId: "sess-legacy" }), notOwner);
  await assert.rejects(
    connect(daemon.home, { kind: "owner", ownerId: "sess-legacy", secret: "f".repeat(64) }),
    notOwner,
  );
  const again = await connect(daemon.home, { kind: "owner", ownerId: "sess-legacy", secret: secret! });
  clients.push(again);
  assert.equal(again.hello.secret, undefined, "issued once only");
  // "cli" is the CLI's, not an owner's.
  await assert.rejects(open({ kind: "owner", ownerId: "cli" }), (e: DshError) => e.code === "BAD_PARAMS");

  const log = readFileSync(join(daemon.home, "daemon.log"), "utf8");
  assert.ok(!log.includes(secret!), "the secret is not in daemon.log");
  assert.ok(!log.includes("f".repeat(64)), "nor a wrong proof");
  assert.match(log, /owner hello refused/);
});

test("an owner's first hello records the secret it chose: a reply lost to a crash does not lock it out", async () => {
  const chosen = "c".repeat(64);
  await queue("sess-chosen", "d-c1"); // work waiting for it, so its directory (and secret) is kept between hellos
  // The first hello's reply never reaches the owner (the connection drops right after it is sent, as a daemon
  // crash after the record would): the owner still holds the secret it chose and presents it again.
  const lost = await open({ kind: "owner", ownerId: "sess-chosen", secret: chosen });
  assert.equal(lost.hello.secret, undefined, "nothing is issued: the owner's own secret was recorded");
  lost.close();
  const again = await open({ kind: "owner", ownerId: "sess-chosen", secret: chosen });
  assert.equal(again.hello.secret, undefined);
  await assert.rejects(
    open({ kind: "owner", ownerId: "sess-chosen", secret: "d".repeat(64) }),
    (e: DshError) => e.code === "NOT_OWNER",
  );
  await assert.rejects(open({ kind: "owner", ownerId: "sess-chosen" }), (e: DshError) => e.code === "NOT_OWNER");
  const log = readFileSync(join(daemon.home, "daemon.log"), "utf8");
  assert.equal(log.includes(chosen), false, "the secret is never logged");
});
