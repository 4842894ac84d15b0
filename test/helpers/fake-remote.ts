// Test helper: a fake remote daemon, run over a real ssh link as a machine's command instead of `dsh-herdr daemon
// connect` (the relay appends `daemon connect`; ignored). It speaks the daemon protocol on stdin/stdout as a
// hostile or broken machine would: its spawns are answered, its tasks "work", and their settled result is whatever
// the scenario says (a forged one, a schema-invalid one, an oversized one, one naming a local path as its patch, a
// large valid one, one with a diff whose patch may name another cycle), or it says nothing at all after hello (mute),
// or it no longer knows its tasks (lost). task.respond starts the task's next cycle there.
// The scenario is a JSON file named by $DSH_FAKE_REMOTE (re-read on every request, so a test switches it between
// connections); the tasks it spawned are kept next to it (state.json), so a reconnect knows them.
// Speaks both the newer link methods (task.follow pushes, task.fetch pages) and the older ones (task.subscribe,
// task.get, task.wait, task.patch), so the same tests run against a relay that uses either.
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

export type FakeSettle =
  | "valid"
  | "large"
  | "schema-invalid"
  | "forged"
  | "running-settled"
  | "oversized"
  | "path-stealing"
  | "with-diff";

export interface FakeScenario {
  mode: "normal" | "mute" | "lost";
  /** How the spawned tasks settle (after settleDelayMs); absent: they keep working. */
  settle?: FakeSettle;
  settleDelayMs?: number;
  /** path-stealing: the local path its diff.patchPath names. */
  stealPath?: string;
  /** large: the size of its finalMessage. */
  largeBytes?: number;
  /**
   * A reply over the frame limit keeps its last bytes back; they leave in one write with the first half of the next
   * frame, whose rest follows 100 ms later: the next frame starts in the same pipe chunk that ends the oversized one
   * (as ssh may deliver them), and the chunk ends mid-frame.
   */
  tailWithNext?: boolean;
  /** The first this many reads (task.fetch) of a settled result fail with an INTERNAL error; the link stays up. */
  fetchErrors?: number;
  /**
   * The first this many pages served of a settled result each name a version of their own, as a result that changes
   * between every two pages would (a read of it in pages starts again); later pages all name one version.
   */
  churnPages?: number;
  /**
   * Once a task's settle is due, the machine names this cycle for it (someone answered the task there, and the cycle
   * it started settled), in the push and in task.fetch; before that, the task's own cycle.
   */
  cycleThere?: number;
  /**
   * with-diff: the cycle the machine names when the settled task's diff.patch is read (someone answered the task there
   * between this daemon's read of the result and of its patch), and the patch it serves is that cycle's; absent: the
   * cycle the result names. `patchUnsettled`: the patch's pages say the cycle is not settled.
   */
  patchCycleThere?: number;
  patchUnsettled?: boolean;
}

interface FakeTask {
  taskId: string;
  requestId?: string;
  createdAt: number;
  cycle: number;
  closed?: boolean;
}

const file = process.env.DSH_FAKE_REMOTE ?? "";
const stateFile = join(dirname(file), "state.json");
const scenario = (): FakeScenario => JSON.parse(readFileSync(file, "utf8")) as FakeScenario;
const loadTasks = (): FakeTask[] =>
  existsSync(stateFile) ? (JSON.parse(readFileSync(stateFile, "utf8")) as FakeTask[]) : [];
function saveTasks(tasks: FakeTask[]): void {
  writeFileSync(`${stateFile}.tmp`, JSON.stringify(tasks));
  renameSync(`${stateFile}.tmp`, stateFile);
}

/** Pages of a settled result served with a version of their own so far (churnPages). */
let pagesChurned = 0;

/** The end of an oversized reply held back (tailWithNext), and the writes queued behind a split frame. */
let heldTail: string | undefined;
let writes: Promise<void> = Promise.resolve();
const send = (msg: unknown): void => {
  const line = `${JSON.stringify(msg)}\n`;
  writes = writes.then(async () => {
    if (heldTail !== undefined) {
      const half = Math.floor(line.length / 2);
      process.stdout.write(heldTail + line.slice(0, half));
      heldTail = undefined;
      await new Promise((r) => setTimeout(r, 100));
      process.stdout.write(line.slice(half));
      return;
    }
    if (line.length > 1024 * 1024 && scenario().tailWithNext === true) {
      process.stdout.write(line.slice(0, -16));
      heldTail = line.slice(-16);
      return;
    }
    process.stdout.write(line);
  });
  // A failed write must not stop every later one (the chain would stay rejected).
  writes = writes.catch((e: unknown) => void process.stderr.write(`fake-remote: ${String(e)}\n`));
};
const OVERSIZED_BYTES = 40 * 1024 * 1024;

function newId(): string {
  const chars = "0123456789abcdefghijklmnopqrstuvwxyz";
  let s = "t";
  for (let i = 0; i < 11; i++) s += chars[Math.floor(Math.random() * chars.length)];
  return s;
}

function live(t: FakeTask): Record<string, unknown> {
  return {
    schemaVersion: 1,
    taskId: t.taskId,
    status: "working",
    role: "worker",
    agent: { name: "fake-worker", kind: "pi", model: "fake/model", thinking: "off", runtime: "headless" },
    herdrStatus: "working",
    summary: "working on it",
    timing: { createdAt: t.createdAt, promptedAt: t.createdAt },
    nextAction: "wait",
  };
}

function settled(t: FakeTask, s: FakeScenario): Record<string, unknown> {
  const done = {
    ...live(t),
    status: "completed",
    herdrStatus: "done",
    summary: "done there",
    nextAction: "none",
    timing: { createdAt: t.createdAt, promptedAt: t.createdAt, settledAt: t.createdAt + 1, elapsedMs: 1 },
    finalMessage: "done there",
  };
  switch (s.settle) {
    case "large":
      return { ...done, finalMessage: `LARGE-REPORT ${"x".repeat(s.largeBytes ?? 1_500_000)} END` };
    case "schema-invalid":
      return { ...done, usage: { assistant: "many", toolCalls: 1, outputTokens: 2 } };
    case "forged":
      return { ...done, taskId: "tzzzzzzzzzzz", summary: "someone else's result" };
    case "running-settled":
      return { ...done, status: "running", nextAction: "wait" };
    case "path-stealing":
      return {
        ...done,
        diff: {
          baselineHead: null,
          stat: " secret | 1 +",
          files: ["secret"],
          untracked: [],
          patchPath: s.stealPath ?? "/etc/passwd",
          patchBytes: 100,
          truncated: false,
          dirtyAtStart: [],
        },
      };
    case "with-diff":
      return {
        ...done,
        diff: {
          baselineHead: null,
          stat: " a.txt | 1 +",
          files: ["a.txt"],
          untracked: [],
          patchPath: `/home/fake/.dsh/herdr/tasks/${t.taskId}/diff.patch`,
          patchBytes: Buffer.byteLength(patchOf(t.cycle)),
          truncated: false,
          dirtyAtStart: [],
        },
      };
    default:
      return done;
  }
}

/** The diff.patch a with-diff task's cycle leaves there. */
function patchOf(cycle: number): string {
  return `--- a/a.txt\n+++ b/a.txt\n@@ -0,0 +1 @@\n+the work of cycle ${cycle}\n`;
}

/** The task's result now: settled once its delay passed (the scenario has a settle), else working. */
function current(t: FakeTask): { result: Record<string, unknown>; settled: boolean; bytes: number } {
  const s = scenario();
  const due = s.settle !== undefined && Date.now() >= t.createdAt + (s.settleDelayMs ?? 300);
  const result = due ? settled(t, s) : live(t);
  if (t.closed)
    return {
      result: { ...result, status: "closed", nextAction: "none" },
      settled: true,
      bytes: Buffer.byteLength(JSON.stringify(result)),
    };
  const bytes = due && s.settle === "oversized" ? OVERSIZED_BYTES : Buffer.byteLength(JSON.stringify(result));
  return { result, settled: due, bytes };
}

let following = false;
let fetchesFailed = 0;
let subscribed = false;
const pushTimers = new Map<string, NodeJS.Timeout>();

/** Push the task's settle when it is due (task.follow, or the older task.subscribe's status push). */
function schedulePush(t: FakeTask): void {
  const s = scenario();
  if (s.settle === undefined || pushTimers.has(t.taskId)) return;
  const wait = Math.max(0, t.createdAt + (s.settleDelayMs ?? 300) - Date.now());
  pushTimers.set(
    t.taskId,
    setTimeout(() => {
      if (scenario().mode !== "normal") return;
      const c = current(t);
      // A timer may fire a few ms before Date.now() reaches the due time (it counts from the event loop's cached
      // clock): the result is still the working one then, and pushing it as settled would be a lie of the fake's
      // own. Wait out the rest.
      if (!c.settled) {
        pushTimers.delete(t.taskId);
        schedulePush(t);
        return;
      }
      if (following)
        send({
          method: "task.followed",
          params: {
            taskId: t.taskId,
            cycle: scenario().cycleThere ?? t.cycle,
            status: c.result.status,
            settled: true,
            bytes: c.bytes,
            ...(c.bytes <= 256 * 1024 ? { result: c.result } : {}),
          },
        });
      if (subscribed && c.bytes <= 1024 * 1024)
        send({ method: "task.status", params: { taskId: t.taskId, status: c.result.status, result: c.result } });
    }, wait),
  );
}

type Params = Record<string, unknown>;

function notFound(id: unknown): never {
  throw Object.assign(new Error(`no task ${String(id)}`), { code: "TASK_NOT_FOUND" });
}

async function handle(method: string, p: Params): Promise<unknown> {
  const s = scenario();
  const tasks = loadTasks();
  const task = (id: unknown): FakeTask => {
    if (s.mode === "lost") notFound(id);
    return tasks.find((t) => t.taskId === id) ?? notFound(id);
  };
  switch (method) {
    case "daemon.status":
      return { pid: process.pid, version: "fake", openTasks: tasks.length };
    case "task.spawn": {
      let t = p.requestId !== undefined ? tasks.find((x) => x.requestId === p.requestId) : undefined;
      if (!t) {
        t = {
          taskId: newId(),
          createdAt: Date.now(),
          cycle: 1,
          ...(typeof p.requestId === "string" ? { requestId: p.requestId } : {}),
        };
        tasks.push(t);
        saveTasks(tasks);
      }
      schedulePush(t);
      return { taskId: t.taskId, subagent_id: t.taskId, name: "fake-worker", status: "starting", queued: false };
    }
    case "task.follow":
      following = true;
      for (const t of tasks) schedulePush(t);
      return { following: true };
    case "task.subscribe":
      subscribed = true;
      for (const t of tasks) schedulePush(t);
      return { subscribed: true };
    case "task.get":
      return current(task(p.taskId)).result;
    case "task.wait": {
      const t = task((p.taskIds as string[])[0]);
      const deadline = Date.now() + Number(p.timeoutMs ?? 20_000);
      const settledStatus = (st: unknown) =>
        ["completed", "failed", "gone", "closed", "blocked", "interrupted"].includes(String(st));
      for (;;) {
        const c = current(t);
        // As a daemon's wait: it answers a settled status (a "settled" running one waits out its round).
        if ((c.settled && settledStatus(c.result.status)) || Date.now() >= deadline)
          return { results: [c.result], timedOut: !c.settled };
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    case "task.fetch": {
      const t = task(p.taskId);
      const c = current(t);
      if (c.settled && fetchesFailed < (s.fetchErrors ?? 0)) {
        fetchesFailed++;
        throw Object.assign(new Error("the store is busy (a fake's error)"), { code: "INTERNAL" });
      }
      const head = {
        taskId: t.taskId,
        part: p.part,
        cycle: c.settled ? (s.cycleThere ?? t.cycle) : t.cycle,
        status: c.result.status,
        settled: c.settled,
        offset: p.offset ?? 0,
      };
      if (p.part === "patch") {
        if (s.settle !== "with-diff" || !c.settled)
          return { ...head, exists: false, size: 0, data: "", version: "none" };
        const cycle = s.patchCycleThere ?? head.cycle;
        const patch = Buffer.from(patchOf(cycle));
        const off = Number(p.offset ?? 0);
        return {
          ...head,
          cycle,
          settled: s.patchUnsettled !== true,
          exists: true,
          size: patch.length,
          data: patch.subarray(off, off + Number(p.limit ?? 512 * 1024)).toString("base64"),
          version: `patch-${cycle}`,
        };
      }
      const bytes =
        c.bytes === OVERSIZED_BYTES ? Buffer.alloc(OVERSIZED_BYTES, 32) : Buffer.from(JSON.stringify(c.result));
      const off = Number(p.offset ?? 0);
      const lim = Number(p.limit ?? 512 * 1024);
      return {
        ...head,
        exists: true,
        size: bytes.length,
        data: bytes.subarray(off, off + lim).toString("base64"),
        version: !c.settled ? "live" : pagesChurned < (s.churnPages ?? 0) ? `settled-${++pagesChurned}` : "settled",
      };
    }
    case "task.patch":
      task(p.taskId);
      return { taskId: p.taskId, patch: null, truncated: false };
    case "task.close": {
      const t = task(p.taskId);
      t.closed = true;
      saveTasks(tasks);
      return current(t).result;
    }
    case "task.abort":
      task((p.taskIds as string[])[0]);
      return { aborted_ids: p.taskIds, missing_ids: [], foreign_ids: [] };
    case "task.respond": {
      // A follow-up: the next cycle starts there and works until its settle is due (settleDelayMs from now).
      const t = task(p.taskId);
      t.cycle++;
      t.createdAt = Date.now();
      saveTasks(tasks);
      clearTimeout(pushTimers.get(t.taskId));
      pushTimers.delete(t.taskId);
      schedulePush(t);
      return { taskId: t.taskId, subagent_id: t.taskId, cycle: t.cycle };
    }
    default:
      throw Object.assign(new Error(`${method} is not served by this fake`), { code: "UNKNOWN_METHOD" });
  }
}

let buf = "";
process.stdin.on("data", (c: Buffer) => {
  buf += c.toString("utf8");
  for (let nl; (nl = buf.indexOf("\n")) >= 0; ) {
    const line = buf.slice(0, nl);
    buf = buf.slice(nl + 1);
    let msg: { id?: number; method?: string; params?: Params };
    try {
      msg = JSON.parse(line) as typeof msg;
    } catch {
      continue;
    }
    if (msg.method === "hello") {
      send({ id: msg.id, result: { daemonVersion: "0.0.0-fake", protocol: 1, pid: process.pid, kind: "cli" } });
      continue;
    }
    if (scenario().mode === "mute") continue; // answers hello, then nothing
    handle(msg.method ?? "", msg.params ?? {}).then(
      (result) => send({ id: msg.id, result }),
      (e: Error & { code?: string }) => send({ id: msg.id, error: { code: e.code ?? "INTERNAL", message: e.message } }),
    );
  }
});
process.stdin.on("end", () => process.exit(0));
