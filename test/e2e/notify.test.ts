// Notifications (issue 26), end to end with real pi children and a real HTTP receiver on 127.0.0.1: a signed POST
// per settled cycle whose signature checks with the secret, retries that keep one delivery id, a delivery that waits
// out a receiver down across a daemon restart and arrives once, a hung receiver that holds up nothing else, and
// command targets that run only for their statuses with the task's facts in their environment only.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { connect } from "../../src/client/index.js";
import { runDaemon } from "../../src/daemon/daemon.js";
import { runCli } from "../helpers/cli.js";
import { sleep, until } from "../helpers/wait.js";
import { startHarness, type Harness } from "./daemon-harness.js";

const report = (outcome: string, text: string, needs?: string) => ({
  toolCalls: [{ name: "crew_report", arguments: { outcome, report: text, ...(needs ? { needs } : {}) } }],
});
const SCRIPT: Script = {
  conversations: [
    { name: "done", match: "MARK-DONE", steps: [report("completed", "DONE-SUMMARY all good")] },
    { name: "flaky", match: "MARK-FLAKY", steps: [report("completed", "FLAKY-SUMMARY done")] },
    { name: "hang", match: "MARK-HANG", steps: [report("completed", "HANG-SUMMARY done")] },
    {
      name: "error",
      match: "MARK-ERROR",
      steps: [{ httpError: { status: 500, message: "scripted upstream failure" } }],
    },
    {
      name: "ask",
      match: "MARK-ASK",
      steps: [report("needs_input", "Half way.", "pick one: $(touch PWNED) `touch PWNED2`; touch PWNED3")],
    },
  ],
};
const SECRET = "s3cret-for-the-test";

interface Received {
  headers: IncomingHttpHeaders;
  raw: string;
  body: Record<string, unknown>;
  answered: boolean;
  /** The client gave up on it (its timeout) or the server closed it. */
  closed: boolean;
}

/** A webhook receiver: `answer` says what each request gets (a status, or "hang": never answered). */
async function receiver(
  answer: (r: Received, nth: number) => number | "hang",
  port = 0,
): Promise<{ url: string; port: number; got: Received[]; close(): Promise<void> }> {
  const got: Received[] = [];
  const server: Server = createServer((req, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks).toString("utf8");
      const r: Received = {
        headers: req.headers,
        raw,
        body: JSON.parse(raw) as Record<string, unknown>,
        answered: false,
        closed: false,
      };
      res.on("close", () => (r.closed = true));
      got.push(r);
      const nth = got.filter((x) => x.body.deliveryId === r.body.deliveryId).length;
      const a = answer(r, nth);
      if (a === "hang") return;
      r.answered = true;
      res.writeHead(a, { "content-type": "text/plain" }).end(a === 200 ? "thanks" : "try later");
    });
  });
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
  const p = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${p}/hook`,
    port: p,
    got,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** A port nobody listens on (yet). */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

let h: Harness;
let main: Awaited<ReturnType<typeof receiver>>;
let downPort: number;
const log = (name: string) => join(h.dir, name);
const env = () => ({ ...process.env, ...h.childEnv, DSH_HERDR_HOME: h.home });

before(async () => {
  main = await receiver((r, nth) => {
    const summary = String(r.body.summary);
    if (summary.startsWith("HANG")) return "hang";
    if (summary.startsWith("FLAKY") && nth === 1) return 500;
    return 200;
  });
  downPort = await freePort();
  h = await startHarness(SCRIPT, { runtime: "headless" });
  // Set as a person would, through the CLI; the running daemon reloads config.json.
  const notify = {
    webhooks: [
      { url: main.url, secret: SECRET, on: ["completed", "blocked"], headers: { "X-Test": "yes" }, timeoutMs: 60_000 },
      { url: `http://127.0.0.1:${downPort}/down`, on: ["failed"] },
    ],
    commands: [
      {
        command: `printf '%s %s %s\\n' "$DSH_HERDR_TASK_ID" "$DSH_HERDR_STATUS" "$DSH_HERDR_AGENT" >> '${log("blocked.log")}'; printf '%s\\n' "$DSH_HERDR_SUMMARY" >> '${log("summary.log")}'`,
        on: ["blocked"],
      },
      {
        command: [
          process.execPath,
          "-e",
          `require("fs").appendFileSync(${JSON.stringify(log("completed.log"))}, process.env.DSH_HERDR_TASK_ID + " " + process.env.DSH_HERDR_STATUS + "\\n")`,
        ],
        on: ["completed"],
      },
    ],
  };
  const set = await runCli(["config", "set", "notify", JSON.stringify(notify)], { env: env() });
  assert.equal(set.code, 0, set.err);
  assert.match(set.err, /took/, `the running daemon took it: ${set.err}`);
});
after(async () => {
  await h?.close();
  await main?.close();
});

const deliveriesOf = (taskId: string, got: Received[] = main.got) => got.filter((r) => r.body.taskId === taskId);

test("a settled cycle is one signed POST: the signature checks with the secret, the body is exactly the contract's", async () => {
  const { taskId } = await h.spawn({ prompt: "MARK-DONE secret-prompt-text", owner: "sess-notify-a" });
  const r = await h.wait(taskId);
  assert.equal(r.status, "completed");
  const [d] = await until("the webhook's POST", () => {
    const g = deliveriesOf(taskId);
    return g.length > 0 && g;
  });
  const sig = createHmac("sha256", SECRET).update(d!.raw).digest("hex");
  assert.equal(d!.headers["x-dsh-herdr-signature-256"], `sha256=${sig}`);
  assert.notEqual(
    d!.headers["x-dsh-herdr-signature-256"],
    `sha256=${createHmac("sha256", "another secret").update(d!.raw).digest("hex")}`,
  );
  assert.equal(d!.headers["content-type"], "application/json");
  assert.equal(d!.headers["x-test"], "yes", "the configured header");
  assert.equal(d!.headers["x-dsh-herdr-delivery"], `${taskId}-c1-completed`);
  assert.deepEqual(Object.keys(d!.body).sort(), [
    "agent",
    "at",
    "deliveryId",
    "nextAction",
    "owner",
    "status",
    "summary",
    "taskId",
  ]);
  assert.equal(d!.body.deliveryId, `${taskId}-c1-completed`);
  assert.equal(d!.body.agent, r.agent.name);
  assert.equal(d!.body.status, "completed");
  assert.equal(d!.body.summary, r.summary);
  assert.equal(d!.body.nextAction, "none");
  assert.equal(d!.body.owner, "sess-notify-a");
  assert.equal(d!.body.at, new Date(r.timing.settledAt!).toISOString());
  assert.doesNotMatch(d!.raw, /secret-prompt-text|s3cret/, "no prompt, no secret in the body");
  // The command target for "completed" ran with the facts in its environment.
  await until(
    "the completed command",
    () => existsSync(log("completed.log")) && readFileSync(log("completed.log"), "utf8").includes(taskId),
  );
  assert.equal(deliveriesOf(taskId).length, 1, "one POST per settled cycle");
});

test("a 500 then a 200: two requests with one delivery id and the same signed bytes, then no more", async () => {
  const { taskId } = await h.spawn({ prompt: "MARK-FLAKY" });
  await h.wait(taskId);
  const got = await until(
    "the retry",
    () => {
      const g = deliveriesOf(taskId);
      return g.length >= 2 && g;
    },
    30_000,
  );
  assert.equal(got[0]!.headers["x-dsh-herdr-delivery"], got[1]!.headers["x-dsh-herdr-delivery"]);
  assert.equal(got[0]!.raw, got[1]!.raw, "the same body on the retry");
  assert.equal(got[0]!.headers["x-dsh-herdr-signature-256"], got[1]!.headers["x-dsh-herdr-signature-256"]);
  const outbox = () => readFileSync(join(h.home, "notify", "outbox.jsonl"), "utf8");
  await until("the delivery recorded done", () => outbox().includes(`"state":"done","id":"${taskId}-c1-completed@`));
  await sleep(2500); // past the next backoff step: a delivered notification is never sent again
  assert.equal(deliveriesOf(taskId).length, 2);
});

test("a hung receiver does not delay the owner's delivery", async () => {
  const pushed: { taskId: string }[] = [];
  const owner = await connect(h.home, {
    kind: "owner",
    ownerId: "sess-notify-owner",
    pushes: { "owner.delivery": (p: { taskId: string }) => void pushed.push(p) },
  });
  try {
    await owner.request("owner.attach", {});
    const { taskId } = await owner.request("task.spawn", {
      cwd: h.repo,
      model: h.modelName,
      prompt: "MARK-HANG",
    });
    // The webhook's deadline is 60 s: an owner's delivery that waited for it would come after its request was given up.
    await until("the owner's delivery", () => pushed.some((p) => p.taskId === taskId), 90_000);
    await until("the hung POST", () => deliveriesOf(taskId).length === 1);
    const hung = deliveriesOf(taskId)[0]!;
    assert.equal(hung.answered, false);
    assert.equal(hung.closed, false, "the POST still hangs: the owner's delivery did not wait for it");
    const r = await h.wait(taskId);
    assert.equal(r.status, "completed");
    assert.equal(hung.closed, false, "nor did the settled result");
  } finally {
    owner.close();
  }
});

test("command targets run only for their statuses, with the task's text in their environment, never in a command line", async () => {
  const { taskId: asks } = await h.spawn({ prompt: "MARK-ASK" });
  const r = await h.wait(asks);
  assert.equal(r.status, "blocked");
  const { taskId: done } = await h.spawn({ prompt: "MARK-DONE again" });
  await h.wait(done);
  await until(
    "the blocked command",
    () => existsSync(log("blocked.log")) && readFileSync(log("blocked.log"), "utf8").includes(asks),
  );
  await until("the completed command", () => readFileSync(log("completed.log"), "utf8").includes(done));
  const blocked = readFileSync(log("blocked.log"), "utf8");
  const completed = readFileSync(log("completed.log"), "utf8");
  assert.match(blocked, new RegExp(`^${asks} blocked ${r.agent.name}$`, "m"));
  assert.ok(!blocked.includes(done), "the blocked command did not run for a completed task");
  assert.ok(!completed.includes(asks), "the completed command did not run for a blocked task");
  assert.match(completed, new RegExp(`^${done} completed$`, "m"));
  // Once per task: the blocked status and the settled blocked cycle are one delivery.
  assert.equal(blocked.split("\n").filter((l) => l.startsWith(asks)).length, 1);
  const summary = readFileSync(log("summary.log"), "utf8");
  assert.ok(summary.includes("pick one: $(touch PWNED) `touch PWNED2`; touch PWNED3"), summary);
  for (const f of ["PWNED", "PWNED2", "PWNED3"])
    for (const dir of [h.dir, h.repo, h.home, process.cwd()])
      assert.equal(existsSync(join(dir, f)), false, `${f} in ${dir}`);
});

test("a receiver down across a daemon restart gets the delivery once, when it is back", async () => {
  const { taskId } = await h.spawn({ prompt: "MARK-ERROR" });
  const r = await h.wait(taskId);
  assert.equal(r.status, "failed");
  const daemonLog = () => readFileSync(join(h.home, "daemon.log"), "utf8");
  await until("a failed attempt on the dead port", () =>
    daemonLog()
      .split("\n")
      .some((l) => l.includes(`${taskId}-c1-failed`) && l.includes("notification not delivered")),
  );
  h.cli.close();
  await h.daemon.stop();
  const back = await receiver(() => 200, downPort);
  try {
    h.daemon = await runDaemon(h.home, {
      childEnv: h.childEnv,
      config: { readinessTimeoutMs: 60_000, runtime: "headless" },
    });
    h.cli = await connect(h.home, { kind: "cli", timeoutMs: 120_000 });
    const got = await until(
      "the delivery after the restart",
      () => {
        const g = deliveriesOf(taskId, back.got);
        return g.length > 0 && g;
      },
      30_000,
    );
    assert.equal(got[0]!.body.deliveryId, `${taskId}-c1-failed`);
    assert.equal(got[0]!.body.status, "failed");
    assert.deepEqual(Object.keys(got[0]!.body.error as object).sort(), ["code", "message"]);
    assert.equal(got[0]!.headers["x-dsh-herdr-signature-256"], undefined, "no secret, no signature");
    await sleep(2500);
    assert.equal(deliveriesOf(taskId, back.got).length, 1, "once");
    assert.equal(back.got.length, 1, "and nothing else: no settled cycle of before the restart is sent again");
  } finally {
    await back.close();
  }
});

test("notify test sends a sample to each target and prints each answer", async () => {
  const before = main.got.length;
  const r = await runCli(["notify", "test", "--json"], { env: env() });
  assert.equal(r.code, 1, "one target (the dead port) failed");
  const out = JSON.parse(r.out) as {
    deliveryId: string;
    targets: {
      kind: string;
      target: string;
      ok: boolean;
      status?: number;
      exitCode?: number;
      error?: string;
      text?: string;
    }[];
  };
  assert.equal(out.targets.length, 4);
  const [hook, down, cmd1, cmd2] = out.targets;
  assert.deepEqual([hook!.kind, hook!.ok, hook!.status, hook!.text], ["webhook", true, 200, "thanks"]);
  assert.equal(hook!.target, `http://127.0.0.1:${main.port}`, "scheme and host only");
  assert.equal(down!.ok, false);
  assert.match(down!.error ?? "", /ECONNREFUSED/);
  assert.deepEqual([cmd1!.kind, cmd1!.ok, cmd1!.exitCode], ["command", true, 0]);
  assert.deepEqual([cmd2!.kind, cmd2!.ok, cmd2!.exitCode], ["command", true, 0]);
  const sample = main.got.slice(before).find((g) => g.body.deliveryId === out.deliveryId)!;
  assert.equal(
    sample.headers["x-dsh-herdr-signature-256"],
    `sha256=${createHmac("sha256", SECRET).update(sample.raw).digest("hex")}`,
  );
  assert.ok(readFileSync(log("completed.log"), "utf8").includes("t0000000test completed"));
  const human = await runCli(["notify", "test"], { env: env() });
  assert.equal(human.code, 1);
  assert.match(
    human.out,
    new RegExp(`^ok {4}webhook http://127\\.0\\.0\\.1:${main.port}: HTTP 200 in \\d+ ms: thanks$`, "m"),
  );
  assert.match(human.out, /^FAIL {2}webhook http:\/\/127\.0\.0\.1:\d+: error: connect ECONNREFUSED/m);
});
