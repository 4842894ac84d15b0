// The headless runtime with real processes: exact env/argv, stdin FIFO, exit.json, kill -9, close escalation,
// and a child launched by one "daemon" process and driven by another.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { createHeadlessRuntime } from "../../src/runtime/headless/runtime.js";
import { readState } from "../../src/runtime/headless/files.js";
import { isDshError } from "../../src/core/errors.js";
import type { RuntimeEvent, RuntimeHandle } from "../../src/runtime/types.js";
import { waitFor } from "../helpers/tmux.js";

// Prints its env var and argv as one JSON line, then waits for one stdin line and exits 3.
const ECHO_CHILD = `
process.stdout.write("ARGS:" + JSON.stringify({ k: process.env.DSH_K, argv: process.argv.slice(1), cwd: process.cwd() }) + "\\n");
let buf = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => { buf += d; const i = buf.indexOf("\\n");
  if (i >= 0) { process.stdout.write("GOT:" + buf.slice(0, i) + "\\n"); setTimeout(() => process.exit(3), 50); } });
`;

let dir: string;
let n = 0;
const started: RuntimeHandle[] = [];
const rt = createHeadlessRuntime({ closeGraceMs: 500, watchIntervalMs: 50 });
const taskDir = () => join(dir, `task${++n}`);

before(() => {
  dir = mkdtempSync(join(tmpdir(), "dsh-headless-"));
});
after(async () => {
  for (const h of started) await rt.close(h);
  rmSync(dir, { recursive: true, force: true });
});

const dead = (pid: number) => {
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
};

test("headless: a plain program gets env and argv exactly, reads a line from the FIFO, exit code is recorded", async () => {
  const td = taskDir();
  const marker = join(dir, "pwned");
  const envValue = "line1\nline2 $(touch " + marker + ");";
  const args = [`$(touch ${marker}) ; "a b" 'c'`, ";", "-n", "", "*"];
  const h = await rt.launch({
    taskId: "tplain000001",
    name: "plain",
    argv: [process.execPath, "-e", ECHO_CHILD, ...args],
    env: { DSH_K: envValue },
    cwd: dir,
    taskDir: td,
  });
  started.push(h);
  assert.equal(h.runtime, "headless");
  assert.equal(h.stdinPath, join(td, "stdin.fifo"));
  assert.ok(statSync(h.stdinPath!).isFIFO());
  const state = readState(join(td, "headless.json"));
  assert.equal(state?.childPid, h.pid);
  assert.equal(state?.protocol, "raw");

  const line = await waitFor("the ARGS line", async () =>
    readFileSync(h.stdoutPath!, "utf8")
      .split("\n")
      .find((l) => l.startsWith("ARGS:")),
  );
  assert.deepEqual(JSON.parse(line.slice(5)), { k: envValue, argv: args, cwd: dir });
  assert.equal(existsSync(marker), false, "nothing may be interpreted by a shell");
  assert.equal(await rt.isAlive(h), true);
  assert.equal(await rt.agentState!(h), "unknown");
  assert.equal(await rt.exitStatus(h), null);

  await rt.sendText(h, "hello from the owner");
  await waitFor("exit.json", async () => rt.exitStatus(h));
  assert.equal(await rt.isAlive(h), false);
  assert.deepEqual(await rt.exitStatus(h), { code: 3, signal: null });
  assert.match(await rt.readOutput(h), /GOT:hello from the owner/);
  assert.equal(await rt.agentState!(h), "missing");
  await assert.rejects(rt.sendText(h, "late"), (e) => isDshError(e) && e.code === "PANE_GONE");
  await waitFor("the wrapper to exit", async () => dead(state!.wrapperPid));
  await rt.close(h); // idempotent on a finished child
});

test("headless: bad input is refused with LAUNCH_FAILED and starts nothing", async () => {
  const td = taskDir();
  await assert.rejects(
    rt.launch({
      taskId: "tbad00000001",
      name: "w",
      argv: [process.execPath],
      env: {},
      cwd: join(dir, "nope"),
      taskDir: td,
    }),
    (e) => isDshError(e) && e.code === "LAUNCH_FAILED" && /does not exist/.test(e.message),
  );
  assert.equal(existsSync(td), false, "no task files for a refused launch");
  await assert.rejects(
    rt.launch({
      taskId: "tbad00000001",
      name: "w",
      argv: [join(dir, "no-such-program")],
      env: {},
      cwd: dir,
      taskDir: td,
    }),
    (e) => isDshError(e) && e.code === "LAUNCH_FAILED" && /ENOENT/.test(e.message),
  );
  await assert.rejects(
    rt.launch({ taskId: "tbad00000001", name: "w", argv: [], env: {}, cwd: dir, taskDir: td }),
    (e) => isDshError(e) && e.code === "LAUNCH_FAILED" && /argv is empty/.test(e.message),
  );
});

test("headless: kill -9 of the child → not alive, exit shows SIGKILL, watch reports it", async () => {
  const h = await rt.launch({
    taskId: "tkill0000001",
    name: "victim",
    argv: [process.execPath, "-e", "setInterval(() => {}, 1000)"],
    env: {},
    cwd: dir,
    taskDir: taskDir(),
  });
  started.push(h);
  assert.equal(await rt.isAlive(h), true);
  const events: RuntimeEvent[] = [];
  const stop = rt.watch!(h, (e) => events.push(e));
  process.kill(h.pid!, "SIGKILL");
  await waitFor("the watch event", async () => events.length > 0);
  stop();
  assert.deepEqual(events, [{ type: "exited", exit: { code: null, signal: "SIGKILL" } }]);
  assert.equal(await rt.isAlive(h), false);
  assert.deepEqual(await rt.exitStatus(h), { code: null, signal: "SIGKILL" });
});

test("headless: close sends SIGTERM to the group and escalates to SIGKILL for a child that ignores it", async () => {
  const polite = await rt.launch({
    taskId: "tclose000001",
    name: "polite",
    argv: [process.execPath, "-e", "setInterval(() => {}, 1000)"],
    env: {},
    cwd: dir,
    taskDir: taskDir(),
  });
  started.push(polite);
  await rt.close(polite);
  assert.equal(await rt.isAlive(polite), false);
  assert.deepEqual(await waitFor("exit.json", async () => rt.exitStatus(polite)), { code: null, signal: "SIGTERM" });

  const stubborn = await rt.launch({
    taskId: "tclose000002",
    name: "stubborn",
    env: {},
    cwd: dir,
    taskDir: taskDir(),
    argv: [
      process.execPath,
      "-e",
      "process.on('SIGTERM', () => console.log('ignored TERM')); console.log('ready'); setInterval(() => {}, 1000)",
    ],
  });
  started.push(stubborn);
  await waitFor("the handler to be installed", async () => /ready/.test(await rt.readOutput(stubborn)));
  await rt.close(stubborn);
  assert.equal(await rt.isAlive(stubborn), false);
  assert.deepEqual(await rt.exitStatus(stubborn), { code: null, signal: "SIGKILL" });
  assert.match(await rt.readOutput(stubborn), /ignored TERM/);
});

test("headless: a child launched by one daemon process is driven by another after the first is gone", async () => {
  const td = taskDir();
  const runtimeUrl = new URL("../../src/runtime/headless/runtime.js", import.meta.url).href;
  const launcher = `
    const { createHeadlessRuntime } = await import(${JSON.stringify(runtimeUrl)});
    const h = await createHeadlessRuntime().launch({ taskId: "trestart0001", name: "survivor",
      argv: [process.execPath, "-e", ${JSON.stringify(ECHO_CHILD)}, "x"], env: { DSH_K: "k" }, cwd: ${JSON.stringify(dir)}, taskDir: ${JSON.stringify(td)} });
    console.log(JSON.stringify(h));`;
  const r = await execa(process.execPath, ["--input-type=module", "-e", launcher], { timeout: 20_000 });
  const h = JSON.parse(String(r.stdout)) as RuntimeHandle;
  started.push(h);
  // The launching process has exited; a fresh runtime instance (the "restarted daemon") takes over.
  const again = createHeadlessRuntime();
  assert.equal(await again.isAlive(h), true);
  await waitFor("the ARGS line", async () => /ARGS:/.test(await again.readOutput(h)));
  await again.sendText(h, "after restart");
  assert.deepEqual(await waitFor("exit.json", async () => again.exitStatus(h)), { code: 3, signal: null });
  assert.match(await again.readOutput(h), /GOT:after restart/);
});

test("headless: a reused pid is not mistaken for the child", async () => {
  const h = await rt.launch({
    taskId: "treuse000001",
    name: "short",
    argv: [process.execPath, "-e", "setTimeout(() => {}, 100)"],
    env: {},
    cwd: dir,
    taskDir: taskDir(),
  });
  await waitFor("exit.json", async () => rt.exitStatus(h));
  // Point the handle at a live process that is not ours (this test runner): start times differ.
  const forged: RuntimeHandle = { ...h, pid: process.pid };
  assert.equal(await rt.isAlive(forged), false);
});

test("headless: find rebuilds the handle launch returned for a live child, and finds nothing once it is gone or never ran", async () => {
  const td = taskDir();
  assert.equal(await rt.find!({ taskId: "tfind0000001", taskDir: td, name: "finder" }), undefined, "no launch yet");
  const h = await rt.launch({
    taskId: "tfind0000001",
    name: "finder",
    argv: [process.execPath, "-e", "setInterval(() => {}, 1000)"],
    env: {},
    cwd: dir,
    taskDir: td,
  });
  started.push(h);
  // A second runtime instance stands for the next daemon: it knows only the task's id, dir and name.
  const next = createHeadlessRuntime({ closeGraceMs: 500 });
  const found = await next.find!({ taskId: "tfind0000001", taskDir: td, name: "finder" });
  assert.deepEqual(found, h);
  assert.equal(await next.isAlive(found!), true);
  assert.equal(
    await rt.find!({ taskId: "tother000001", taskDir: taskDir(), name: "finder" }),
    undefined,
    "another task's dir holds no child",
  );
  await next.close(found!);
  assert.ok(dead(h.pid!));
  assert.equal(
    await next.find!({ taskId: "tfind0000001", taskDir: td, name: "finder" }),
    undefined,
    "an ended child is not found",
  );
});
