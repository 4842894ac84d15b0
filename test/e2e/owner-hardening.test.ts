// Issue 28, the local parts, against a real owner pi (RPC mode, with the owner extension), real child pi processes
// (headless) and the scripted model, through an in-process daemon:
// 1. an owner proves who it is: a third process saying hello as that owner (a plain socket client) is refused
//    NOT_OWNER, cannot attach or ack, and the real owner still gets its delivery; a CLI sees a label, not the id;
// 2. frames: an 8 MB report reaches the owner's model and `dsh-herdr wait` whole; a 1.5 MB prompt is
//    FRAME_TOO_LARGE at once (before: a 30 s TIMEOUT).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createConnection } from "node:net";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { RpcPi } from "../../fixtures/scripted-model/rpc-child.js";
import type { RecordedRequest } from "../../fixtures/scripted-model/server.js";
import type { Script } from "../../fixtures/scripted-model/script.js";
import type { AgentResult } from "../../src/core/types.js";
import { startHarness, type Harness } from "./daemon-harness.js";
import { startOwnerPi } from "./owner-harness.js";
import { runCli } from "../helpers/cli.js";
import { rpcCommand, until } from "../helpers/wait.js";

/** A Markdown report of about 8.4 MB: numbered lines between two markers, so a cut anywhere shows. */
const BIG_REPORT = (() => {
  const lines = ["BIG-REPORT-START", ""];
  for (let i = 0; i < 170_000; i++)
    lines.push(`- line ${String(i).padStart(6, "0")}: the quick brown fox, "quoted", ok`);
  lines.push("", "BIG-REPORT-END");
  return lines.join("\n");
})();

const SCRIPT: Script = {
  conversations: [
    {
      name: "child-small",
      match: "CHILD-SMALL",
      steps: [{ toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "small one" } }] }],
    },
    {
      name: "child-big",
      match: "CHILD-BIG",
      steps: [{ toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: BIG_REPORT } }] }],
    },
    { name: "owner", match: "OWNER-", afterEnd: "repeat", steps: [{ text: "Noted." }] },
  ],
};

let h: Harness;
let owner: RpcPi;
let ownerId = "";
before(async () => {
  h = await startHarness(SCRIPT, { runtime: "headless", readinessTimeoutMs: 30_000 });
  owner = startOwnerPi(h, { sessionPath: join(h.dir, "owner", "owner.jsonl"), lifetimeMs: 900_000 });
});
after(async () => {
  await owner?.close().catch(() => undefined);
  await h?.close();
});

const command = (cmd: Record<string, unknown>) => rpcCommand(owner, cmd);

/** The completed reports the owner's model has seen in its requests, by subagent id. */
function reportsSeen(): Map<string, string> {
  const out = new Map<string, string>();
  for (const r of h.model.requests().filter((x: RecordedRequest) => x.conversation === "owner")) {
    for (const m of (r.body as { messages: { content?: unknown }[] }).messages ?? []) {
      const t =
        typeof m.content === "string"
          ? m.content
          : Array.isArray(m.content)
            ? m.content.map((p: { text?: string }) => p.text ?? "").join("")
            : "";
      if (!t.startsWith('{"subagent_id"')) continue;
      const j = JSON.parse(t) as { subagent_id: string; result?: { report?: string } };
      if (j.result?.report !== undefined) out.set(j.subagent_id, j.result.report);
    }
  }
  return out;
}

/** A plain socket client: writes frames, collects reply lines (the impostor, and a peer of the old protocol). */
function rawClient(sock: string) {
  const s = createConnection(sock);
  let buf = "";
  const lines: Record<string, unknown>[] = [];
  s.on("data", (d) => {
    buf += d;
    let i: number;
    while ((i = buf.indexOf("\n")) >= 0) {
      lines.push(JSON.parse(buf.slice(0, i)) as Record<string, unknown>);
      buf = buf.slice(i + 1);
    }
  });
  return {
    send: (msg: unknown) => s.write(JSON.stringify(msg) + "\n"),
    reply: (id: number) => until(`the reply to ${id}`, () => lines.find((l) => l.id === id), 15_000),
    lines,
    close: () => s.destroy(),
  };
}

const cliEnv = () => ({ ...h.childEnv, DSH_HERDR_HOME: h.home, PATH: process.env.PATH ?? "" });

test("the owner pi starts a session (its extension says hello with proof and attaches)", async () => {
  assert.equal((await command({ type: "prompt", message: "OWNER-HELLO" })).success, true);
  await owner.waitFor((e) => e.type === "agent_end", 60_000);
  ownerId = (await command({ type: "get_state" })).data.sessionId as string;
  assert.match(ownerId, /\S/);
});

test("a third process saying hello as the owner is refused NOT_OWNER; the real owner still gets its delivery", async () => {
  const impostor = rawClient(join(h.home, "daemon.sock"));
  try {
    impostor.send({ id: 1, method: "hello", params: { kind: "owner", ownerId } });
    const hello = await impostor.reply(1);
    assert.equal((hello.error as { code?: string } | undefined)?.code, "NOT_OWNER", JSON.stringify(hello));
    // A wrong proof is refused the same way.
    impostor.send({ id: 2, method: "hello", params: { kind: "owner", ownerId, secret: "0".repeat(64) } });
    assert.equal(((await impostor.reply(2)).error as { code?: string }).code, "NOT_OWNER");
    // Refused, it is nobody: it cannot attach nor ack.
    impostor.send({ id: 3, method: "owner.attach", params: {} });
    assert.equal(((await impostor.reply(3)).error as { code?: string }).code, "UNAUTHORIZED");

    const s = await h.spawn({ prompt: "CHILD-SMALL", owner: ownerId, brief: "small" });
    const seen = await until("the owner's model sees the delivery", () => reportsSeen().get(s.taskId), 90_000);
    assert.equal(seen, "small one");
    impostor.send({ id: 4, method: "owner.ack", params: { deliveryIds: [`${s.taskId}-c1-completed`] } });
    assert.equal(((await impostor.reply(4)).error as { code?: string }).code, "UNAUTHORIZED");
    assert.ok(!impostor.lines.some((l) => l.method === "owner.delivery"), "the impostor was pushed no delivery");

    // A CLI client sees a label for a pi owner, never its id (what an impostor would need); its own tasks say "cli".
    const list = await h.cli.request("task.list", { limit: 50 });
    const row = list.tasks.find((t) => t.taskId === s.taskId)!;
    assert.match(row.owner ?? "", /^pi-[0-9a-f]{12}$/);
    assert.ok(!JSON.stringify(list).includes(ownerId), "task.list names no owner id");
    const got = await h.cli.request("task.get", { taskId: s.taskId });
    assert.equal(got.owner, row.owner);
    // ...and the label selects that owner's tasks.
    const mine = await h.cli.request("task.list", { owner: row.owner, limit: 50 });
    assert.ok(mine.tasks.some((t) => t.taskId === s.taskId));
    const cliTask = await h.spawn({ prompt: "CHILD-SMALL", brief: "from the cli" });
    assert.equal((await h.wait(cliTask.taskId)).owner, "cli", "a task spawned from the CLI stays the CLI user's");
  } finally {
    impostor.close();
  }
});

test("an 8 MB report reaches the owner's model whole, and `dsh-herdr wait` prints it whole", async () => {
  assert.ok(Buffer.byteLength(BIG_REPORT) > 8_000_000, "at least 8 MB");
  const s = await h.spawn({ prompt: "CHILD-BIG", owner: ownerId, brief: "big" });
  const seen = await until("the owner's model sees the big report", () => reportsSeen().get(s.taskId), 240_000, 500);
  assert.equal(seen.length, BIG_REPORT.length, "the whole report, not a part");
  assert.ok(seen === BIG_REPORT, "the report exactly");

  const waited = await runCli(["wait", s.taskId, "--json"], { env: cliEnv(), cwd: h.repo, timeoutMs: 120_000 });
  assert.equal(waited.code, 0, waited.err);
  const r = (JSON.parse(waited.out) as { results: AgentResult[] }).results[0]!;
  assert.equal(r.status, "completed");
  assert.ok(r.finalMessage === BIG_REPORT, `finalMessage is the whole report (${r.finalMessage?.length} chars)`);
  const card = await runCli(["wait", s.taskId], { env: cliEnv(), cwd: h.repo, timeoutMs: 120_000 });
  assert.equal(card.code, 0, card.err);
  assert.ok(card.out.includes("BIG-REPORT-START") && card.out.includes("BIG-REPORT-END"), "the card holds it all");
  assert.ok(card.out.includes("- line 169999: the quick brown fox"));
  assert.equal(
    card.out.split("- line 000000: the quick brown fox").length,
    2,
    "the report printed once, not a cut copy and then whole",
  );
});

test("a 1.5 MB prompt is FRAME_TOO_LARGE at once, naming what to do (not a 30 s TIMEOUT)", async () => {
  const file = join(h.dir, "big-prompt.md");
  writeFileSync(file, "CHILD-SMALL\n" + "x".repeat(1_500_000));
  const r = await runCli(["spawn", "--prompt-file", file], { env: cliEnv(), cwd: h.repo, timeoutMs: 60_000 });
  assert.notEqual(r.code, 0);
  assert.match(r.err, /FRAME_TOO_LARGE/, r.err);
  assert.doesNotMatch(r.err, /TIMEOUT/);
  assert.match(r.err, /1 MiB/);
});
