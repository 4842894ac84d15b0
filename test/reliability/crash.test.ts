// Crash recovery with real processes: the daemon (its own process) SIGKILLs itself right after journaling a chosen
// point of a task's life (DSH_HERDR_CRASH_AT, see src/daemon/ports/crash-hook.ts) or is SIGKILLed by the test mid-cycle,
// is started again on the same home, and the task is driven to its end. Each point checks: the right final
// status, no prompt run twice (journal, the child's own session, the model's requests), exactly one pi child ever
// ran for the task (its processes are sampled all along), and no orphan process or worktree. `launch_returned` kills
// the daemon between runtime.launch and its journal record: the child must be adopted (headless, tmux and Herdr: the
// fake Herdr, its panes' shells typing the start line).
// Run a few points only: DSH_CRASH_POINTS=26,27 node --test dist/test/reliability/crash.test.js
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import type { DaemonClient } from "../../src/client/index.js";
import { connectOwner } from "../helpers/owner-client.js";
import type { AgentResult } from "../../src/core/types.js";
import { describeDifference } from "../../src/core/lifecycle/verify.js";
import { verifyTaskDir } from "../../src/cli/commands/verify.js";
import { privateTmux, type PrivateTmux } from "../helpers/tmux.js";
import { startFakeHerdr, type FakeHerdr } from "../../fixtures/fake-herdr/server.js";
import {
  alive,
  cliClient,
  makeRepo,
  processesMentioning,
  sampleProcesses,
  sleep,
  startDaemonProc,
  startShared,
  until,
  type DaemonProc,
  type Shared,
  journal,
} from "./proc-harness.js";
import type { JournalRecord, JournalRecordOf } from "../../src/core/lifecycle/journal-record.js";

const SCRIPT: Script = {
  conversations: [
    {
      name: "life",
      match: "MARK-LIFE",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "feature.txt", content: "one\n" } }], delayMs: 700 },
        {
          toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "first pass" } }],
          delayMs: 700,
        },
        { text: "cycle one done" },
        { toolCalls: [{ name: "write", arguments: { path: "more.txt", content: "two\n" } }], delayMs: 500 },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "second pass" } }] },
        { text: "cycle two done" },
      ],
    },
    { name: "slow", match: "MARK-SLOW", steps: [{ text: "still thinking", delayMs: 120_000 }] },
  ],
};

interface Point {
  /** DSH_HERDR_CRASH_AT for the first daemon run; undefined = the test kills the daemon itself. */
  at?: string;
  /** DSH_HERDR_CRASH_AT for the second run (a crash during recovery). */
  again?: string;
  life: "two-cycles" | "abort";
  /** A pi-session owner (a fake owner extension: attaches, injects each delivery id once, acks) instead of the CLI. */
  owner?: boolean;
  /** Kill from outside once this journal event is present (mid-cycle kills). */
  killAfter?: string;
  expect: "closed";
  finalBeforeClose: AgentResult["status"];
  /** The daemon's runtime (default headless); tmux runs on a private -L server, Herdr is the fake one. */
  runtime?: "tmux" | "herdr";
  /** Not isolated: the task runs in the repo itself, which has a file dirty (untracked) before the spawn. */
  shared?: true;
}

const POINTS: Point[] = [
  { at: "created", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "admitted", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "worktree", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "baseline", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "launched", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "prompt_sent", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "status:running", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { killAfter: "status:running", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "report", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "settle", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "status:completed", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "respond", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "prompt_sent#2", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "report#2", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "settle#2", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "status:completed#2", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "closed", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "launched", again: "recovered", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "interrupted", life: "abort", expect: "closed", finalBeforeClose: "interrupted" },
  { killAfter: "status:running", life: "abort", expect: "closed", finalBeforeClose: "interrupted" },
  { at: "outbox:queued", owner: true, life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "outbox:sent", owner: true, life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "outbox:acked", owner: true, life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "outbox:sent#2", owner: true, life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "status:completed", owner: true, life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "settle#2", owner: true, life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "launch_returned", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "launch_returned", runtime: "tmux", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "launched", shared: true, life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "launch_returned", runtime: "herdr", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
  { at: "status:running", runtime: "herdr", life: "two-cycles", expect: "closed", finalBeforeClose: "completed" },
];

let shared: Shared;
// Never the user's tmux server: a private one, started by the daemon on first use and killed at the end.
const tmux: PrivateTmux = privateTmux("dsh-crash");
before(async () => {
  shared = await startShared(SCRIPT, "dsh-crash-");
});
// Started on first use by a Herdr point.
let herdr: FakeHerdr | undefined;
after(async () => {
  await herdr?.close();
  await tmux.kill();
  await shared?.close();
});

type Ev = JournalRecord;
/** A launched child's pid: the journal keeps the runtime's whole handle, typed by its runtime alone. */
const pidOf = (e: JournalRecordOf<"launched">): number => (e.handle as { pid?: number } | undefined)?.pid ?? NaN;
const matches = (e: Ev, point: string) =>
  e.type === point || `${e.type}:${"status" in e ? String(e.status ?? "") : ""}` === point;

/** User messages in the child's own session that carry `marker`: how often the child was really prompted. */
function promptsInSession(home: string, taskId: string, marker: string): number {
  const p = join(home, "tasks", taskId, "session.jsonl");
  if (!existsSync(p)) return 0;
  let n = 0;
  for (const line of readFileSync(p, "utf8").split("\n")) {
    if (!line.trim()) continue;
    const e = JSON.parse(line) as { type?: string; message?: { role?: string; content?: unknown } };
    if (e.type === "message" && e.message?.role === "user" && JSON.stringify(e.message.content).includes(marker)) n++;
  }
  return n;
}

/** The owner's pi session as the owner extension keeps it: delivery ids injected, each at most once. */
interface OwnerSession {
  injected: string[];
  pushes: Map<string, number>;
  /** Pushes of an id that arrived after the daemon confirmed its ack: must stay 0. */
  pushedAfterAck: number;
  acked: Set<string>;
}

function userMessagesWith(body: unknown, marker: string): number {
  const msgs = (body as { messages?: { role?: string; content?: unknown }[] })?.messages ?? [];
  return msgs.filter((m) => m.role === "user" && JSON.stringify(m.content).includes(marker)).length;
}

class Driver {
  d!: DaemonProc;
  cli?: DaemonClient;
  owner?: DaemonClient;
  runs = 0;
  readonly ownerId = `0b1e${"c0ffee".repeat(2)}-crash`;
  readonly session: OwnerSession = { injected: [], pushes: new Map(), pushedAfterAck: 0, acked: new Set() };
  constructor(
    readonly home: string,
    readonly point: Point,
  ) {}

  /** Who spawns, responds and closes: the owner session, or the person at the CLI. */
  get actor(): DaemonClient {
    return this.owner ?? this.cli!;
  }

  private async attachOwner(): Promise<void> {
    const s = this.session;
    // With the secret its first hello was issued, across restarts (as the owner extension keeps it in the session).
    const c = await connectOwner(this.home, this.ownerId, {
      timeoutMs: 120_000,
      pushes: {
        "owner.delivery": (d: { deliveryId: string }) => {
          s.pushes.set(d.deliveryId, (s.pushes.get(d.deliveryId) ?? 0) + 1);
          if (s.acked.has(d.deliveryId)) s.pushedAfterAck++;
          if (!s.injected.includes(d.deliveryId)) s.injected.push(d.deliveryId); // inject once, as the extension does
          void c.request("owner.ack", { deliveryIds: [d.deliveryId] }).then(
            () => s.acked.add(d.deliveryId),
            () => undefined,
          );
        },
      },
    });
    this.owner = c;
    await c.request("owner.attach", {});
  }

  async start(): Promise<void> {
    for (;;) {
      this.runs++;
      const crash = this.runs === 1 ? this.point.at : this.runs === 2 ? this.point.again : undefined;
      try {
        if (this.point.runtime === "herdr") herdr ??= await startFakeHerdr({ quietMs: 1000 });
        const config =
          this.point.runtime === "tmux"
            ? { runtime: "tmux", tmuxSocket: tmux.socketName }
            : this.point.runtime === "herdr"
              ? { runtime: "herdr", herdrSocketPath: herdr!.socketPath }
              : {};
        this.d = await startDaemonProc(this.home, shared.childEnv, {
          env: crash ? { DSH_HERDR_CRASH_AT: crash } : {},
          config,
        });
        break;
      } catch (e) {
        if (!crash) throw e; // only a planted kill point may end a start-up (a crash during recovery)
      }
    }
    this.cli = await cliClient(this.home);
    if (this.point.owner) await this.attachOwner();
  }

  /** Run one step; when the daemon dies under it, wait for the death, restart and report false. */
  async step<T>(fn: (c: DaemonClient) => Promise<T>): Promise<T | undefined> {
    const died = this.d.exited.then(() => "died" as const);
    try {
      const r = await Promise.race([fn(this.cli!), died]);
      if (r !== "died") return r as T;
    } catch (e) {
      if (!((await Promise.race([died, sleep(3000).then(() => "alive" as const)])) === "died")) throw e;
    }
    const how = await this.d.exited;
    assert.equal(how, "SIGKILL", `daemon died by ${how}: ${this.d.stderr()}`);
    this.cli?.close();
    this.owner?.close();
    await this.start();
    return undefined;
  }

  async stop(): Promise<void> {
    this.cli?.close();
    this.owner?.close();
    this.d.proc.kill("SIGTERM");
    await this.d.exited;
  }
}

async function runPoint(p: Point, idx: number): Promise<void> {
  const dir = join(shared.dir, `p${idx}`);
  const repo = makeRepo(dir);
  if (p.shared) writeFileSync(join(repo, "dirty-before.txt"), "the person's work in progress\n");
  const home = join(dir, "home");
  const drv = new Driver(home, p);
  // Every pi child of this home names its session file under tasks/: the sample shows how many ever ran.
  const childOf = join(home, "tasks") + "/";
  // pi children only (their argv names the session file): other short processes name the task dir too (mkfifo).
  const children = sampleProcesses(childOf, 200, "session.jsonl");
  // On Herdr the journaled pid is the starter's (the script the pane's shell ran), pi its child: each pi's parent.
  const parents = new Map<number, number>();
  const parentSampler = setInterval(() => {
    for (const pid of children.seen)
      if (!parents.has(pid))
        try {
          parents.set(pid, Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[1]));
        } catch {
          /* gone */
        }
  }, 100);
  await drv.start();
  const marker = p.life === "abort" ? "MARK-SLOW" : "MARK-LIFE";
  let taskId: string | undefined;
  const ours = async (c: DaemonClient) => {
    const r = await c.request("task.list", {});
    return r.tasks[0]?.taskId;
  };
  const killer = p.killAfter
    ? until(
        `journal ${p.killAfter}`,
        () => (taskId && journal(home, taskId).some((e) => matches(e, p.killAfter!)) ? true : undefined),
        90_000,
      ).then(() => process.kill(drv.d.pid, "SIGKILL"))
    : undefined;
  try {
    // spawn once: after a crash the task may exist already (the reply was lost, the record was not)
    while (!taskId) {
      taskId = await drv.step(
        async (c) =>
          (await ours(c)) ??
          (
            await drv.actor.request("task.spawn", {
              model: shared.modelName,
              cwd: repo,
              prompt: `${marker} point ${idx}`,
              isolated: !p.shared,
            })
          ).taskId,
      );
    }
    const settledAt = (cycle: number) =>
      journal(home, taskId!).some((e) => e.type === "status" && e.settled === true && e.cycle === cycle);
    const waitSettled = async (cycle: number) => {
      while (
        !(await drv.step(async (c) => {
          await c.request("task.wait", { taskIds: [taskId!], timeoutMs: 90_000 }, { timeoutMs: 95_000 });
          return until(`cycle ${cycle} settled`, () => (settledAt(cycle) ? true : undefined), 90_000);
        }))
      );
    };
    if (p.life === "two-cycles") {
      await waitSettled(1);
      while (!journal(home, taskId).some((e) => e.type === "respond"))
        await drv.step(() => drv.actor.request("task.respond", { taskId: taskId!, message: "AGAIN please" }));
      await waitSettled(2);
    } else {
      while (!journal(home, taskId).some((e) => e.type === "interrupted")) {
        await drv.step(async (c) => {
          // Abort mid-cycle: the model is holding the child's request.
          await until(
            "the model request",
            () =>
              shared.model.requests().some((r) => userMessagesWith(r.body, `${marker} point ${idx}`) > 0)
                ? true
                : undefined,
            60_000,
          );
          let last: AgentResult | undefined;
          await until(
            "running",
            async () =>
              (last = await c.request("task.get", { taskId: taskId! })).status === "running" ? true : undefined,
            60_000,
          ).catch((e: Error) => {
            const tdir = join(home, "tasks", taskId!);
            const tail = (f: string) =>
              existsSync(join(tdir, f)) ? readFileSync(join(tdir, f), "utf8").slice(-600) : "-";
            throw new Error(
              `${e.message}: ${JSON.stringify(last)} exit.json ${tail("exit.json")} stderr ${tail("stderr.log")} journal ${tail("events.jsonl")}`,
            );
          });
          return c.request("task.abort", { taskIds: [taskId!] });
        });
      }
      await waitSettled(1);
    }
    await killer?.catch(() => undefined);
    // A crash point after the last settle (an outbox record of cycle 2) may fire during any later step: each one
    // that the kill interrupts is run again on the restarted daemon.
    let before: AgentResult | undefined;
    while (!(before = await drv.step((c) => c.request("task.get", { taskId: taskId! })))) {
      /* read again after the restart */
    }
    assert.equal(before.status, p.finalBeforeClose, `final status before close: ${JSON.stringify(before)}`);
    if (p.life === "two-cycles") {
      // Every recovered two-cycle task ends with the diff of its worktree: a task.json older than the worktree and
      // baseline records (a crash at the launch) or a settled diff held only in memory (a crash after a settle) loses nothing.
      const changed = [...(before.diff?.files ?? []), ...(before.diff?.untracked ?? [])];
      assert.ok(
        changed.includes("feature.txt") && changed.includes("more.txt"),
        `diff of the worktree: ${JSON.stringify(before.diff)} worktree ${JSON.stringify(before.worktree)}`,
      );
      if (p.shared) {
        // The files dirty before the task come back from the journal: named as such, no "not known" warning.
        assert.deepEqual(before.diff?.dirtyAtStart, ["?? dirty-before.txt"], JSON.stringify(before.diff));
        assert.ok(
          !(before.warnings ?? []).some((w) => /not known after the daemon's crash/.test(w)),
          JSON.stringify(before.warnings),
        );
      }
    }
    if (p.owner) {
      // Every settled cycle reaches the owner's session exactly once, and every delivery ends acked.
      const outboxOf = () =>
        readFileSync(join(home, "owners", drv.ownerId, "outbox.jsonl"), "utf8")
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l) as { deliveryId: string; state: string });
      // Acked in the outbox (an ack whose reply was lost to the crash is still durable there).
      while (
        !(await drv.step(() =>
          until(
            "both deliveries acked",
            () => (outboxOf().filter((r) => r.state === "acked").length >= 2 ? true : undefined),
            60_000,
          ).catch(() => "timed out" as const),
        ))
      ) {
        /* the daemon died while delivering: wait again on the restarted one */
      }
      assert.equal(
        drv.session.injected.length,
        2,
        `injected: ${JSON.stringify(drv.session.injected)} pushes ${JSON.stringify([...drv.session.pushes])}`,
      );
      assert.ok(
        drv.session.injected.every((id) => id.includes(taskId!)),
        JSON.stringify(drv.session.injected),
      );
      assert.equal(new Set(drv.session.injected).size, 2, "two distinct deliveries (one per cycle)");
      assert.equal(drv.session.pushedAfterAck, 0, "nothing pushed again after its ack was confirmed");
      const outbox = outboxOf();
      for (const id of drv.session.injected) {
        assert.equal(outbox.filter((r) => r.deliveryId === id && r.state === "queued").length, 1, `${id} queued once`);
        assert.ok(
          outbox.some((r) => r.deliveryId === id && r.state === "acked"),
          `${id} acked`,
        );
      }
    }
    while (!(await drv.step(() => drv.actor.request("task.close", { taskId: taskId!, closePane: true })))) {
      /* closed after the restart */
    }
    let closed: AgentResult | undefined;
    while (!(closed = await drv.step((c) => c.request("task.get", { taskId: taskId! })))) {
      /* read again after the restart */
    }
    assert.equal(closed?.status, p.expect);
    assert.ok(drv.runs >= 2, "the daemon was killed and restarted");
    // The stored result agrees with its task dir (the journal's verdict, the session, diff.patch): `dsh-herdr verify`.
    const v = verifyTaskDir(join(home, "tasks", taskId), taskId);
    assert.deepEqual(v.differences.map(describeDifference), [], "verify agrees with result.json");
    assert.deepEqual(v.unchecked ?? [], [], "verify rebuilt the result in full");

    // No prompt twice. In the journal: a cycle's prompt is pushed again only after a restart, and only when the child
    // had not confirmed the earlier push (the extension runs a cycle once and acknowledges a repeat). In the child's
    // session and the model's requests: one user prompt per cycle.
    const ev = journal(home, taskId);
    const pushed = new Set<unknown>();
    const confirmed = new Set<unknown>();
    let restartedSincePush = false;
    for (const e of ev) {
      if (e.type === "recovered") restartedSincePush = true;
      else if (e.type === "prompt_accepted") confirmed.add(e.cycle);
      else if (e.type === "prompt_sent") {
        if (pushed.has(e.cycle)) {
          assert.ok(
            restartedSincePush && !confirmed.has(e.cycle),
            `prompt of cycle ${String(e.cycle)} pushed again without a restart or after it was confirmed`,
          );
        }
        pushed.add(e.cycle);
        restartedSincePush = false;
      }
    }
    // The model saw the task prompt once in every request of this task (a second prompt would show in the history).
    const seen = shared.model
      .requests()
      .map((r) => userMessagesWith(r.body, `${marker} point ${idx}`))
      .filter((n) => n > 0);
    assert.ok(seen.length > 0 && seen.every((n) => n === 1), `task prompt per request: ${JSON.stringify(seen)}`);
    if (p.life === "two-cycles")
      assert.equal(promptsInSession(home, taskId, marker), 1, "the task prompt reached the child's session once");
    if (p.life === "two-cycles") {
      const n = promptsInSession(home, taskId, "AGAIN please");
      assert.equal(
        n,
        1,
        `the follow-up reached the child once; journal: ${ev.map((e) => `${e.type}${"cycle" in e && e.cycle ? "#" + String(e.cycle) : ""}${"why" in e && e.why ? "(" + String(e.why) + ")" : ""}`).join(" ")}`,
      );
    }
    const launched = ev.filter((e) => e.type === "launched");
    assert.equal(launched.length, 1, `launched once: ${launched.length}`);
    if (p.at === "launch_returned") {
      // The child the first daemon launched (and never journaled) was found and adopted, not started again.
      assert.equal(launched[0]!.adopted, true, `adopted: ${JSON.stringify(launched[0])}`);
      assert.ok(
        ev.some((e) => e.type === "recovered" && String(e.action).startsWith("adopt")),
        "recovery journaled the adoption",
      );
    }
    children.stop();
    clearInterval(parentSampler);
    assert.deepEqual(
      p.runtime === "herdr" ? [...children.seen].map((pid) => parents.get(pid)) : [...children.seen],
      [pidOf(launched[0]!)],
      "exactly one pi child ever ran, the journaled one",
    );

    // No orphans: every launched process is dead; the only worktree is the task's own, recorded one.
    for (const l of launched) {
      const pid = pidOf(l);
      await until(`child ${pid} gone`, () => (!alive(pid) ? true : undefined), 10_000);
    }
    await until(
      "no pi child of this home left",
      () => (processesMentioning(childOf).length === 0 ? true : undefined),
      10_000,
    ).catch(() => assert.fail(`orphan children: ${processesMentioning(childOf).join(", ")}`));
    const wts = existsSync(join(home, "worktrees")) ? readdirSync(join(home, "worktrees")) : [];
    assert.ok(
      wts.every((w) => w.endsWith(taskId!)),
      `orphan worktrees: ${wts.join(", ")}`,
    );
    const listed = execFileSync("git", ["worktree", "list", "--porcelain"], { cwd: repo, encoding: "utf8" })
      .split("\n")
      .filter((l) => l.startsWith("worktree "));
    assert.ok(listed.length <= 2, `git worktrees: ${listed.join("; ")}`);
  } finally {
    clearInterval(parentSampler);
    children.stop();
    await drv.stop().catch(() => undefined);
    for (const pid of children.seen) {
      try {
        process.kill(pid, "SIGKILL"); // an orphan of a failed case
      } catch {
        /* gone */
      }
    }
    if (taskId) {
      for (const e of journal(home, taskId).filter((x) => x.type === "launched")) {
        for (const target of [pidOf(e), -pidOf(e)]) {
          try {
            process.kill(target, "SIGKILL"); // a failed case must not leave its child running
          } catch {
            /* gone */
          }
        }
      }
    }
  }
}

const only = process.env.DSH_CRASH_POINTS?.trim() ? process.env.DSH_CRASH_POINTS.split(",").map(Number) : undefined;
POINTS.forEach((p, i) => {
  if (only && !only.includes(i)) return;
  test(
    `crash point ${i}: ${p.at === "launch_returned" ? "SIGKILL after runtime.launch returned, before journaling it" : p.at ? `SIGKILL after journaling ${p.at}` : `SIGKILL from outside after ${p.killAfter}`}${p.again ? ` and again after ${p.again}` : ""} (${p.life}, ${p.owner ? "pi owner" : "cli owner"}${p.runtime ? `, ${p.runtime}` : ""})`,
    { timeout: 240_000 },
    () => runPoint(p, i),
  );
});
